"""`python http_threads.py URL ROOT[,ROOT...]`: the HTTP observer installed from the environment
(as in a worker process), a thread started before any activity (a library's own), then, as an
activity of each ROOT would, requests sent from other threads: through `loop.run_in_executor`,
a `ThreadPoolExecutor` and a `threading.Thread` the activity starts; last, the early thread
sends one. Nothing listens: each request fails after it was recorded."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
import threading

import httpx
from temporal_crashtest._worker.effects import attempting
from temporal_crashtest._worker.http_record import Sender, install_from_env, set_sender


class Attempt:
    """An activity attempt, as the crash interceptor marks one in a worker's context."""

    def made(self, what: str) -> None:
        pass

    def unseen(self, what: str) -> None:
        pass


def post(url: str) -> None:
    with contextlib.suppress(httpx.HTTPError), httpx.Client(timeout=2) as client:
        client.post(url, content=b"x")


async def activity(url: str) -> None:
    await asyncio.get_running_loop().run_in_executor(None, post, f"{url}/executor")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(post, f"{url}/pool").result()
    thread = threading.Thread(target=post, args=(f"{url}/thread",))
    thread.start()
    thread.join()


def main(url: str, roots: list[str]) -> None:
    assert install_from_env(), "no CRASHTEST_HTTP in the environment"
    go = threading.Event()

    def late_post() -> None:
        go.wait()
        post(f"{url}/early")

    early = threading.Thread(target=late_post)
    early.start()
    for root in roots:
        set_sender(Sender(root, "send", 1))
        attempting(Attempt())
        asyncio.run(activity(url))
    go.set()
    early.join()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(","))
