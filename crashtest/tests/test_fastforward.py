"""What the fast-forward may end at once, in-process: an attempt that the server's timeout would
follow with another, never the last one; and the CRASH line that carries the attempts."""

from __future__ import annotations

import base64
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from temporal_crashtest._interceptor import Attempt, CrashSite, Stamp, crash_line, read_crash_line
from temporal_crashtest._points import Moment
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


def test_the_crash_line_carries_the_boundaries_in_flight_and_the_attempts_held() -> None:
    held = Attempt.of(info(task_token=b"\x00token\xff", activity_id="7"))
    stamp = Stamp("root", "@1", 3, "charge", local=False)
    line = crash_line(CrashSite(Moment.AFTER_EFFECT, "@1", 2), "charge returned", [stamp], [held])
    read = read_crash_line(f"some output\n{line}\n")
    assert read is not None
    running, attempts = read
    assert running == [{"scope": "@1", "position": 3}]
    assert attempts == [held]
    assert attempts[0].task_token() == b"\x00token\xff"
    assert held.token == base64.b64encode(b"\x00token\xff").decode()
    assert read_crash_line("no crash here\n") is None
