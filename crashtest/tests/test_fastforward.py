"""What the fast-forward may end at once, in-process: an attempt that the server's timeout would
follow with another, never the last one; and the CRASH line that carries the attempts."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporal_crashtest._points.points import Moment
from temporal_crashtest._points.sites import CrashSite, Stamp
from temporal_crashtest._worker.interceptor import Attempt, crash_line
from temporal_crashtest._worker.status import StatusWriter, WorkerStatus
from temporalio import activity
from temporalio.common import RetryPolicy
from temporalio.testing import ActivityEnvironment


def info(**changes: Any) -> activity.Info:
    base = replace(
        ActivityEnvironment.default_info(),
        scheduled_time=datetime.now(UTC),
        schedule_to_close_timeout=None,
        heartbeat_timeout=timedelta(seconds=2),
    )
    return replace(base, **changes)


def test_an_attempt_another_follows_is_ended_at_once() -> None:
    assert Attempt.of(info(retry_policy=None)).retryable  # the server's default: no limit
    assert Attempt.of(info(attempt=2, retry_policy=RetryPolicy(maximum_attempts=3))).retryable
    far = info(schedule_to_close_timeout=timedelta(minutes=5), retry_policy=RetryPolicy())
    assert Attempt.of(far).retryable


def test_the_last_attempt_is_left_to_its_timeout() -> None:
    last = info(attempt=3, retry_policy=RetryPolicy(maximum_attempts=3))
    assert not Attempt.of(last).retryable
    assert not Attempt.of(info(retry_policy=RetryPolicy(maximum_attempts=1))).retryable
    # 2 s of heartbeat timeout and a 4 s backoff do not fit in what is left of 5 s.
    near = info(schedule_to_close_timeout=timedelta(seconds=5),
                retry_policy=RetryPolicy(initial_interval=timedelta(seconds=4)))  # fmt: skip
    assert not Attempt.of(near).retryable
    # The backoff grows with the attempt: the fifth waits 1 s * 2^4 = 16 s.
    late = info(attempt=5, schedule_to_close_timeout=timedelta(seconds=15),
                retry_policy=RetryPolicy())  # fmt: skip
    assert not Attempt.of(late).retryable


def test_the_status_channel_carries_the_boundaries_in_flight_and_the_attempts_held(
    tmp_path: Path,
) -> None:
    """What a worker sends before it dies arrives whole and in order, however long (100 held
    attempts: past a pipe's atomic write), and is all there once the worker is gone (`drain`)."""
    held = [Attempt.of(info(task_token=b"\x00token\xff" * 20, activity_id=str(n)))
            for n in range(100)]  # fmt: skip
    stamp = Stamp(root="root", scope="@1", position=3, activity="charge", local=False)

    async def exchange() -> WorkerStatus:
        status = WorkerStatus.listen(tmp_path / "w.status")
        worker = StatusWriter(str(status.path))
        worker.send("warm")
        worker.send("ready", identity="1@host", sticky_s=1.0)
        worker.send("crash", in_flight=[{"scope": stamp.scope, "position": stamp.position}],
                    attempts=[dataclasses.asdict(a) for a in held])  # fmt: skip
        status.drain()
        status.close()
        return status

    status = asyncio.run(exchange())
    assert status.warm.is_set() and status.ready.is_set()
    assert status.facts == {"identity": "1@host", "sticky_s": 1.0}
    assert status.crash is not None
    assert status.crash["in_flight"] == [{"scope": "@1", "position": 3}]
    attempts = [Attempt(**a) for a in status.crash["attempts"]]
    assert attempts == held
    assert attempts[0].task_token() == b"\x00token\xff" * 20
    assert held[0].token == base64.b64encode(b"\x00token\xff" * 20).decode()
    line = crash_line(
        CrashSite(moment=Moment.AFTER_EFFECT, scope="@1", position=2),
        "charge returned",
        [stamp],
        held,
    )
    assert line.startswith("CRASH after-effect:") and "SIGKILL pid" in line  # for a person
