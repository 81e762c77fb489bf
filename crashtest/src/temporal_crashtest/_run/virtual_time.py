"""Virtual time: each run the tool starts asks the server to skip the time it waits on timers
(Temporal's per-workflow time skipping), where the server allows it."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable

from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import TimeSkipper

NOT_ENABLED = "time-skipping feature is not enabled"
HOW_TO = "--dynamic-config-value frontend.WorkflowTimeSkippingEnabled=true"


NOT_SKIPPED = (
    "this server does not skip a run's timers (Temporal's time skipping): a workflow's sleeps "
    f"and timeouts take their real time; a dev server skips them with {HOW_TO}"
)


async def starting_client(client: Client, say: Callable[[str], None]) -> Client | None:
    """A client whose runs skip the time they wait on timers; None, said in one line, where the
    server does not allow it."""
    skipping = TimeSkipper(client).client
    probe = f"crashtest-time-probe-{uuid.uuid4().hex[:8]}"
    try:
        handle = await skipping.start_workflow("CrashtestTimeProbe", id=probe, task_queue=probe)
    except RPCError as err:
        if NOT_ENABLED not in str(err).lower():
            raise
        say(NOT_SKIPPED)
        return None
    with contextlib.suppress(RPCError):
        await handle.terminate(reason="crashtest: a probe of time skipping")
    return skipping
