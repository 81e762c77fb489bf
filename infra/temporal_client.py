"""The project's Temporal client: the pydantic data converter, on the configured server, retried
for a moment (a server just started may not answer yet)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, Interceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime
from temporalio.service import RPCError

from infra.errors import ConfigError
from infra.temporal_server import temporal_address

NAMESPACE = "default"
READY_TIMEOUT_S = 10


def _reason(err: Exception) -> str:
    text = str(err).strip()
    if "Connection refused" in text:
        return "connection refused (is the server running? set TEMPORAL_ADDRESS)"
    return text.splitlines()[0] if text else type(err).__name__


async def connect_temporal(
    address: str | None = None,
    runtime: Runtime | None = None,
    interceptors: Sequence[Interceptor] = (),
) -> Client:
    """A client whose namespace has answered once; ConfigError (one line) if none does."""
    address = address or temporal_address()
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            client = await Client.connect(
                address,
                namespace=NAMESPACE,
                data_converter=pydantic_data_converter,
                interceptors=interceptors,
                runtime=runtime,
            )
            await client.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace=NAMESPACE)
            )
            return client
        except (RuntimeError, RPCError) as err:
            if time.monotonic() > deadline:
                raise ConfigError(f"cannot reach Temporal at {address}: {_reason(err)}") from None
            await asyncio.sleep(0.2)
