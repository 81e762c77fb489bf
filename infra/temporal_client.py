"""The project's Temporal client: the pydantic data converter, on the configured server, retried
for a moment (a server just started may not answer yet).

The server is configured as the Temporal CLI and SDKs configure it (`temporalio.envconfig`):
TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS, TEMPORAL_TLS_CLIENT_CERT_PATH
and _KEY_PATH, TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_SERVER_NAME, TEMPORAL_GRPC_META_*,
or a profile (TEMPORAL_PROFILE) of a TOML file (TEMPORAL_CONFIG_FILE, else the CLI's own). With
no address configured anywhere, the local dev server (started if needed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, Interceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfig, ClientConnectConfig
from temporalio.runtime import Runtime
from temporalio.service import RPCError

from infra.config import env_str
from infra.errors import ConfigError, first_line
from infra.temporal_server import ensure_temporal_address

NAMESPACE = "default"
READY_TIMEOUT_S = 10


# What the TLS layer says, and what to set: (text in the error, the line to show, final?).
# A refused handshake will not succeed on a retry; a closed connection might be a server starting.
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
    return first_line(err), False


def configured() -> ClientConnectConfig:
    """The configured connection (see the module's docstring), its address filled in."""
    try:
        config = ClientConfig.load_client_connect_config()
    except (RuntimeError, ValueError, OSError) as err:
        reason = _reason(err)[0]
        raise ConfigError(f"the Temporal client settings are not valid: {reason}") from None
    if not config.get("target_host"):
        config["target_host"] = ensure_temporal_address()  # nothing configured: the dev server
    config.setdefault("namespace", NAMESPACE)
    _refuse_a_key_in_clear(config)
    return config


LOOPBACK = ("localhost", "127.0.0.1", "[::1]")


def _refuse_a_key_in_clear(config: ClientConnectConfig) -> None:
    """An API key is not sent to another machine with TLS turned off (TEMPORAL_TLS=false), unless
    asked for (TEMPORAL_ALLOW_PLAIN_API_KEY=1). Unset, the SDK turns TLS on for a key itself."""
    host = str(config.get("target_host", "")).rpartition(":")[0]
    in_clear = config.get("api_key") and config.get("tls") is False and host not in LOOPBACK
    if in_clear and env_str("TEMPORAL_ALLOW_PLAIN_API_KEY") != "1":
        raise ConfigError(
            f"TEMPORAL_API_KEY would go in clear to {host} (TEMPORAL_TLS=false): turn TLS on, "
            "or set TEMPORAL_ALLOW_PLAIN_API_KEY=1"
        )


async def connect_temporal(
    address: str | None = None,
    runtime: Runtime | None = None,
    interceptors: Sequence[Interceptor] = (),
) -> Client:
    """A client whose namespace has answered once; ConfigError (one line) if none does. Given an
    `address` (a server the caller started, e.g. the lab's own), that server's default
    namespace, in plain text; else the configured server."""
    config: ClientConnectConfig = (
        {"target_host": address, "namespace": NAMESPACE} if address else configured()
    )
    where = f"{config['target_host']} (namespace {config['namespace']})"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            client = await Client.connect(
                **config,
                data_converter=pydantic_data_converter,
                interceptors=interceptors,
                runtime=runtime,
            )
            await client.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace=client.namespace)
            )
            return client
        except (RuntimeError, RPCError) as err:
            reason, final = _reason(err)
            if final or time.monotonic() > deadline:
                raise ConfigError(f"cannot reach Temporal at {where}: {reason}") from None
            await asyncio.sleep(0.2)
