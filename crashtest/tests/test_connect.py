"""The client a crash test runs on asks again while the server says its namespace is not found:
a loaded server's namespace registry says that of a namespace it failed to read; and a call
its own timeout ended is one to ask again."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from google.protobuf.duration_pb2 import Duration
from temporal_crashtest._calls import late
from temporal_crashtest._connect import NamespaceBlips, connect
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import (
    DescribeWorkflowExecutionRequest,
    RegisterNamespaceRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode


async def _on(temporal_address: str, namespace: str, blip_s: float) -> tuple[Client, Client]:
    """A client of `namespace` (not registered yet) that asks again, and one of the default."""
    default = await connect(temporal_address)
    config = default.config()
    config["namespace"] = namespace
    config["service_client"] = NamespaceBlips(default.service_client, namespace, blip_s)
    return Client(**config), default


def test_a_namespace_that_appears_is_waited_for(temporal_address: str) -> None:
    asyncio.run(_appears(temporal_address))


async def _appears(temporal_address: str) -> None:
    namespace = f"late-{uuid.uuid4().hex[:8]}"
    patient, default = await _on(temporal_address, namespace, blip_s=30)
    plain = await Client.connect(temporal_address, namespace=namespace)  # the control: no wait
    with pytest.raises(RPCError, match=f"Namespace {namespace} is not found"):
        await plain.get_workflow_handle("nobody").describe()

    asked = asyncio.create_task(patient.get_workflow_handle("nobody").describe())
    await asyncio.sleep(1.5)
    assert not asked.done(), "the patient client gave up while the namespace was missing"
    await default.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=namespace, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    with pytest.raises(RPCError) as answer:
        await asyncio.wait_for(asked, 30)
    # The namespace is there now: the server's answer is about the workflow.
    assert answer.value.status == RPCStatusCode.NOT_FOUND
    assert "Namespace" not in answer.value.message, answer.value.message


def test_a_namespace_that_stays_missing_fails_after_the_wait(temporal_address: str) -> None:
    asyncio.run(_stays_missing(temporal_address))


async def _stays_missing(temporal_address: str) -> None:
    namespace = f"never-{uuid.uuid4().hex[:8]}"
    patient, _ = await _on(temporal_address, namespace, blip_s=1)
    started = asyncio.get_running_loop().time()
    with pytest.raises(RPCError, match=f"Namespace {namespace} is not found"):
        await patient.get_workflow_handle("nobody").describe()
    assert asyncio.get_running_loop().time() - started >= 1


def test_a_call_its_own_timeout_ended_is_asked_again(temporal_address: str) -> None:
    """A call past its timeout is late (asked again), as one to an unavailable server is, a call
    the server refused is not. Timed out by the server, it fails DEADLINE_EXCEEDED; by the
    client, first, CANCELLED "Timeout expired" (the SDK's core: the pinned deploy example's
    worker once failed to start on it); which one comes first is a race."""
    timed_out, refused = asyncio.run(_two_failures(temporal_address))
    assert late(timed_out), timed_out
    assert late(RPCError("Timeout expired", RPCStatusCode.CANCELLED, b""))
    assert not late(RPCError("cancelled by the caller", RPCStatusCode.CANCELLED, b""))
    assert refused.status == RPCStatusCode.NOT_FOUND and not late(refused), refused


async def _two_failures(temporal_address: str) -> tuple[RPCError, RPCError]:
    client = await connect(temporal_address)
    failures = []
    for timeout in (timedelta(microseconds=1), None):
        try:
            await client.workflow_service.describe_workflow_execution(
                DescribeWorkflowExecutionRequest(
                    namespace=client.namespace,
                    execution=WorkflowExecution(workflow_id=f"no-such-{uuid.uuid4()}"),
                ),
                timeout=timeout,
            )
        except RPCError as err:
            failures.append(err)
    assert len(failures) == 2, failures
    return failures[0], failures[1]
