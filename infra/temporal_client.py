"""The project's Temporal client: the pydantic data converter, on the configured server."""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.client import Client, Interceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime

from crashtest.connect import ServerUnreachable, connect
from infra.errors import ConfigError
from infra.temporal_server import temporal_address

NAMESPACE = "default"
DATA_CONVERTER = "temporalio.contrib.pydantic:pydantic_data_converter"  # for crashtest's flag


async def connect_temporal(
    address: str | None = None,
    runtime: Runtime | None = None,
    interceptors: Sequence[Interceptor] = (),
) -> Client:
    try:
        return await connect(
            address or temporal_address(),
            namespace=NAMESPACE,
            data_converter=pydantic_data_converter,
            interceptors=interceptors,
            runtime=runtime,
        )
    except ServerUnreachable as err:
        raise ConfigError(str(err)) from None
