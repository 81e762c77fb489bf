"""Connecting to Temporal: retried for a moment, since a server just started may not answer yet."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, Interceptor, Plugin
from temporalio.converter import DataConverter
from temporalio.runtime import Runtime
from temporalio.service import RPCError

READY_TIMEOUT_S = 10


def _reason(err: Exception) -> str:
    text = str(err).strip()
    if "Connection refused" in text:
        return "connection refused (is the server running? set TEMPORAL_ADDRESS)"
    return text.splitlines()[0] if text else type(err).__name__


class ServerUnreachable(ConnectionError):
    """No Temporal server answered at the address, or it has no such namespace."""


async def connect(
    address: str,
    *,
    namespace: str = "default",
    data_converter: DataConverter = DataConverter.default,
    interceptors: Sequence[Interceptor] = (),
    plugins: Sequence[Plugin] = (),
    runtime: Runtime | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
) -> Client:
    """A client whose namespace has answered once. `plugins` (an agent framework's, say) configure
    the client and every worker built on it: their data converter, activities, sandbox."""
    deadline = time.monotonic() + ready_timeout_s
    while True:
        try:
            client = await Client.connect(
                address,
                namespace=namespace,
                data_converter=data_converter,
                interceptors=interceptors,
                plugins=list(plugins),
                runtime=runtime,
            )
            await client.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace=namespace)
            )
            return client
        except (RuntimeError, RPCError) as err:
            if time.monotonic() > deadline:
                raise ServerUnreachable(
                    f"cannot reach Temporal at {address}: {_reason(err)}"
                ) from None
            await asyncio.sleep(0.2)
