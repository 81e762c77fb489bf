"""A gRPC proxy between a worker and the Temporal server that forwards every call untouched.

Every Temporal SDK talks to the server over gRPC, and every call a worker makes is unary (its
long polls too), so one handler serves them all, whatever the service: the request's bytes go
to the server with the caller's metadata and what is left of its deadline, and the server's
answer comes back as it was sent — its bytes, its initial and trailing metadata, or its status
code, message and details (`grpc-status-details-bin`, which the SDKs read: "already started",
"not found" and the like). Nothing is decoded on the way but what a watcher asks to see
(`Watcher`). A caller that goes away (a poll given up, a worker stopped or killed) cancels its
upstream call too, so no poll is held past its caller.

A watcher decides each call's `Pass`: forwarded (`GO`); dropped, never forwarded (`DROP`: its
caller is being killed, and the server never hears it); or forwarded alone (`ALONE`: its caller
is being killed, and the server hears it all the same, once every other call through the proxy
has ended — the dead worker's polls among them, so that the server cannot hand what follows
this call to a worker that is gone). One proxy serves one worker, and no other process
(`peers.Peers`: it holds the operator's credentials).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from temporalio.service import TLSConfig

from temporal_crashtest._wire.peers import Peers
from temporal_crashtest._wire.watch import Pass, Watcher

# Any size both ways: a history or a workflow task's commands may be large, and refusing one is
# the server's business, not the proxy's.
_UNLIMITED = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
# Set by the transport for each call; the rest of the metadata is the caller's (API keys,
# namespaces, client name and version) and goes on as it came.
_TRANSPORT_KEYS = ("content-type", "te", "user-agent", "grpc-accept-encoding", "grpc-encoding")

Metadatum = tuple[str, str | bytes]


REFUSED = "crashtest's proxy serves only the worker it was started for"
QUIET_TIMEOUT_S = 5.0  # how long a call forwarded alone waits for the others to end
ALONE_TIMEOUT_S = 10.0  # its own deadline upstream: its caller, gone, set none


def _forwardable(metadata: Iterable[Metadatum] | None) -> tuple[Metadatum, ...]:
    return tuple(
        (key, value)
        for key, value in metadata or ()
        if not key.startswith(":") and key not in _TRANSPORT_KEYS
    )


@dataclass(frozen=True)
class Upstream:
    """How the proxy reaches the server: its address, TLS (`tls`: with the CA to trust, a client
    certificate, the name to verify, each where given) and metadata added to every call (the API
    key, as `authorization`, and configured gRPC metadata) — the settings the crash test's own
    client uses (`_connect.security_for`). The worker behind the proxy talks to it in plain text,
    with no key."""

    address: str
    tls: bool = False
    root_ca: bytes | None = None
    client_cert: bytes | None = None
    client_key: bytes | None = None
    server_name: str | None = None
    metadata: tuple[Metadatum, ...] = ()

    @classmethod
    def of(cls, address: str, security: Mapping[str, Any]) -> Upstream:
        """From `Client.connect`'s keywords `api_key`, `tls` (True or a `TLSConfig`) and
        `rpc_metadata`."""
        metadata: list[Metadatum] = list((security.get("rpc_metadata") or {}).items())
        if security.get("api_key"):
            metadata.append(("authorization", f"Bearer {security['api_key']}"))
        tls = security.get("tls") or False
        if not isinstance(tls, TLSConfig):
            return cls(address, tls=bool(tls), metadata=tuple(metadata))
        return cls(
            address,
            tls=True,
            root_ca=tls.server_root_ca_cert,
            client_cert=tls.client_cert,
            client_key=tls.client_private_key,
            server_name=tls.domain,
            metadata=tuple(metadata),
        )

    def channel(self) -> grpc.aio.Channel:
        if not self.tls:
            return grpc.aio.insecure_channel(self.address, options=_UNLIMITED)
        credentials = grpc.ssl_channel_credentials(
            root_certificates=self.root_ca,
            private_key=self.client_key,
            certificate_chain=self.client_cert,
        )
        named = [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []
        return grpc.aio.secure_channel(self.address, credentials, options=[*_UNLIMITED, *named])

    def with_metadata(self, caller: tuple[Metadatum, ...]) -> tuple[Metadatum, ...]:
        """The caller's metadata, and the upstream's in place of any of the same key."""
        ours = {key for key, _ in self.metadata}
        return (*(m for m in caller if m[0] not in ours), *self.metadata)


class WireProxy:
    """Listens on 127.0.0.1 (a free port, or `port`) and forwards to `upstream` (host:port, in
    plain text; or an `Upstream`, with TLS and an API key). `start()` returns the address
    workers should use."""

    def __init__(
        self,
        upstream: str | Upstream,
        watchers: Sequence[Watcher] = (),
        port: int = 0,
        peers: Peers | None = None,
    ) -> None:
        self.upstream = upstream if isinstance(upstream, Upstream) else Upstream(upstream)
        self.watchers, self.port = list(watchers), port
        self.peers = peers  # who may use it (None: anyone; `peers.Peers`)
        self.calls = 0  # forwarded so far
        self.in_flight = 0  # calls being handled now
        self._fewer = asyncio.Event()  # set as one ends
        self._upstream: set[Any] = set()  # their calls to the server, going on now
        self._alone: set[asyncio.Task[bytes]] = set()  # forwarded alone, still going
        self._server: grpc.aio.Server | None = None
        self._channel: grpc.aio.Channel | None = None
        self._methods: dict[str, Any] = {}
        # Calls forwarded alone that the server refused (a task's end it no longer takes: its
        # timeout came first, on a loaded machine): the moment they stood for was not made.
        self.lost_alone: list[str] = []

    async def start(self) -> str:
        self._channel = self.upstream.channel()
        self._server = grpc.aio.server(options=_UNLIMITED)
        self._server.add_generic_rpc_handlers((_Everything(self),))
        self.port = self._server.add_insecure_port(f"127.0.0.1:{self.port}")
        if self.peers is not None:
            self.peers.port = self.port
        await self._server.start()
        return self.address

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self._alone:
            await asyncio.wait(self._alone, timeout=ALONE_TIMEOUT_S)
        if self._server is not None:
            await self._server.stop(grace=None)
        if self._channel is not None:
            await self._channel.close()

    async def forward(
        self, method: str, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> bytes:
        self.in_flight += 1
        try:
            if self.peers is not None and not await self.peers.allows(context.peer()):
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, REFUSED)
            how = Pass.GO
            for watcher in self.watchers:
                how = await watcher.before(method, request)
                if how is not Pass.GO:
                    break
            if how is Pass.DROP:
                # As the server answers a task's end it no longer knows: an SDK retries an
                # unavailable server for seconds, holding the worker, but gives this one up.
                await context.abort(grpc.StatusCode.NOT_FOUND, "dropped by the crash test")
            if how is Pass.ALONE:
                task = asyncio.ensure_future(self._forward_alone(method, request))
                self._alone.add(task)
                task.add_done_callback(self._alone.discard)
                return await asyncio.shield(task)
            return await self._forward(method, request, context)
        finally:
            self.in_flight -= 1
            self._fewer.set()

    async def _forward(
        self, method: str, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> bytes:
        call = self._call(method)(
            request,
            metadata=self.upstream.with_metadata(_forwardable(context.invocation_metadata())),
            timeout=context.time_remaining(),
        )
        self._upstream.add(call)
        try:
            response: bytes = await call
        except grpc.aio.AioRpcError as err:
            await context.abort(
                err.code(), err.details() or "", _forwardable(err.trailing_metadata())
            )
        except asyncio.CancelledError:
            call.cancel()
            raise
        finally:
            self._upstream.discard(call)
        await context.send_initial_metadata(_forwardable(await call.initial_metadata()))
        context.set_trailing_metadata(_forwardable(await call.trailing_metadata()))
        return await self._answered(method, request, response)

    async def _forward_alone(self, method: str, request: bytes) -> bytes:
        """Forward a call whose caller is being killed, once the proxy's other calls ended: the
        dead caller's, cancelled here upstream (its polls: a server may hand a task to a poll
        whose caller died, if nothing tells it the caller is gone). Its own handler counts as
        one of them while its caller is connected, so one call may remain."""
        await self.cut_off(leaving=1)
        call = self._call(method)
        try:
            response: bytes = await call(
                request, metadata=self.upstream.metadata, timeout=ALONE_TIMEOUT_S
            )
        except grpc.aio.AioRpcError as err:
            self.lost_alone.append(f"{method.rpartition('/')[2]}: {err.details()}")
            raise
        return await self._answered(method, request, response)

    async def cut_off(self, leaving: int = 0) -> None:
        """End every call going on through the proxy (a dead worker's polls): cancelled upstream
        now, rather than when the server or the transport notices the caller is gone, and waited
        for (at most QUIET_TIMEOUT_S) down to `leaving` calls. Until then the server may hand
        the run's next task to a poll whose worker is dead."""
        for call in list(self._upstream):
            call.cancel()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._down_to(leaving), QUIET_TIMEOUT_S)

    async def _down_to(self, calls: int) -> None:
        while self.in_flight > calls:
            self._fewer.clear()
            await self._fewer.wait()

    async def _answered(self, method: str, request: bytes, response: bytes) -> bytes:
        self.calls += 1
        for watcher in self.watchers:
            await watcher.after(method, request, response)
        return response

    def _call(self, method: str) -> Any:
        """The upstream method, bytes in and out (made once per method)."""
        found = self._methods.get(method)
        if found is None:
            assert self._channel is not None, "start() first"
            found = self._methods[method] = self._channel.unary_unary(method)
        return found


class _Everything(grpc.GenericRpcHandler):
    """Any unary method of any service, its bytes passed through undecoded."""

    def __init__(self, proxy: WireProxy) -> None:
        self.proxy = proxy

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method: str = handler_call_details.method

        async def unary(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
            return await self.proxy.forward(method, request, context)

        return grpc.unary_unary_rpc_method_handler(unary)
