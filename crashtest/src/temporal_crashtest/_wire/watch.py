"""How a watcher of the wire sees each call and says how it passes (`Watcher`, `Pass`): the
proxy's (`forward`) only contract with what watches it, kept apart from gRPC itself so that
what reads the wire imports without it (grpcio is the `wire` extra)."""

from __future__ import annotations

from enum import Enum


class Pass(Enum):
    GO = "go"
    DROP = "drop"
    ALONE = "alone"


class Watcher:
    """Whoever watches the wire: it sees each call before it is forwarded (method, request bytes)
    and says how it passes (`Pass`); after the server answered, it sees the answer too.
    Override either step."""

    async def before(self, method: str, request: bytes) -> Pass:
        return Pass.GO

    async def after(self, method: str, request: bytes, response: bytes) -> None:
        return None
