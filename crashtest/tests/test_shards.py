"""A crash test spread over CI machines: `--shard K/N` gives every point to exactly one shard,
the same way on every machine, and `merge` joins the shards' reports into one — refusing
reports that are not one crash test's shards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from temporal_crashtest._errors import InputError
from temporal_crashtest._plan.reference import CellPoint
from temporal_crashtest._plan.shards import parse_shard, shard_points
from temporal_crashtest._points.points import Moment, Untested
from temporal_crashtest._report.input import read_report
from temporal_crashtest._report.merge import merge_reports
from temporal_crashtest._report.report import Cell, Report
from test_cli import NOTES
from test_groups import points, sequence


def names(chosen: list[CellPoint]) -> list[str]:
    return [p.crash_at for p in chosen]


def test_every_point_is_in_exactly_one_shard_and_the_split_is_the_same_each_time() -> None:
    every = points(sequence(100))
    every += [CellPoint(Moment.RESET, b) for b in sequence(100)[:5]]  # runs of their own
    for n in (1, 2, 4, 7, 300):
        shards = [names(shard_points(every, k, n)) for k in range(1, n + 1)]
        flat = [p for shard in shards for p in shard]
        assert sorted(flat) == sorted(names(every)), n
        assert len(flat) == len(set(flat)), n
        assert shards == [names(shard_points(list(reversed(every)), k, n)) for k in range(1, n + 1)]
    four = [shard_points(every, k, 4) for k in range(1, 5)]
    for shard in four:  # each kind spread by weight (a later point replays more), kept together
        effects = [p.boundary.number for p in shard if p.moment is Moment.AFTER_EFFECT]
        assert 15 <= len(effects) <= 35 and effects == list(range(effects[0], effects[-1] + 1))
        assert any(p.moment is Moment.AFTER_CHECKPOINT for p in shard)


@pytest.mark.parametrize("text", ["3", "0/4", "5/4", "a/b", "1/999"])
def test_a_bad_shard_is_one_error(text: str) -> None:
    with pytest.raises(InputError, match="--shard"):
        parse_shard(text)


PLAN = ["after-effect:1", "after-checkpoint:1", "after-effect:2"]


def report(
    shard: str | None, *crash_at: str, workflow: str = "W", plan: list[str] = PLAN
) -> Report:
    cells = [
        Cell(workflow_id=f"w-{c}", crash_at=c, activity="a", matches=c != "after-effect:2",
             observed=None, diff=None, recovery_s=None, seconds=1.0)
        for c in crash_at
    ]  # fmt: skip
    return Report(workflow=workflow, activities=["a"], reference={"x": 1}, cells=cells,
                  seconds=2.0, shard=shard, plan=list(plan) if shard else [])  # fmt: skip


def test_merged_cells_are_in_the_runs_order_effects_first() -> None:
    plan = ["after-effect:1", "effect:2.1", "after-checkpoint:1", "effect:1.2", "effect:1.1",
            "after-effect:2"]  # fmt: skip
    one = report("1/2", *plan[:3], plan=plan)
    two = report("2/2", *plan[3:], plan=plan)
    assert [c.crash_at for c in merge_reports([("a", two), ("b", one)]).cells] == [
        "effect:1.1", "effect:1.2", "after-effect:1", "after-checkpoint:1",
        "effect:2.1", "after-effect:2",
    ]  # fmt: skip


def test_merge_refuses_what_is_not_one_crash_tests_shards() -> None:
    one, two = (
        report("1/2", "after-effect:1", "after-checkpoint:1"),
        report("2/2", "after-effect:2"),
    )
    merged = merge_reports([("a", two), ("b", one)])
    assert [c.crash_at for c in merged.cells] == [
        "after-effect:1",
        "after-checkpoint:1",
        "after-effect:2",
    ]
    assert merged.shard is None and not merged.ok
    for reports, message in [
        ([("a", one)], "shard 2/2 is missing"),
        ([("a", one), ("b", one)], "shard 1/2 is given twice"),
        ([("a", one), ("b", replace(two, workflow="Other"))], "differ in their workflow"),
        ([("a", one), ("b", replace(two, reference={"x": 2}))], "differ in their reference"),
        ([("a", report(None, "after-effect:1"))], "not a shard's report"),
        ([("a", one), ("b", report("2/3", "x:1"))], "is shard 2/3, a of 2"),
        # shards run with different --points: a point no shard tested would be dropped silently
        ([("a", one), ("b", replace(two, plan=PLAN[:2]))], "differ in their plan"),
        ([("a", one), ("b", report("2/2"))], "make 2 of the plan's 3 crash points"),
        ([("a", one), ("b", replace(two, real_timeouts=True))], "differ in their real_timeouts"),
    ]:
        with pytest.raises(InputError, match=message):
            merge_reports(reports)


def test_merge_checks_the_points_not_their_count() -> None:
    """The probe: shard 1/2 run with `--points in-task:1,in-task:2`, shard 2/2 with
    `--points after-effect:1,after-effect:2`: both said "2 points", and merged into one crash
    test of 2 points. Each shard now carries its test's plan, and the shards must make exactly
    it. A hand-edited shard that lists a point both tested and not tested is refused too; a
    point not reached (listed as not tested, no verdict) is one of the plan's."""
    one = report("1/2", "in-task:1", plan=["in-task:1", "in-task:2"])
    two = report("2/2", "after-effect:1", plan=["after-effect:1", "after-effect:2"])
    with pytest.raises(InputError, match="differ in their plan"):
        merge_reports([("a", one), ("b", two)])
    forged = replace(two, plan=one.plan, cells=[*two.cells, *report(None, "in-task:2").cells])
    with pytest.raises(InputError, match="after-effect:1 is not among the crash points"):
        merge_reports([("a", one), ("b", forged)])
    both = replace(
        report("2/2", "after-effect:2"),
        untested=[Untested("after-effect:2 (a)", "not among the crash points asked for")],
    )
    with pytest.raises(InputError, match="after-effect:2 is both tested and listed"):
        merge_reports([("a", report("1/2", "after-effect:1", "after-checkpoint:1")), ("b", both)])
    unreached = replace(
        report("2/2"), untested=[Untested("after-effect:2 (a)", "not reached: the run went on")]
    )
    merged = merge_reports([("a", report("1/2", *PLAN[:2])), ("b", unreached)])
    assert [c.crash_at for c in merged.cells] == PLAN[:2]
    assert merged.ok and merged.untested == unreached.untested


def test_shards_run_alone_and_merge_into_the_whole_test(
    app_env: dict[str, str], tmp_path: Path
) -> None:
    """The unkeyed notes in two shards, each on its own, then merged: the verdicts of the whole
    test (both notes written twice)."""
    verdicts = {}
    for k in (1, 2):
        out = tmp_path / f"{k}.json"
        command = [sys.executable, "-m", "temporal_crashtest", "run", *NOTES, "--shard", f"{k}/2",
                   "--json", str(out), "--junit-xml", str(tmp_path / f"{k}.xml")]  # fmt: skip
        done = subprocess.run(command, env=app_env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=180)  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert f"shard {k}/2" in done.stdout, done.stdout
        verdicts[k] = {
            c["crash_at"]: c["matches"]
            for c in json.loads((tmp_path / f"{k}.json").read_text())["cells"]
        }
    assert not set(verdicts[1]) & set(verdicts[2])
    merge = [sys.executable, "-m", "temporal_crashtest", "merge", str(tmp_path / "1.json"),
             str(tmp_path / "2.json"), "--json", str(tmp_path / "all.json")]  # fmt: skip
    done = subprocess.run(merge, env=app_env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 1, done.stderr
    merged = json.loads((tmp_path / "all.json").read_text())
    got = {c["crash_at"]: c["matches"] for c in merged["cells"]}
    assert got == verdicts[1] | verdicts[2]
    assert {p for p, ok in got.items() if not ok} == {"after-effect:1", "after-effect:2"}
    assert "2 of 3 crash points do not end" in done.stdout.splitlines()[-1], done.stdout
    # a missing shard is one line, exit 2
    lone = subprocess.run(merge[:5], env=app_env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert lone.returncode == 2 and "shard 2/2 is missing" in lone.stderr, lone.stderr


def good_report() -> dict[str, Any]:
    data = report("1/1", "after-effect:1", "after-effect:2", "after-checkpoint:1").to_json()
    data["ui_url"] = "http://localhost:8233"
    data["timelines"] = {"w": {"workflow_id": "w", "run_id": "r", "length": 2.0, "bars": [],
                               "marks": [{"at": 1.0, "what": "worker killed"}]}}  # fmt: skip
    return data


def hostile(change: Callable[[dict[str, Any]], object]) -> bytes:
    data = good_report()
    change(data)
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (hostile(lambda d: d["cells"][0].update(matches="no")), "matches: true or false"),
        (hostile(lambda d: d.update(ui_url="javascript:alert(1)")), "ui_url: a web address"),
        (hostile(lambda d: d.update(seconds="12")), "seconds: a number"),
        (hostile(lambda d: d["cells"][0].update(seconds=1e300)), "a number of seconds"),
        (hostile(lambda d: d["timelines"]["w"].update(length=1e-300)), "length"),
        (hostile(lambda d: d.update(shard="2/1")), "shard: K/N"),
        (hostile(lambda d: d.update(extra=1)), "unknown field 'extra'"),
        (hostile(lambda d: d.update(runs=-1)), "runs: a whole number"),
        (hostile(lambda d: d.update(cells=[1])), r"cells\[0\]: an object"),
        (b'{"seconds": Infinity}', "Infinity is not a number JSON holds"),
        (b"[" * 100_000, "not a crash test's --json report"),
    ],
)
def test_merge_reads_each_field_as_untrusted_input(tmp_path: Path, text: bytes, said: str) -> None:
    path = tmp_path / "shard.json"
    path.write_bytes(text)
    with pytest.raises(InputError, match=said):
        read_report(path)


def test_a_report_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (Path("/dev/zero"), fifo):  # a FIFO once blocked for ever, /dev/zero filled memory
        with pytest.raises(InputError, match="not a regular file"):
            read_report(path)
    good = tmp_path / "good.json"
    good.write_bytes(json.dumps(good_report()).encode())
    assert read_report(good).ui_url == "http://localhost:8233"
