"""The Temporal client: pydantic data converter, and a wait until the namespace answers."""

from __future__ import annotations

import asyncio
import time

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime
from temporalio.service import RPCError

from store.errors import ConfigError
from store.temporal_server import temporal_address

NAMESPACE = "default"
READY_TIMEOUT_S = 10


async def connect_temporal(address: str | None = None, runtime: Runtime | None = None) -> Client:
    address = address or temporal_address()
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            client = await Client.connect(
                address,
                namespace=NAMESPACE,
                data_converter=pydantic_data_converter,
                runtime=runtime,
            )
            await client.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace=NAMESPACE)
            )
            return client
        except (RuntimeError, RPCError) as err:
            if time.monotonic() > deadline:
                raise ConfigError(f"cannot reach Temporal at {address}: {err}") from None
            await asyncio.sleep(0.2)
