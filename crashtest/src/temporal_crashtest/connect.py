"""Connecting to Temporal: retried for a moment, since a server just started may not answer yet.

The server's settings are the Temporal CLI's (`temporalio.envconfig`: TEMPORAL_ADDRESS,
TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*, TEMPORAL_GRPC_META_*, TEMPORAL_PROFILE,
TEMPORAL_CONFIG_FILE): `configured()` reads them; a connection to the configured address carries
its API key, TLS and gRPC metadata, one to any other address (a dev server) none."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, Interceptor, Plugin
from temporalio.converter import DataConverter
from temporalio.envconfig import ClientConfig, ClientConnectConfig
from temporalio.runtime import Runtime
from temporalio.service import RPCError

READY_TIMEOUT_S = 10
_SECURITY = ("api_key", "tls", "rpc_metadata")


def configured() -> ClientConnectConfig:
    """The Temporal CLI's settings (environment, profile file); {} where none are set."""
    try:
        return ClientConfig.load_client_connect_config()
    except (RuntimeError, ValueError, OSError) as err:
        why = _reason(err)
        raise ServerUnreachable(f"the Temporal client settings are not valid: {why}") from None


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
    settings = configured()
    security: dict[str, object] = {}
    if settings.get("target_host") == address:  # the configured server: its key, TLS, metadata
        security = {k: v for k, v in settings.items() if k in _SECURITY}
    deadline = time.monotonic() + ready_timeout_s
    while True:
        try:
            client = await Client.connect(
                address,
                namespace=namespace,
                **security,  # type: ignore[arg-type]
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
