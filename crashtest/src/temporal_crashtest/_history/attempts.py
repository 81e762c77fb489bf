"""How production ends an activity attempt whose worker died, and so what a fast-forward may do
instead of waiting.

A dead worker's attempt ends at its own timeout: the heartbeat timeout if one is set, else
start-to-close (which the server sets to schedule-to-close when only that is given). The server
then starts another attempt only if the retry policy has attempts left and the next attempt
(after its backoff) would start before the schedule-to-close deadline; otherwise the activity
fails in the workflow. The two cases of "no retry" end differently:

- attempts exhausted: the attempt's own timeout ends it; a fast-forward shortens that timeout;
- the schedule-to-close window runs out (an activity with only a schedule-to-close timeout is
  always this case: its attempt's timeout *is* the whole window): a fast-forward shortens the
  schedule-to-close timeout. Shortening the attempt's own timeout instead would leave time in
  the window, and the server would retry: a run that fails in production would pass.

Both the worker (from `activity.Info`, when an attempt starts) and the fast-forward (from a
pending activity the server describes) decide through `attempt_end`.

An attempt that *fails* (reports its failure) is retried by the server's own rule, which
`failure_retried` states once: not past the retry policy's last attempt, and not if the next
attempt, after its backoff, would start past the schedule-to-close deadline. Both kills at an
activity's failure for good decide by it: the interceptor's in a Python worker, and the wire's
for a worker of any SDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from temporalio.api.workflow.v1 import PendingActivityInfo

DEFAULT_BACKOFF = timedelta(seconds=1)  # the server's default initial retry interval
# How late a failure may reach the server after its worker decided to send it (a loaded
# machine: over 0.5 s, seen in the suite beside its other files): a kill at a failure
# decides as if it arrived this late, so that one the server takes for good is never passed by.
# One it would still have retried ends, once its worker is dead, as production's does (its
# attempt's timeout; `attempt_end`), so a kill there is sound too.
REPORT_LATE = timedelta(seconds=2)


@dataclass(frozen=True)
class AttemptEnd:
    """What ends a dead worker's attempt: `timeout` (heartbeat, start-to-close, ...) of
    `seconds`; whether another attempt follows; if not, `why`; and the timeout a fast-forward
    shortens so that the server ends the attempt as production would (`shorten`: the attempt's
    own, or schedule-to-close when the window runs out)."""

    timeout: str
    seconds: float
    retried: bool
    shorten: str
    why: str = ""


def attempt_end(
    *,
    attempt: int,
    maximum_attempts: int,
    backoff: timedelta,
    heartbeat: timedelta | None,
    start_to_close: timedelta | None,
    schedule_to_close: timedelta | None,
    deadline: datetime | None,
    started: datetime,
) -> AttemptEnd:
    """The end of an attempt that started (or last heartbeated) at `started`, of an activity
    whose schedule-to-close timeout expires at `deadline` (None: none set); `backoff` is the
    retry interval after this attempt."""
    timeout, length = own_timeout(heartbeat, start_to_close, schedule_to_close)
    if maximum_attempts and attempt >= maximum_attempts:
        why = f"attempt {attempt} of at most {maximum_attempts}"
        return AttemptEnd(timeout, length, retried=False, shorten=timeout, why=why)
    if deadline is not None:
        ends_at = started + timedelta(seconds=length)
        if ends_at + backoff >= deadline:
            why = "its schedule-to-close timeout leaves no time for another attempt"
            return AttemptEnd(timeout, length, retried=False, shorten="schedule-to-close", why=why)
    return AttemptEnd(timeout, length, retried=True, shorten=timeout)


def failure_retried(
    *,
    attempt: int,
    maximum_attempts: int,
    backoff: timedelta,
    deadline: datetime | None,
    now: datetime,
) -> bool:
    """Whether the server starts another attempt after a retryable failure of attempt `attempt`
    reported at `now` (`backoff`: the interval before the next, the failure's own next retry
    delay if it gives one; `deadline`: the schedule-to-close deadline, None if none is set).
    A kill deciding now passes `now + REPORT_LATE`."""
    if maximum_attempts and attempt >= maximum_attempts:
        return False
    return deadline is None or now + backoff <= deadline


def own_timeout(
    heartbeat: timedelta | None,
    start_to_close: timedelta | None,
    schedule_to_close: timedelta | None,
) -> tuple[str, float]:
    """The timeout that ends an attempt whose worker died, and its length in seconds."""
    for kind, length in (
        ("heartbeat", heartbeat),
        ("start-to-close", start_to_close),
        ("schedule-to-close", schedule_to_close),
    ):
        if length:
            return kind, length.total_seconds()
    return "start-to-close", 0.0


def backoff_after(
    attempt: int, initial: timedelta | None, coefficient: float, maximum: timedelta | None
) -> timedelta:
    """The retry interval after attempt `attempt` under a retry policy (the server's defaults
    where it sets none)."""
    interval = (initial or DEFAULT_BACKOFF) * ((coefficient or 2.0) ** (attempt - 1))
    return min(interval, maximum) if maximum else interval


def pending_end(pending: PendingActivityInfo) -> AttemptEnd:
    """The end of the attempt a pending activity's dead worker holds, from what the server
    says of it (its options, retry policy, attempt, times and schedule-to-close deadline)."""
    options = pending.activity_options
    policy = options.retry_policy

    def span(name: str) -> timedelta | None:
        value: timedelta = getattr(options, name).ToTimedelta()
        return value or None  # an unset duration reads as zero

    def interval(name: str) -> timedelta | None:
        value: timedelta = getattr(policy, name).ToTimedelta()
        return value or None

    heartbeat = span("heartbeat_timeout")
    started = pending.last_started_time.ToDatetime(tzinfo=UTC)
    if heartbeat is not None and pending.HasField("last_heartbeat_time"):
        started = max(started, pending.last_heartbeat_time.ToDatetime(tzinfo=UTC))
    expires = pending.HasField("expiration_time") and pending.expiration_time.seconds
    return attempt_end(
        attempt=pending.attempt,
        maximum_attempts=pending.maximum_attempts,
        backoff=backoff_after(
            pending.attempt,
            interval("initial_interval"),
            policy.backoff_coefficient,
            interval("maximum_interval"),
        ),
        heartbeat=heartbeat,
        start_to_close=span("start_to_close_timeout"),
        schedule_to_close=span("schedule_to_close_timeout"),
        deadline=pending.expiration_time.ToDatetime(tzinfo=UTC) if expires else None,
        started=started,
    )
