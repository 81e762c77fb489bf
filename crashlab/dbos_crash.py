"""`python -m crashlab.dbos_crash run ...`: `python -m dbos_agent run ...` that SIGKILLs itself at
CRASH_AT, the crash lab's hook around the step functions (the agent on DBOS knows nothing of
crashes):

    after-effect:N       step N's function returned (its model call, order or email is made);
                         DBOS has not recorded the step's output
    after-checkpoint:N   DBOS recorded step N's output; step N + 1's function has not begun

A fresh `python -m dbos_agent run` with the same run id and executor id then recovers the run.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from agent import steps
from agent.steps import STEP_NAMES, STEPS
from dbos_agent.__main__ import main, parse_args
from infra.cli import run_main
from infra.errors import ConfigError
from journal.crash_points import StepCrashPoint, StepMoment, crash_now, crash_point_from_env


def arm(point: StepCrashPoint) -> None:
    """Wrap the step function the point is in: after step N's, or before step N + 1's."""
    if point.moment is StepMoment.AFTER_EFFECT:
        name, after = STEPS[point.step - 1].name, True
    elif point.step < len(STEPS):
        name, after = STEPS[point.step].name, False
    else:
        raise ConfigError(f"{point}: after the last step's checkpoint the run only ends")
    original: Callable[..., Awaitable[Any]] = getattr(steps, name)

    @functools.wraps(original)
    async def crashing(*args: Any, **kwargs: Any) -> Any:
        if not after:
            crash_now(point)
        result = await original(*args, **kwargs)
        crash_now(point)
        return result

    setattr(steps, name, crashing)


if __name__ == "__main__":
    crash_at = crash_point_from_env(STEP_NAMES)
    if crash_at is not None:
        arm(crash_at)
    run_main(main(parse_args()))
