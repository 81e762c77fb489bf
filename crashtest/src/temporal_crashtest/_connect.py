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

from temporal_crashtest._errors import ServerUnreachable

READY_TIMEOUT_S = 10
_SECURITY = ("api_key", "tls", "rpc_metadata")


def configured() -> ClientConnectConfig:
    """The Temporal CLI's settings (environment, profile file); {} where none are set."""
    try:
        return ClientConfig.load_client_connect_config()
    except (RuntimeError, ValueError, OSError) as err:
        why = _reason(err)[0]
        raise ServerUnreachable(f"the Temporal client settings are not valid: {why}") from None


# (text in the error, the line to show, whether a retry is pointless): a refused TLS handshake
# stays refused; a refused or closed connection may be a server still starting.
_REASONS = (
    (
        "Connection refused",
        "connection refused (is the server running? set TEMPORAL_ADDRESS)",
        False,
    ),
    (
        "fatal alert: CertificateRequired",
        "the server requires a client certificate "
        "(set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH)",
        True,
    ),
    ("fatal alert: UnknownCA", "the server does not trust the client certificate", True),
    ("fatal alert", "the server refused the TLS handshake", True),
    (
        "invalid peer certificate",
        "the server's certificate is not trusted "
        "(TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_SERVER_NAME)",
        True,
    ),
    (
        "broken pipe",
        "the server closed the connection (does it expect TLS? set TEMPORAL_TLS=true)",
        False,
    ),
)


def _reason(err: Exception) -> tuple[str, bool]:
    """One line saying why the server did not answer, and whether retrying is pointless."""
    text = str(err).strip()
    for needle, line, final in _REASONS:
        if needle.lower() in text.lower():
            return line, final
    return (text.splitlines()[0] if text else type(err).__name__), False


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
            why, final = _reason(err)
            if final or time.monotonic() > deadline:
                raise ServerUnreachable(f"cannot reach Temporal at {address}: {why}") from None
            await asyncio.sleep(0.2)
