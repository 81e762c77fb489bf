"""Virtual time: each run the tool starts asks the server to skip the time it waits on timers
(Temporal's per-workflow time skipping), where the server allows it, up to a horizon: the run's
clock moves to its next timer at once while nothing of it is in flight, until it is `horizon`
ahead of where it began or the server's budget of skips is spent; after that, timers take their
real time, and a run still waiting is named with both (`clock_ahead`)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf.field_mask_pb2 import FieldMask
from temporalio.api.common.v1 import FastForwardConfig, TimeSkippingConfig, WorkflowExecution
from temporalio.api.workflow.v1 import WorkflowExecutionOptions
from temporalio.api.workflowservice.v1 import UpdateWorkflowExecutionOptionsRequest
from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    StartWorkflowInput,
    WorkflowHandle,
)
from temporalio.service import RPCError

from temporal_crashtest._text import span_text

NOT_ENABLED = "time-skipping feature is not enabled"
HOW_TO = "--dynamic-config-value frontend.WorkflowTimeSkippingEnabled=true"
NOT_SKIPPED = (
    "this server does not skip a run's timers (Temporal's time skipping): a workflow's sleeps "
    f"and timeouts take their real time; a dev server skips them with {HOW_TO}"
)
HORIZON_ID = "crashtest-horizon"


def skipping(horizon: timedelta) -> TimeSkippingConfig:
    """Skip, until the run's clock is `horizon` ahead (then the server stops skipping)."""
    config = TimeSkippingConfig(enabled=True, fast_forward_config=FastForwardConfig(id=HORIZON_ID))
    config.fast_forward_config.duration.FromTimedelta(horizon)
    return config


class _Skip(Interceptor):
    def __init__(self, config: TimeSkippingConfig) -> None:
        self.config = config

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _SkipOutbound(next, self.config)


class _SkipOutbound(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, config: TimeSkippingConfig) -> None:
        super().__init__(next)
        self.config = config

    async def start_workflow(self, input: StartWorkflowInput) -> WorkflowHandle[Any, Any]:
        input.time_skipping_config = self.config
        return await super().start_workflow(input)


async def starting_client(
    client: Client, horizon: timedelta, say: Callable[[str], None]
) -> Client | None:
    """A client whose runs skip the time they wait on timers, up to `horizon`; None, said in
    one line, where the server does not allow it."""
    config = client.config()
    config["interceptors"] = [*config["interceptors"], _Skip(skipping(horizon))]
    skips = Client(**config)
    probe = f"crashtest-time-probe-{uuid.uuid4().hex[:8]}"
    try:
        handle = await skips.start_workflow("CrashtestTimeProbe", id=probe, task_queue=probe)
    except RPCError as err:
        if NOT_ENABLED not in str(err).lower():
            raise
        say(NOT_SKIPPED)
        return None
    with contextlib.suppress(RPCError):
        await handle.terminate(reason="crashtest: a probe of time skipping")
    return skips


async def clock_ahead(handle: WorkflowHandle[Any, Any]) -> str:
    """How far time skipping moved the run's clock, and why it skips no more, in words ("" for
    a run that never skipped)."""
    try:
        info = (await handle.describe()).raw_description.workflow_extended_info
    except RPCError:
        return ""
    if not info.HasField("time_skipping_info"):
        return ""
    skip = info.time_skipping_info
    ahead = skip.current_time.ToDatetime(tzinfo=UTC) - datetime.now(UTC)
    if ahead < timedelta(minutes=1):
        return ""
    horizon = skip.effective_config.fast_forward_config.duration.ToTimedelta()
    budget = skip.effective_config.max_session_skip_count
    return (
        f"; time skipping moved its clock {span_text(ahead)} ahead and skips no further past the "
        f"horizon ({span_text(horizon)}, --horizon-days) or the server's budget of {budget} skips: "
        "its timers now take their real time (a workflow that waits for ever?)"
    )


async def skip_from_now(client: Client, handle: WorkflowHandle[Any, Any], ahead: timedelta) -> None:
    """Turn time skipping on for a run started without it (or whose skipping stopped), until its
    clock is `ahead` of where it is now: its pending timers fire as soon as nothing of it is in
    flight. Asked of the chain's current run (a continue-as-new's later one, too)."""
    await client.workflow_service.update_workflow_execution_options(
        UpdateWorkflowExecutionOptionsRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=handle.id),
            workflow_execution_options=WorkflowExecutionOptions(
                time_skipping_config=skipping(ahead)
            ),
            update_mask=FieldMask(paths=["time_skipping_config"]),
        )
    )
