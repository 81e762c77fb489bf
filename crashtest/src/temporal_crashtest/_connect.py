"""Connecting to Temporal: retried for a moment, since a server just started may not answer yet.

The server's settings are the Temporal CLI's (`temporalio.envconfig`: TEMPORAL_ADDRESS,
TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*, TEMPORAL_GRPC_META_*, TEMPORAL_PROFILE,
TEMPORAL_CONFIG_FILE): `configured()` reads them; a connection to the configured address carries
its API key, TLS and gRPC metadata, one to any other address (a dev server) none.

A loaded server may answer a call with "Namespace default is not found" for a namespace that
exists: its namespace registry turns any failed read (a timeout, say) into that error. The
client `connect` returns asks again for a while (`NamespaceBlips`) instead of failing the test."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, Interceptor, Plugin
from temporalio.converter import DataConverter
from temporalio.envconfig import ClientConfig, ClientConnectConfig
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode, ServiceClient, ServiceResponse

from temporal_crashtest._errors import ServerUnreachable

if TYPE_CHECKING:
    from temporalio.service import _BridgeServiceClient  # the type the SDK's workers take

READY_TIMEOUT_S = 10
NAMESPACE_BLIP_S = 30  # how long a namespace that answered may be "not found" before it counts
_SECURITY = ("api_key", "tls", "rpc_metadata")


def configured() -> ClientConnectConfig:
    """The Temporal CLI's settings (environment, profile file); {} where none are set."""
    try:
        return ClientConfig.load_client_connect_config()
    except (RuntimeError, ValueError, OSError) as err:
        why = _reason(err)[0]
        raise ServerUnreachable(f"the Temporal client settings are not valid: {why}") from None


def security_for(address: str) -> dict[str, Any]:
    """The configured server's API key, TLS and gRPC metadata (`Client.connect`'s keywords), for
    a connection to it; none for any other address (a dev server)."""
    settings = configured()
    if settings.get("target_host") != address:
        return {}
    return {k: v for k, v in settings.items() if k in _SECURITY}


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
    security = security_for(address)
    deadline = time.monotonic() + ready_timeout_s
    while True:
        try:
            client = await Client.connect(
                address,
                namespace=namespace,
                **security,
                data_converter=data_converter,
                interceptors=interceptors,
                plugins=list(plugins),
                runtime=runtime,
            )
            await client.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace=namespace)
            )
            return _asking_again(client, namespace)
        except (RuntimeError, RPCError) as err:
            why, final = _reason(err)
            if final or time.monotonic() > deadline:
                raise ServerUnreachable(f"cannot reach Temporal at {address}: {why}") from None
            await asyncio.sleep(0.2)


def _asking_again(client: Client, namespace: str) -> Client:
    """The client on `NamespaceBlips`, where the SDK has the method it wraps (a private one)."""
    if not callable(getattr(client.service_client, "_rpc_call", None)):
        return client
    config = client.config()
    config["service_client"] = NamespaceBlips(client.service_client, namespace)
    return Client(**config)


class NamespaceBlips(ServiceClient):
    """A service client that asks again, for up to `NAMESPACE_BLIP_S`, when the server says the
    namespace — one that has answered — is not found. Temporal's namespace registry answers any
    failed read of a namespace it has not cached with that error (its code says so: "we should
    return the actual error we got (e.g. timeout)"), which a loaded dev server does now and then.
    The frontend checks the namespace before it does anything, so asking again is safe for every
    call. Everything else goes to the wrapped client as it is."""

    def __init__(self, inner: ServiceClient, namespace: str, blip_s: float = NAMESPACE_BLIP_S):
        super().__init__(inner.config)
        self._inner = inner
        self._not_found = f"Namespace {namespace} is not found"
        self._blip_s = blip_s

    @property
    def worker_service_client(self) -> _BridgeServiceClient:  # what workers are built on
        return self._inner.worker_service_client

    def update_rpc_metadata(self, metadata: Mapping[str, str | bytes]) -> None:
        self._inner.update_rpc_metadata(metadata)

    def update_api_key(self, api_key: str | None) -> None:
        self._inner.update_api_key(api_key)

    async def _rpc_call(
        self,
        rpc: str,
        req: Any,  # a protobuf message, passed on
        resp_type: type[ServiceResponse],
        *,
        service: str,
        retry: bool,
        metadata: Mapping[str, str | bytes],
        timeout: timedelta | None,  # noqa: ASYNC109 - the SDK's signature, passed on
    ) -> ServiceResponse:
        deadline = time.monotonic() + self._blip_s
        while True:
            try:
                return await self._inner._rpc_call(
                    rpc,
                    req,
                    resp_type,
                    service=service,
                    retry=retry,
                    metadata=metadata,
                    timeout=timeout,
                )
            except RPCError as err:
                if not self._a_blip(err) or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.2)

    def _a_blip(self, err: RPCError) -> bool:
        return err.status == RPCStatusCode.NOT_FOUND and err.message.startswith(self._not_found)
