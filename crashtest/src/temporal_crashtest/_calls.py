"""Calling the user's functions and waiting for a run's result, without letting either stall the
crash test's event loop.

A user's `drive(handle)` runs on this loop (it is handed this loop's client); a sync one, and
every `observe(workflow_id)`, runs in a daemon thread of its own, not the loop's executor: if it
never returns, waiting for it can be given up (a deadline, Ctrl-C) and the process still exits
(the executor's threads are joined at the end of `asyncio.run`, a daemon thread is not).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode


async def call(fn: Callable[..., Any], *args: Any) -> Any:
    """A user's function, sync (in a thread of its own) or async, on this event loop."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    value = await _in_a_thread_of_its_own(fn, *args)
    if inspect.isawaitable(value):
        value = await value
    return value


async def call_apart(fn: Callable[..., Any], *args: Any) -> Any:
    """A user's function that is handed nothing of this loop's (`observe`), sync or async, in a
    daemon thread with an event loop of its own: one that blocks (an async function calling
    `time.sleep`, a sync client) cannot stall this loop, so its deadline still comes."""
    return await _in_a_thread_of_its_own(_to_its_end, fn, *args)


def seen(future: asyncio.Future[Any]) -> asyncio.Future[Any]:
    """`future`, whose exception is looked at later: never logged as one nobody retrieved."""
    future.add_done_callback(lambda f: f.cancelled() or f.exception())
    return future


_ASK_AGAIN = {RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE}
# A call the client's own timeout ended: the SDK's core (tonic) says CANCELLED, not
# DEADLINE_EXCEEDED, with this message.
TIMEOUT_EXPIRED = "Timeout expired"


def late(err: RPCError) -> bool:
    """The call timed out or found the server unavailable: asking again may answer it."""
    timed_out = err.status == RPCStatusCode.CANCELLED and err.message == TIMEOUT_EXPIRED
    return timed_out or err.status in _ASK_AGAIN


async def result_of(handle: WorkflowHandle[Any, Any]) -> Any:
    """The run's result, however long it takes: a wait whose call timed out (a server slow to
    answer, on a loaded machine) is asked again, not taken for the run's end."""
    while True:
        try:
            return await handle.result()
        except RPCError as err:
            if not late(err):
                raise
            await asyncio.sleep(0.2)


def _to_its_end(fn: Callable[..., Any], *args: Any) -> Any:
    value = fn(*args)
    if inspect.isawaitable(value):
        value = asyncio.run(_awaited(value))
    return value


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


def _in_a_thread_of_its_own(fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # given up meanwhile
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    def run() -> None:
        try:
            result, error = fn(*args), None
        except BaseException as err:  # handed to the waiting task, as to_thread does
            result, error = None, err
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    name = getattr(fn, "__name__", "call")
    threading.Thread(target=run, name=f"crashtest-{name}", daemon=True).start()
    return future
