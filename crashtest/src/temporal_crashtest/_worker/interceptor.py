"""A worker interceptor that stamps every boundary of a workflow run and SIGKILLs its own worker
process at one of them.

Install it on the client (`Client.connect(..., interceptors=[CrashInterceptor(site)])`): a client
interceptor that is also a worker interceptor reaches every worker built on that client, so the
code under test is not changed.

How it knows where it is. Its workflow half stamps every activity and local activity a workflow
run schedules with a header: the root workflow id of the run's tree, the run's *scope* (its place
in the tree and in a continue-as-new chain) and the boundary's position in the run's scheduling
order (activities and local activities counted together). Child workflows and the next run of a
continue-as-new chain are started with a header that carries the root and their scope. Workflow
code is deterministic, so the stamps are the same on every replay; they are recorded in the
history, where `_history` reads them back.

A scope is `@R` for run R of the root's chain, then `/Type#K@R` for each child below it: the K-th
child of workflow type `Type` that its parent's run started, in run R of its own chain.

Where it kills (`CrashSite`):

- `after-effect`: the activity or local activity returned (on any attempt); its completion is not
  yet reported, so it runs again. For a local activity the marker that records its result is
  written only when the workflow task completes, so it too runs again.
- `after-checkpoint`, activity: the workflow, not replaying, sees the activity's result, so the
  server has recorded its completion; the kill comes before the workflow task that would record
  anything after it completes. Activities still running in the worker die with it.
- `after-checkpoint`, local activity: at the first sign that the workflow task holding its marker
  completed: an activity scheduled after it starts its first attempt, or the workflow runs in a
  later workflow task.
- `in-task`: the workflow, not replaying, schedules the activity or local activity: the workflow
  code of the task has run that far, and none of the task's commands has reached the server.

Every kill prints one `CRASH` line (with the boundaries still executing in the process, as JSON
after `in-flight=`) and SIGKILLs the process: no cleanup, no finally blocks. One that had just
returned and was not yet reported is not among them, though it too runs again. After
`attempts=` comes every activity attempt the process held (the one that had just returned too):
its task token, and whether ending it with a retryable failure is what the server's timeout would
do anyway (another attempt is allowed). The crash test uses them to fast-forward the recovery.

Given `task_timeout`, child workflows and the next run of a continue-as-new chain are started with
that workflow task timeout (a crash test shortens it, so that a workflow task a killed worker held
is retried soon).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import signal
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity, client, worker, workflow
from temporalio.api.common.v1 import Payload
from temporalio.exceptions import ApplicationError

from temporal_crashtest._history.attempts import (
    REPORT_LATE,
    AttemptEnd,
    attempt_end,
    backoff_after,
    failure_retried,
)
from temporal_crashtest._points.points import CrashPoint
from temporal_crashtest._points.sites import (
    ROOT_SCOPE,
    SCOPE_HEADER,
    STAMP_HEADER,
    CrashSite,
    Scope,
    Stamp,
    decode_scope,
    decode_stamp,
    encode,
    next_run,
)
from temporal_crashtest._worker.effects import attempting, done
from temporal_crashtest._worker.halves import attempt_started
from temporal_crashtest._worker.status import StatusWriter

IN_FLIGHT = " in-flight="
ATTEMPTS = " attempts="


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """An activity attempt held by a worker process, as the CRASH line reports it."""

    token: str  # the attempt's task token, base64
    retryable: bool  # the server's timeout would let another attempt run
    workflow_id: str = ""
    run_id: str = ""
    activity_id: str = ""
    timeout: str = "start-to-close"  # which timeout ends it: heartbeat, start-to-close, ...
    timeout_s: float = 0.0  # its length (0: none set)
    ends: str = ""  # when not retryable: what production sees, in words
    shorten: str = "start-to-close"  # the timeout a fast-forward shortens (`_attempt_end`)

    @classmethod
    def of(cls, info: activity.Info) -> Attempt:
        end = end_of(info)
        return cls(
            token=base64.b64encode(info.task_token).decode(),
            retryable=end.retried,
            workflow_id=info.workflow_id or "",
            run_id=info.workflow_run_id or "",
            activity_id=info.activity_id,
            timeout=end.timeout,
            timeout_s=end.seconds,
            ends="" if end.retried else _final_timeout(info, end),
            shorten=end.shorten,
        )

    def task_token(self) -> bytes:
        return base64.b64decode(self.token)


def _backoff(info: activity.Info) -> timedelta:
    """The retry interval after this attempt, under its retry policy."""
    policy = info.retry_policy
    return backoff_after(
        info.attempt,
        policy.initial_interval if policy is not None else None,
        policy.backoff_coefficient if policy is not None else 2.0,
        policy.maximum_interval if policy is not None else None,
    )


def _deadline(info: activity.Info) -> datetime | None:
    """When its schedule-to-close timeout expires (None: none set)."""
    s2c = info.schedule_to_close_timeout
    return info.scheduled_time + s2c if s2c else None


def end_of(info: activity.Info) -> AttemptEnd:
    """How this attempt ends if its worker dies now (`_attempt_end`)."""
    policy = info.retry_policy
    return attempt_end(
        attempt=info.attempt,
        maximum_attempts=policy.maximum_attempts if policy is not None else 0,
        backoff=_backoff(info),
        heartbeat=info.heartbeat_timeout,
        start_to_close=info.start_to_close_timeout,
        schedule_to_close=info.schedule_to_close_timeout,
        deadline=_deadline(info),
        started=datetime.now(UTC),  # when it starts
    )


def _final_timeout(info: activity.Info, end: AttemptEnd) -> str:
    """What ends an attempt no retry follows, once its worker is dead: its timeout, then the
    activity's failure in the workflow."""
    length = f" {end.seconds:g} s" if end.seconds else ""
    return (
        f"no retry follows the killed attempt of {info.activity_type} ({end.why}): the activity "
        f"fails in the workflow when its {end.timeout} timeout{length} expires"
    )


def _fails_for_good(err: Exception, info: activity.Info) -> bool:
    """Whether this failure ends the activity: no attempt follows it under its retry policy
    (`_attempt_end.failure_retried`, the rule a kill on the wire decides by too)."""
    if isinstance(err, asyncio.CancelledError):
        return False
    if isinstance(err, ApplicationError) and err.non_retryable:
        return True
    policy = info.retry_policy
    kind = err.type if isinstance(err, ApplicationError) and err.type else type(err).__name__
    if policy is not None and kind in (policy.non_retryable_error_types or ()):
        return True
    backoff = _backoff(info)
    if isinstance(err, ApplicationError) and err.next_retry_delay:
        backoff = err.next_retry_delay
    return not failure_retried(
        attempt=info.attempt,
        maximum_attempts=policy.maximum_attempts if policy is not None else 0,
        backoff=backoff,
        deadline=_deadline(info),
        now=datetime.now(UTC) + REPORT_LATE,
    )


def crash_line(site: CrashSite, where: str, in_flight: list[Stamp], attempts: list[Attempt]) -> str:
    """What a worker prints into its log as it kills itself, for a person (the crash test reads
    the same facts from the worker's status channel)."""
    running = json.dumps([{"scope": s.scope, "position": s.position} for s in in_flight])
    held = json.dumps([asdict(a) for a in attempts])
    return (
        f"CRASH {site} ({where}): SIGKILL pid {os.getpid()};{IN_FLIGHT}{running};{ATTEMPTS}{held}"
    )


def _kill(site: CrashSite, where: str, in_flight: list[Stamp], attempts: list[Attempt]) -> None:
    print(crash_line(site, where, in_flight, attempts), file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


class _StampingOutbound(worker.WorkflowOutboundInterceptor):
    """Counts the boundaries a workflow run schedules, stamps each one, and carries the scope to
    child workflows and the next run of the chain."""

    def __init__(self, next: worker.WorkflowOutboundInterceptor, crash: CrashInterceptor) -> None:
        super().__init__(next)
        self._crash = crash
        self._scheduled = 0
        self._types: Counter[str] = Counter()
        self._children: Counter[str] = Counter()
        self._where: Scope | None = None
        self._armed_at: int | None = None  # history length when an armed local activity resolved

    def _context(self) -> Scope:
        if self._where is None:
            info = workflow.info()
            self._where = decode_scope(info.headers.get(SCOPE_HEADER)) or Scope(
                info.workflow_id, ROOT_SCOPE
            )
        return self._where

    def _header(self, scope: str) -> Payload:
        return encode({"root": self._context().root, "scope": scope})

    def _kills_here(self, stamp: Stamp, *, as_scheduled: bool) -> bool:
        """Whether this worker kills itself in workflow code at `stamp`: as the workflow
        schedules it (`as_scheduled`), or once it sees its activity end."""
        site = self._crash.site
        return (
            site is not None
            and site.moment.kills_in_the_workflow
            and site.moment.kills_as_scheduled == as_scheduled
            and site.names(stamp)
            and self._crash.workflow_id in (None, stamp.root)
        )

    def _kill_if_scheduling(self, stamp: Stamp) -> None:
        """Die in the workflow task that schedules `stamp`'s activity, its workflow code run
        that far and its commands not sent (a task run again is not a replay: it dies again
        only where it is armed to, `*K`)."""
        if self._kills_here(stamp, as_scheduled=True) and not workflow.unsafe.is_replaying():
            assert self._crash.site is not None
            where = f"the workflow task scheduling {stamp.label()} ran; its commands unsent"
            self._crash.kill(self._crash.site, where)

    def _kill_if_a_later_task(self, what: str) -> None:
        """An armed local activity's marker is recorded once its workflow task completed: any
        later workflow task proves it."""
        if self._armed_at is None or workflow.unsafe.is_replaying():
            return
        if workflow.info().get_current_history_length() > self._armed_at:
            assert self._crash.site is not None
            self._crash.kill(self._crash.site, f"a later workflow task {what}")

    def _stamp(self, activity_type: str, local: bool) -> Stamp:
        self._kill_if_a_later_task(f"schedules {activity_type}")
        root, scope = self._context().root, self._context().scope
        self._scheduled += 1
        self._types[activity_type] += 1
        # An activity's first attempt starts only once the workflow task that scheduled it (and
        # recorded the armed local activity's marker) completed; a local activity runs inside
        # the task, so it proves nothing.
        kill_on_start = self._armed_at is not None and not local
        return Stamp(
            root=root,
            scope=scope,
            position=self._scheduled,
            activity=activity_type,
            local=local,
            kill_on_start=kill_on_start,
            occurrence=self._types[activity_type],
        )

    def _watch(self, handle: asyncio.Task[Any], stamp: Stamp) -> None:
        handle.add_done_callback(lambda _: self._crash.resolved(stamp))
        if not self._kills_here(stamp, as_scheduled=False):
            return

        def resolved(task: asyncio.Task[Any]) -> None:
            if task.cancelled() or workflow.unsafe.is_replaying():
                return
            site = self._crash.site
            assert site is not None
            if stamp.local:
                self._armed_at = workflow.info().get_current_history_length()
            else:
                self._crash.kill(site, f"{stamp.label()} is recorded; the workflow saw it")

        handle.add_done_callback(resolved)

    def start_activity(self, input: worker.StartActivityInput) -> workflow.ActivityHandle[Any]:
        stamp = self._stamp(input.activity, local=False)
        self._kill_if_scheduling(stamp)
        input.headers = {**input.headers, STAMP_HEADER: encode(asdict(stamp))}
        handle = super().start_activity(input)
        self._watch(handle, stamp)
        return handle

    def start_local_activity(
        self, input: worker.StartLocalActivityInput
    ) -> workflow.ActivityHandle[Any]:
        stamp = self._stamp(input.activity, local=True)
        self._kill_if_scheduling(stamp)
        input.headers = {**input.headers, STAMP_HEADER: encode(asdict(stamp))}
        handle = super().start_local_activity(input)
        self._watch(handle, stamp)
        return handle

    async def start_child_workflow(
        self, input: worker.StartChildWorkflowInput
    ) -> workflow.ChildWorkflowHandle[Any, Any]:
        self._kill_if_a_later_task(f"starts {input.workflow}")
        self._children[input.workflow] += 1
        child = f"{self._context().scope}/{input.workflow}#{self._children[input.workflow]}@1"
        input.headers = {**input.headers, SCOPE_HEADER: self._header(child)}
        if self._crash.task_timeout is not None:
            input.task_timeout = self._crash.task_timeout
        return await super().start_child_workflow(input)

    def continue_as_new(self, input: worker.ContinueAsNewInput) -> Any:
        self._kill_if_a_later_task("continues as new")
        header = self._header(next_run(self._context().scope))
        input.headers = {**input.headers, SCOPE_HEADER: header}
        if self._crash.task_timeout is not None:
            input.task_timeout = self._crash.task_timeout
        return super().continue_as_new(input)


@dataclass
class _Effects:
    """The effects one activity attempt has made so far (`_effects.effect` calls): each said on
    the status channel (the run without a crash lists them), and the worker armed at the
    boundary's K-th killed there; and those no point can follow (`_effects.unseen`), said too."""

    crash: CrashInterceptor
    stamp: Stamp
    attempt: int
    count: int = 0

    def _say(self, event: str, what: str) -> None:
        stamp = self.stamp
        self.crash.status.send(
            event,
            root=stamp.root,
            scope=stamp.scope,
            position=stamp.position,
            attempt=self.attempt,
            what=what,
        )

    def made(self, what: str) -> None:
        self.count += 1
        stamp, crash = self.stamp, self.crash
        self._say("effect", what)
        site = crash.site
        if (
            site is not None
            and site.moment.kills_at_an_effect
            and site.effect == self.count
            and site.names(stamp)
            and crash.workflow_id in (None, stamp.root)
        ):
            where = f"{stamp.label()} made effect {self.count} ({what}); its next line unrun"
            crash.kill(site, where, itself=stamp)

    def unseen(self, what: str) -> None:
        self._say("unseen", what)


class _CrashingActivity(worker.ActivityInboundInterceptor):
    def __init__(self, next: worker.ActivityInboundInterceptor, crash: CrashInterceptor) -> None:
        super().__init__(next)
        self.crash = crash

    async def execute_activity(self, input: worker.ExecuteActivityInput) -> Any:
        info = activity.info()
        # Every attempt this worker receives, said at once: an attempt the server says a live
        # worker started and that it never said it received was lost on the way (see _runner).
        self.crash.status.send(
            "started",
            workflow_id=info.workflow_id or "",
            activity_id=info.activity_id,
            attempt=info.attempt,
        )
        activity_of = (info.workflow_run_id or "", info.activity_id)
        running = self.crash.running_attempts.setdefault(activity_of, set())
        if running:
            # An earlier attempt still runs here, yet the server began this one: a timeout
            # ended it on a live worker (no heartbeat in time, a loaded machine), and it goes
            # on beside its retry. The history keeps only the last attempt's failure.
            self.crash.status.send(
                "overran",
                workflow_id=info.workflow_id or "",
                activity_id=info.activity_id,
                activity_type=info.activity_type,
                attempt=min(running),
                by=info.attempt,
            )
        running.add(info.attempt)
        try:
            return await self._stamped(input, info)
        finally:
            running.discard(info.attempt)
            if not running:
                self.crash.running_attempts.pop(activity_of, None)

    async def _stamped(self, input: worker.ExecuteActivityInput, info: activity.Info) -> Any:
        stamp = decode_stamp(input.headers.get(STAMP_HEADER))
        if stamp is None:
            return await super().execute_activity(input)
        attempt_started(stamp.root, stamp.label(), info.attempt)  # whose observers' records
        token = attempting(_Effects(self.crash, stamp, info.attempt))
        try:
            return await self._execute(input, stamp)
        except BaseException as err:
            if _COMPLETES_LATER is not None and isinstance(err, _COMPLETES_LATER):
                self.crash.completes_later(stamp, info)
            raise
        finally:
            done(token)

    async def _execute(self, input: worker.ExecuteActivityInput, stamp: Stamp) -> Any:
        site = self.crash.site
        if site is None or self.crash.workflow_id not in (None, stamp.root):
            return await super().execute_activity(input)
        if stamp.kill_on_start and activity.info().attempt == 1:
            self.crash.kill(site, f"{stamp.label()} starts: the marker before it is recorded")
        key = next(self.crash.ids)
        self.crash.running[key] = stamp
        self.crash.attempts[key] = held = Attempt.of(activity.info())
        here = site.moment.kills_in_the_activity and site.names(stamp)
        try:
            result = await super().execute_activity(input)
        except Exception as err:
            # An attempt that fails for good (non-retryable, or its last) is the activity's end
            # too: killed before the failure is recorded, its timeout lets it run again.
            if here and _fails_for_good(err, activity.info()):
                self.crash.running.pop(key, None)
                self.crash.attempts.pop(key, None)
                where = f"{stamp.label()} failed for good; its failure is not yet recorded"
                self.crash.kill(site, where, also=held)
            raise
        finally:
            self.crash.running.pop(key, None)
            self.crash.attempts.pop(key, None)
        if here:
            where = f"{stamp.label()} returned; its completion is not yet recorded"
            self.crash.kill(site, where, also=held)
        return result


# What an activity raises to be completed later, by a client (`activity.raise_complete_async()`;
# not public, temporalio 1.x): its attempt is not over when it returns.
_COMPLETES_LATER: type[BaseException] | None = getattr(activity, "_CompleteAsyncError", None)


@dataclass(frozen=True)
class _Completing:
    """An attempt handed to be completed later, by a client: its boundary and its info."""

    stamp: Stamp
    info: activity.Info

    def names(self, reference: client.AsyncActivityIDReference | bytes) -> bool:
        """Whether an async handle's reference (a task token, or ids) is this attempt's."""
        info = self.info
        if isinstance(reference, bytes):
            return reference == info.task_token
        return (
            reference.activity_id == info.activity_id
            and reference.workflow_id in (None, info.workflow_id)
            and reference.run_id in (None, info.workflow_run_id)
        )


class _CompletingClient(client.OutboundInterceptor):
    """The worker's client, where an activity completed later is completed: the moment it ends
    (`after-effect` there: the work done, the completion not sent)."""

    def __init__(self, next: client.OutboundInterceptor, crash: CrashInterceptor) -> None:
        super().__init__(next)
        self.crash = crash

    async def complete_async_activity(self, input: client.CompleteAsyncActivityInput) -> None:
        self.crash.ends_later(input.id_or_token, None)
        await super().complete_async_activity(input)

    async def fail_async_activity(self, input: client.FailAsyncActivityInput) -> None:
        self.crash.ends_later(input.id_or_token, input.error)
        await super().fail_async_activity(input)


class CrashInterceptor(client.Interceptor, worker.Interceptor):
    """Stamp every boundary; SIGKILL this worker's process at `site` (None: never), in any
    workflow tree on the worker's task queue or only in the one rooted at `workflow_id`."""

    def __init__(
        self,
        site: CrashSite | CrashPoint | None = None,
        workflow_id: str | None = None,
        task_timeout: timedelta | None = None,
        status: StatusWriter | None = None,
    ) -> None:
        self.site = CrashSite.of(site) if isinstance(site, CrashPoint) else site
        self.status = status or StatusWriter(None)  # where the crash is reported before it
        self.workflow_id = workflow_id
        self.task_timeout = task_timeout  # for the child workflows and the chain's next runs
        self.running: dict[int, Stamp] = {}  # activities executing in this process now
        self.attempts: dict[int, Attempt] = {}  # their attempts
        # (run id, activity id) -> the attempts of it running here now (any activity)
        self.running_attempts: dict[tuple[str, str], set[int]] = {}
        self.ids = itertools.count()
        self.completing: list[_Completing] = []  # attempts to be completed later, by a client

    def completes_later(self, stamp: Stamp, info: activity.Info) -> None:
        """`stamp`'s attempt returned to be completed later, by a client: said, and held."""
        self.completing.append(_Completing(stamp, info))
        self._say_completion(stamp, info.attempt, seen=False)

    def ends_later(
        self, reference: client.AsyncActivityIDReference | bytes, error: Exception | None
    ) -> None:
        """A client is about to complete (`error`: fail) an activity: if it is an attempt
        handed over here, its end is seen, and the worker armed there dies before it is sent."""
        found = next((c for c in self.completing if c.names(reference)), None)
        if found is None:
            return
        self.completing.remove(found)
        stamp, site = found.stamp, self.site
        self._say_completion(stamp, found.info.attempt, seen=True)
        if (
            site is not None
            and site.moment.kills_in_the_activity
            and site.names(stamp)
            and self.workflow_id in (None, stamp.root)
            and (error is None or _fails_for_good(error, found.info))
        ):
            ends = "completion" if error is None else "failure for good"
            where = f"{stamp.label()} is about to send its {ends} (completed later, by a client)"
            self.kill(site, where, also=Attempt.of(found.info), itself=stamp)

    def resolved(self, stamp: Stamp) -> None:
        """The workflow saw `stamp`'s activity end: an attempt of it completed later, by a
        client, is no longer held (one this worker's client never completed, another did)."""
        place = (stamp.root, stamp.scope, stamp.position)
        self.completing = [
            c for c in self.completing if (c.stamp.root, c.stamp.scope, c.stamp.position) != place
        ]

    def _say_completion(self, stamp: Stamp, attempt: int, seen: bool) -> None:
        self.status.send(
            "completes_later",
            root=stamp.root,
            scope=stamp.scope,
            position=stamp.position,
            attempt=attempt,
            seen=seen,
        )

    def intercept_client(self, next: client.OutboundInterceptor) -> client.OutboundInterceptor:
        return _CompletingClient(next, self)

    def kill(
        self,
        site: CrashSite,
        where: str,
        also: Attempt | None = None,
        itself: Stamp | None = None,
    ) -> None:
        """SIGKILL this process at `site`, saying what it held: the attempts (and `also`, one
        that returned), and the boundaries in flight but `itself` (the one killed inside)."""
        with workflow.unsafe.sandbox_unrestricted():
            later = [Attempt.of(c.info) for c in self.completing]  # held till completed
            held = [*self.attempts.values(), *later, *([also] if also else [])]
            running = [s for s in self.running.values() if s is not itself]
            running += [c.stamp for c in self.completing if c.stamp is not itself]
            self.status.send(
                "crash",
                in_flight=[{"scope": s.scope, "position": s.position} for s in running],
                attempts=[asdict(a) for a in held],
            )
            _kill(site, where, running, held)

    def intercept_activity(
        self, next: worker.ActivityInboundInterceptor
    ) -> worker.ActivityInboundInterceptor:
        return _CrashingActivity(next, self)

    def workflow_interceptor_class(
        self, input: worker.WorkflowInterceptorClassInput
    ) -> type[worker.WorkflowInboundInterceptor]:
        crash = self

        class _StampingInbound(worker.WorkflowInboundInterceptor):
            def init(self, outbound: worker.WorkflowOutboundInterceptor) -> None:
                super().init(_StampingOutbound(outbound, crash))

        return _StampingInbound
