"""Temporal's reset API: replay a completed run from the point before its order step.

A reset starts a new run (new run id) of the same workflow id, with the history up to the chosen
workflow task copied over; everything after it runs again. With keys made from the run id, the
order step runs with a new key and orders again. With keys made from the workflow id, it finds
the first order.
"""

from __future__ import annotations

import uuid

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client

from agent.steps import PLACE_ORDER


async def reset_before_activity(
    client: Client, workflow_id: str, run_id: str, activity_type: str = PLACE_ORDER.name
) -> str:
    """Reset the run to the workflow task that scheduled `activity_type`; return the new run id."""
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    scheduled = next(
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity_type
    )
    response = await client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
            reason=f"crash lab: run again from before {activity_type}",
            workflow_task_finish_event_id=scheduled.workflow_task_completed_event_id,
            request_id=str(uuid.uuid4()),
        )
    )
    return response.run_id
