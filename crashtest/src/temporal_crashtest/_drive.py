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
from collections.abc import Callable
from datetime import timedelta
from typing import Any

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
_GONE = (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.PERMISSION_DENIED)


async def _again(what: str, deadline: float, every_s: float, last: object) -> None:
    """Sleep before the next try, or DriveTimeout once the deadline has passed."""
    if time.monotonic() >= deadline:
        raise DriveTimeout(f"{what}: no success in time (last: {last})")
    await asyncio.sleep(every_s)


def _try_for(limit_s: float, deadline: float) -> timedelta:
    """One try's timeout: `limit_s`, or what is left before the deadline (at least 0.5 s)."""
    return timedelta(seconds=max(0.5, min(limit_s, deadline - time.monotonic())))


def _retried(err: RPCError) -> bool:
    """Whether another try can help: the run or namespace is not gone."""
    return err.status not in _GONE


async def send_update(
    handle: WorkflowHandle[Any, Any],
    update: Any,
    *args: Any,
    id: str,
    timeout_s: float = TIMEOUT_S,
    every_s: float = EVERY_S,
) -> Any:
    """The update's result, sent until the run takes it (`id`: the same for every try)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await handle.execute_update(
                update, args=list(args), id=id, rpc_timeout=_try_for(UPDATE_TIMEOUT_S, deadline)
            )
        except WorkflowUpdateRPCTimeoutOrCancelledError as err:
            last: object = err
        except RPCError as err:
            if not _retried(err):
                raise
            last = err
        await _again(f"update {id}", deadline, every_s, last)


async def send_signal(
    handle: WorkflowHandle[Any, Any],
    signal: Any,
    *args: Any,
    timeout_s: float = TIMEOUT_S,
    every_s: float = EVERY_S,
) -> None:
    """Send a signal, again while the server does not answer (a worker need not be up)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            await handle.signal(signal, args=list(args))
            return
        except RPCError as err:
            if not _retried(err):
                raise
            last = err
        await _again("signal", deadline, every_s, last)


async def wait_until(
    handle: WorkflowHandle[Any, Any],
    query: Any,
    predicate: Callable[[Any], bool],
    *args: Any,
    timeout_s: float = TIMEOUT_S,
    every_s: float = EVERY_S,
) -> Any:
    """The query's answer once `predicate(answer)` holds, asked every `every_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            answer = await handle.query(
                query, args=list(args), rpc_timeout=_try_for(QUERY_TIMEOUT_S, deadline)
            )
            if predicate(answer):
                return answer
            last: object = f"the query answered {answer!r}"
        except WorkflowQueryFailedError as err:  # no worker, or one replaying: ask again
            last = err
        except RPCError as err:
            if not _retried(err):
                raise
            last = err
        await _again("query", deadline, every_s, last)
