"""The crash matrix's cells, and which outcome each design is expected to have."""

from __future__ import annotations

from pydantic import BaseModel

from agent.steps import STEP_NAMES, STEPS, Effect
from infra.errors import ConfigError
from journal.crash_points import StepCrashPoint, StepMoment

JOURNAL_DESIGNS = ("naive", "checkpoint", "durable", "transactional")
TEMPORAL_DESIGNS = ("none", "run", "workflow")  # the Temporal key strategies
DBOS_DESIGNS = ("none", "keyed")  # the agent on DBOS: no key, or workflow id + step id
# Both engines at the same points: after every step's effect, after every checkpoint that has a
# next step (a Temporal worker has no next activity to crash in after the last one).
CRASH_POINTS = (
    "none",
    *(f"{StepMoment.AFTER_EFFECT}:{step.number}" for step in STEPS),
    *(f"{StepMoment.AFTER_CHECKPOINT}:{step.number}" for step in STEPS[:-1]),
)
RESET = "reset"  # Temporal only: reset a completed run to before the order step
# Temporal only: orders at the grocer, whose keys live 1 s, and the week run again after the key
# expired: by a retry (the worker is killed after placing the order, the run resumed later), by a
# reset of the finished run to before the order, by a re-run of the business id (as
# `starter.py --again` or a start after the history's retention makes). With the effect check
# (look the order up by its reference first) one order; without it, two.
KEY_EXPIRY = "key-expiry"
RESET_KEY_EXPIRY = "reset-key-expiry"
RERUN_KEY_EXPIRY = "rerun-key-expiry"
GROCER_ROWS = (KEY_EXPIRY, RESET_KEY_EXPIRY, RERUN_KEY_EXPIRY)
UNCHECKED = "workflow-unchecked"  # workflow keys, ORDER_EFFECT_CHECK=off: the grocer rows only
# Steps that write something a repeat would duplicate: model calls (recorded, and paid for),
# the order, the email. The pantry check only reads.
EFFECT_STEPS = frozenset(step.number for step in STEPS if step.effect is not Effect.NONE)


class MatrixCell(BaseModel, frozen=True):
    engine: str  # a name in crashlab.engines.ENGINES
    design: str
    crash_at: str

    @property
    def label(self) -> str:
        return f"{self.engine}/{self.design} {self.crash_at}"

    @property
    def expected_match(self) -> bool:
        """Whether this design is expected to end in exactly the no-crash state here."""
        if self.crash_at == "none":
            return True
        if self.crash_at in GROCER_ROWS:
            return self.design == "workflow"  # the effect check finds the order
        if self.crash_at == RESET:
            return self.design == "workflow"  # only workflow-id keys survive a reset
        if self.design == "naive":
            return False  # starts over: repeats at least the first model call
        if self.design in ("checkpoint", "none"):  # a journal, history or DBOS, but no keys
            point = StepCrashPoint.parse(self.crash_at, STEP_NAMES)
            return not (point.moment is StepMoment.AFTER_EFFECT and point.step in EFFECT_STEPS)
        return True


class MatrixResult(BaseModel):
    engine: str
    design: str
    crash_at: str
    model_calls: int
    orders: int
    emails: int
    matches_no_crash: bool
    expected: bool  # what the design should show: the cell passes when the two agree
    seconds: float
    error: str | None = None

    @property
    def as_expected(self) -> bool:
        return self.error is None and self.matches_no_crash == self.expected

    @property
    def counts(self) -> str:
        return f"{self.model_calls}/{self.orders}/{self.emails}"


def select_cells(
    cells: list[MatrixCell], designs: list[str] | None, crash_points: list[str] | None
) -> list[MatrixCell]:
    """Keep the cells of the named designs and crash points; an unknown name is an error."""
    refuse_unknown(
        (designs, {c.design for c in cells}, "design"),
        (crash_points, {c.crash_at for c in cells}, "crash point"),
    )
    return [
        c
        for c in cells
        if (designs is None or c.design in designs)
        and (crash_points is None or c.crash_at in crash_points)
    ]


def refuse_unknown(*filters: tuple[list[str] | None, set[str], str]) -> None:
    """Each filter's (wanted names, known names, what they name): a name not known is one
    ConfigError that lists the valid ones."""
    for wanted, known, what in filters:
        unknown = sorted(set(wanted or ()) - known)
        if unknown:
            raise ConfigError(
                f"unknown {what} {', '.join(unknown)} for these engines; "
                f"valid: {', '.join(sorted(known))}"
            )
