"""A kill on the wire: the worker dies as it sends an activity's completion, which the server
never hears — the moment `after-effect` names (the activity ran, its result is not recorded) —
or hears alone, from the proxy, once the dead worker's polls are gone (`after-checkpoint`:
recorded, and nothing after it), whatever language the worker is written in. The worker is a
command the crash test started in a process group of its own (`start_new_session`); the whole
group is SIGKILLed."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from temporalio.api.command.v1 import Command
from temporalio.api.enums.v1 import CommandType
from temporalio.api.workflowservice.v1 import (
    RespondActivityTaskFailedByIdRequest,
    RespondActivityTaskFailedRequest,
    RespondWorkflowTaskCompletedRequest,
)

from temporal_crashtest._history.attempts import REPORT_LATE, failure_retried
from temporal_crashtest._history.tree import LOCAL_ACTIVITY_MARKER
from temporal_crashtest._points.sites import CrashSite, in_the_root_chain
from temporal_crashtest._process_groups import kill_group
from temporal_crashtest._wire.scopes import RunScopes
from temporal_crashtest._wire.status import WireStatus
from temporal_crashtest._wire.tasks import WORKFLOW_TASK_DONE, ActivityTask
from temporal_crashtest._wire.watch import Pass


class KillAtSite(WireStatus):
    """A worker's status read off the wire (`WireStatus`) that, once armed with the worker
    group's `pid`, kills it at `site` in the tree of the run `workflow_id` — the boundary found
    by its activity id, as the run's history names it, in the run at the site's place in the
    tree (`scopes`: a child, a later run of a chain) — and says so in `crash`, as a crashtest
    Python worker says it before it kills itself:

    - `after-effect`: as the worker sends the activity's completion, or its failure for good
      (an attempt its retry policy does not retry); the call is dropped, never heard. A local
      activity's: as it sends the workflow task's commands that record its marker.
    - `after-checkpoint`: the same call, forwarded alone once the dead worker's polls ended:
      the server records the activity done, and nothing after it.
    - `in-task`: as it sends the commands of the workflow task that schedules the activity.
    """

    def __init__(
        self, site: CrashSite, workflow_id: str, scopes: RunScopes, warm: bool = False
    ) -> None:
        super().__init__(warm)
        self.site, self.workflow_id, self.scopes = site, workflow_id, scopes
        self.pid: int | None = None
        self.token: str | None = None
        self.escaped: list[int] = []

    def arm(self, pid: int, token: str | None = None, escaped: list[int] | None = None) -> None:
        """Kill the group `pid` leads, and what carries `token` (what it started elsewhere:
        those pids added to `escaped`)."""
        self.pid, self.token = pid, token
        self.escaped = escaped if escaped is not None else self.escaped

    async def before(self, method: str, request: bytes) -> Pass:
        how = await super().before(method, request)
        if self.pid is None or self.crash is not None:
            return how
        where = await self._reached(method, request)
        if where is None:
            return how
        self.crash = {"in_flight": [], "attempts": [], "where": where}
        end = self.end_of(method, request)
        if end is not None:  # the attempt it dies reporting: ended by the fast-forward
            task = end.task
            self.crash["killed"] = {
                "workflow_id": task.workflow_id,
                "run_id": task.run_id,
                "activity_id": task.activity_id,
            }
        self.escaped += kill_group(self.pid, self.token)
        return Pass.ALONE if self.site.moment.recorded_at_the_kill else Pass.DROP

    async def _reached(self, method: str, request: bytes) -> str | None:
        """What the worker is sending, if it is the site's moment (None: not yet)."""
        site = self.site
        if method == WORKFLOW_TASK_DONE:
            done = RespondWorkflowTaskCompletedRequest.FromString(request)
            workflow_id = self.workflow_tasks.get(done.task_token)
            if workflow_id is None:
                return None
            commands, where = done.commands, None
            if site.moment.kills_as_scheduled and not site.local:
                if any(_schedules(c, site.activity_id, site.activity_type) for c in commands):
                    where = f"the workflow task scheduling activity {site.activity_id}"
            elif site.local and any(
                _records(c, site.activity_id, site.activity_type) for c in commands
            ):
                where = f"the workflow task recording local activity {site.activity_id}"
            run_id = self.runs.get(done.task_token, "")
            return where if where and await self._in_scope(workflow_id, run_id) else None
        if site.local or site.moment.kills_as_scheduled:
            return None
        end = self.end_of(method, request)
        if end is None or end.task.activity_id != site.activity_id:
            return None
        if site.activity_type not in ("", end.task.activity_type):
            return None  # the run went another way: another activity has that id
        if not await self._in_scope(end.task.workflow_id, end.task.run_id):
            return None
        if end.how == "completed":
            return f"activity {site.activity_id}'s completion"
        if end.how == "failed" and _for_good(end.task, method, request):
            return f"activity {site.activity_id}'s failure for good"
        return None

    async def _in_scope(self, workflow_id: str, run_id: str) -> bool:
        """Whether the run is the site's: in this test's run, at its place in the tree (the
        root's chain is the test's workflow id; a child has an id of its own)."""
        in_the_chain = in_the_root_chain(self.site.scope)
        if (workflow_id == self.workflow_id) != in_the_chain:
            return False
        return await self.scopes.of(workflow_id, run_id) == self.site.scope


def _schedules(command: Command, activity_id: str, activity_type: str) -> bool:
    attributes = command.schedule_activity_task_command_attributes
    return (
        command.command_type == CommandType.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK
        and attributes.activity_id == activity_id
        and activity_type in ("", attributes.activity_type.name)
    )


def _records(command: Command, activity_id: str, activity_type: str) -> bool:
    """Whether `command` records the marker of local activity `activity_id` (of type
    `activity_type`, if given)."""
    if command.command_type != CommandType.COMMAND_TYPE_RECORD_MARKER:
        return False
    marker = command.record_marker_command_attributes
    if marker.marker_name != LOCAL_ACTIVITY_MARKER:
        return False
    try:
        data = json.loads(marker.details["data"].payloads[0].data)
    except (KeyError, IndexError, ValueError):
        return False
    return str(data.get("activity_id", "")) == activity_id and activity_type in (
        "",
        str(data.get("activity_type", activity_type)),
    )


def _for_good(task: ActivityTask, method: str, request: bytes) -> bool:
    """Whether a failure ends the activity: not retryable, or no attempt follows it under its
    retry policy (`_attempt_end.failure_retried`, as the interceptor decides in a Python
    worker): its last attempt, or no time left before its schedule-to-close deadline."""
    failure = (
        (
            RespondActivityTaskFailedByIdRequest
            if method.endswith("ById")
            else RespondActivityTaskFailedRequest
        )
        .FromString(request)
        .failure
    )
    info = failure.application_failure_info
    backoff = task.backoff
    if failure.HasField("application_failure_info"):
        if info.non_retryable or info.type in task.non_retryable:
            return True
        if info.HasField("next_retry_delay"):
            backoff = info.next_retry_delay.ToTimedelta()
    return not failure_retried(
        attempt=task.attempt,
        maximum_attempts=task.maximum_attempts,
        backoff=backoff,
        deadline=task.deadline,
        now=datetime.now(UTC) + REPORT_LATE,
    )


INSIDE_OFF_THE_WIRE = (
    "the effects an activity makes between its calls to the server (a commit, a request) are "
    "seen inside a Python worker crash-tested in process (--worker MODULE:FACTORY) only: the "
    "wire carries the worker's calls to the server, not what it does between them"
)


def off_the_wire(site: CrashSite) -> str | None:
    """Why a kill on the wire cannot make `site`'s moment (None: it can)."""
    if site.moment.kills_at_an_effect:
        return INSIDE_OFF_THE_WIRE
    if site.moment.kills_as_scheduled and site.local:
        return (
            "a local activity is scheduled by no command on the wire: in-task at one is a "
            "Python worker's only"
        )
    return None
