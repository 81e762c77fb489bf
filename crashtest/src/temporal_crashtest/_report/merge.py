"""`merge`: one report from the shards' reports of one crash test (`merge_reports`), refused when
they differ in what every shard shares (the workflow, its reference, the plan of points) or a
shard's cells do not match its plan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from temporal_crashtest._errors import CrashPointError, InputError
from temporal_crashtest._plan.shards import parse_shard
from temporal_crashtest._points.points import NOT_REACHED, CrashPoint, Moment, Untested
from temporal_crashtest._report.report import Cell, Report


def _cell_order(report: Report) -> dict[str, int]:
    """A crash point's place: by boundary, then moment, then effect (`effect:3.2`), then repeat
    (`after-effect:3*2`)."""

    def key(crash_at: str) -> tuple[int, int, int, int]:
        try:
            point = CrashPoint.parse(crash_at)
        except CrashPointError:  # checked as the shard was read: not reached
            return (0, len(Moment), 0, 1)
        return (point.position or 0, list(Moment).index(point.moment), point.effect, point.repeat)

    names = sorted({c.crash_at for c in report.cells}, key=key)
    return {name: i for i, name in enumerate(names)}


# What every shard of one crash test shares: the workflow and its input (the reference), the
# versions, the crash points chosen (the plan), the mode.
_SAME_IN_EVERY_SHARD = (
    "workflow",
    "activities",
    "reference",
    "reference_end",
    "deploy_to",
    "deployed_reference",
    "pinned",
    "plan",
    "real_timeouts",
)


def merge_reports(reports: Sequence[tuple[str, Report]]) -> Report:
    """One report from the shards' (named by where each came from): InputError when they are
    not the shards of one crash test, or one is missing or given twice."""
    if not reports:
        raise InputError("merge: no report given")
    first_name, first = reports[0]
    seen: dict[int, str] = {}
    total = None
    for name, report in reports:
        if report.shard is None:
            raise InputError(f"merge: {name} is not a shard's report (made without --shard)")
        k, n = parse_shard(report.shard)
        total = n if total is None else total
        if n != total:
            raise InputError(f"merge: {name} is shard {report.shard}, {first_name} of {total}")
        if k in seen:
            raise InputError(f"merge: shard {k}/{n} is given twice ({seen[k]}, {name})")
        seen[k] = name
        for what in _SAME_IN_EVERY_SHARD:
            if getattr(report, what) != getattr(first, what):
                raise InputError(
                    f"merge: {name} and {first_name} differ in their {what}: not the shards of "
                    "one crash test (the same workflow, input, versions, points and mode)"
                )
    assert total is not None
    missing = [f"{k}/{total}" for k in range(1, total + 1) if k not in seen]
    if missing:
        raise InputError(f"merge: shard {', '.join(missing)} is missing")
    cells: list[Cell] = [c for _, r in reports for c in r.cells]
    _check_the_plan(first.plan, cells, [u for _, r in reports for u in r.untested])
    merged = replace(
        first,
        cells=cells,
        seconds=max(r.seconds for _, r in reports),
        warnings=list(dict.fromkeys(w for _, r in reports for w in r.warnings)),
        untested=list({(u.boundary, u.why): u for _, r in reports for u in r.untested}.values()),
        logs=None,
        runs=sum(r.runs for _, r in reports),
        groups=sum(r.groups for _, r in reports),
        shard=None,
        plan=[],
        timelines={k: v for _, r in reports for k, v in r.timelines.items()},
    )
    order = _cell_order(merged)
    return replace(merged, cells=sorted(cells, key=lambda c: order[c.crash_at]))


def _check_the_plan(plan: list[str], cells: list[Cell], untested: list[Untested]) -> None:
    """Between them the shards made every point of the plan once, as a cell or listed as not
    reached, and none both; InputError naming the first point that is not so."""
    tested = [c.crash_at for c in cells]
    listed = {u.boundary.split(" ", 1)[0]: u.why for u in untested}
    unreached = [p for p, why in listed.items() if why.startswith(NOT_REACHED)]
    if twice := sorted({p for p in tested if tested.count(p) > 1}):
        raise InputError(f"merge: {twice[0]} is in two shards: not one crash test's shards")
    if both := sorted(set(tested) & set(listed)):
        raise InputError(
            f"merge: {both[0]} is both tested and listed as not tested: a report was edited"
        )
    made = set(tested) | set(unreached)
    if extra := sorted(made - set(plan)):
        raise InputError(
            f"merge: {extra[0]} is not among the crash points every shard names (its plan): "
            "not one crash test's shards"
        )
    if missing := [p for p in plan if p not in made]:
        raise InputError(
            f"merge: the shards make {len(made)} of the plan's {len(plan)} crash points "
            f"({missing[0]} in none): a shard's run did not finish or was edited"
        )
