"""Helpers for a `drive(handle)` that survives the kills: send a signal or an update, and wait
until a query says something, each tried again while no worker is up.

A crash test kills workers while the drive talks to the run. Then a query fails or times out
(no worker answers it), an update is refused or times out (no worker takes it), and the server
itself may be restarting. Each helper tries again every `every_s` until `timeout_s`; what
another try cannot help (the run has ended, the update's handler failed) is raised at once.

- `send_update(handle, update, *args, id=...)`: the update's id makes a send that the run had
  already taken return that update's result instead of running it again, so resending is safe.
- `send_signal(handle, signal, *args)`: sent again only when the server did not answer; a
  signal has no id of its own, so make its handler idempotent (set a flag, not add one).
- `wait_until(handle, query, predicate, *args)`: the query's answer once `predicate` holds, e.g.
  before sending a confirmation the run only takes in a certain state (sent too early, it is
  lost).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.client import (
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode

from temporal_crashtest._errors import DriveTimeout

EVERY_S = 0.5  # between tries
TIMEOUT_S = 120.0  # in all: a cell's deadline is longer only with --deadline-s
QUERY_TIMEOUT_S = 2.0  # one query's wait for a worker to answer it
UPDATE_TIMEOUT_S = 10.0  # one send's wait for a worker to take the update
T = TypeVar("T")
_GONE = (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.PERMISSION_DENIED)


class _NotYet(Exception):
    """An answer that does not satisfy the helper yet: ask again."""


async def _until_through(
    what: str,
    attempt: Callable[[timedelta], Awaitable[T]],
    *,
    try_s: float,
    timeout_s: float,
    every_s: float,
    passing: tuple[type[Exception], ...] = (),
) -> T:
    """`attempt(its timeout)` until it returns, again every `every_s` after a `passing` error, an
    RPC error another try can help (the run or namespace is not gone) or an answer not good yet;
    DriveTimeout once `timeout_s` have passed. A try's timeout is `try_s`, or what is left."""
    deadline = time.monotonic() + timeout_s
    again: tuple[type[Exception], ...] = (_NotYet, *passing)
    while True:
        left = deadline - time.monotonic()
        try:
            return await attempt(timedelta(seconds=max(0.5, min(try_s, left))))
        except again as err:
            last: object = err
        except RPCError as err:
            if err.status in _GONE:
                raise
            last = err
        if time.monotonic() >= deadline:
            raise DriveTimeout(f"{what}: no success in time (last: {last})")
        await asyncio.sleep(every_s)


async def send_update(
    handle: WorkflowHandle[Any, Any],
    update: Any,
    *args: Any,
    id: str,
    timeout_s: float = TIMEOUT_S,
    every_s: float = EVERY_S,
) -> Any:
    """The update's result, sent until the run takes it (`id`: the same for every try)."""

    async def send(rpc_timeout: timedelta) -> Any:
        return await handle.execute_update(update, args=list(args), id=id, rpc_timeout=rpc_timeout)

    return await _until_through(
        f"update {id}",
        send,
        try_s=UPDATE_TIMEOUT_S,
        timeout_s=timeout_s,
        every_s=every_s,
        passing=(WorkflowUpdateRPCTimeoutOrCancelledError,),  # no worker took it in time
    )


async def send_signal(
    handle: WorkflowHandle[Any, Any],
    signal: Any,
    *args: Any,
    timeout_s: float = TIMEOUT_S,
    every_s: float = EVERY_S,
) -> None:
    """Send a signal, again while the server does not answer (a worker need not be up)."""

    async def send(rpc_timeout: timedelta) -> None:
        await handle.signal(signal, args=list(args), rpc_timeout=rpc_timeout)

    await _until_through(
        "signal", send, try_s=UPDATE_TIMEOUT_S, timeout_s=timeout_s, every_s=every_s
    )


async def wait_until(
    handle: WorkflowHandle[Any, Any],
    query: Any,
    predicate: Callable[[Any], bool],
    *args: Any,
    timeout_s: float = TIMEOUT_S,
    every_s: float = EVERY_S,
) -> Any:
    """The query's answer once `predicate(answer)` holds, asked every `every_s`."""

    async def ask(rpc_timeout: timedelta) -> Any:
        answer = await handle.query(query, args=list(args), rpc_timeout=rpc_timeout)
        if not predicate(answer):
            raise _NotYet(f"the query answered {answer!r}")
        return answer

    return await _until_through(
        "query",
        ask,
        try_s=QUERY_TIMEOUT_S,
        timeout_s=timeout_s,
        every_s=every_s,
        passing=(WorkflowQueryFailedError,),  # no worker, or one replaying: ask again
    )
