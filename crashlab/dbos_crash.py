"""The crash lab's hooks around the step functions of the agent on DBOS (which knows nothing of
crashes): `python -m crashlab.dbos_crash run|serve ...` is `python -m dbos_agent run|serve ...`
with, from the environment,

- CRASH_AT, where the process SIGKILLs itself (the crash matrix):
    after-effect:N       step N's function returned (its model call, order or email is made);
                         DBOS has not recorded the step's output
    after-checkpoint:N   DBOS recorded step N's output; step N + 1's function has not begun
- STEP_PAUSE_MS, a random pause before each step's function and again after it returns (the
  chaos lab: random kills then land between an effect and DBOS's record of it).

A fresh `python -m dbos_agent run` with the same run id and executor id recovers the run.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Awaitable, Callable
from typing import Any

from agent import steps
from agent.steps import STEP_NAMES, STEPS
from dbos_agent.__main__ import main, parse_args
from infra.cli import run_main
from infra.config import step_pause_seconds
from infra.errors import ConfigError
from journal.crash_points import StepCrashPoint, StepMoment, crash_now, crash_point_from_env

StepFunction = Callable[..., Awaitable[Any]]


def _wrap(name: str, wrapper: Callable[[StepFunction], StepFunction]) -> None:
    original: StepFunction = getattr(steps, name)
    setattr(steps, name, functools.wraps(original)(wrapper(original)))


def arm(point: StepCrashPoint) -> None:
    """Wrap the step function the point is in: after step N's, or before step N + 1's."""
    if point.moment is StepMoment.AFTER_EFFECT:
        name, after = STEPS[point.step - 1].name, True
    elif point.step < len(STEPS):
        name, after = STEPS[point.step].name, False
    else:
        raise ConfigError(f"{point}: after the last step's checkpoint the run only ends")

    def crashing(original: StepFunction) -> StepFunction:
        async def step(*args: Any, **kwargs: Any) -> Any:
            if not after:
                crash_now(point)
            result = await original(*args, **kwargs)
            crash_now(point)
            return result

        return step

    _wrap(name, crashing)


def pause_every_step(low_s: float, high_s: float, rng: random.Random) -> None:
    def pausing(original: StepFunction) -> StepFunction:
        async def step(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(rng.uniform(low_s, high_s))
            result = await original(*args, **kwargs)
            await asyncio.sleep(rng.uniform(low_s, high_s))  # the effect made, not yet recorded
            return result

        return step

    for step in STEPS:
        _wrap(step.name, pausing)


if __name__ == "__main__":
    crash_at = crash_point_from_env(STEP_NAMES)
    pause = step_pause_seconds()
    if pause is not None:
        pause_every_step(*pause, random.Random())
    if crash_at is not None:
        arm(crash_at)
    run_main(main(parse_args()))
