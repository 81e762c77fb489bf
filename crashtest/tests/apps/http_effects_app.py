"""Look it up, send it, mark it done — through each way Python sends HTTP: an activity per
library (httpx, requests, urllib3, urllib.request, http.client, a raw socket) that finds its mark
in sqlite, POSTs an order without a key to ORDERS_URL, then marks it done. A kill between the
POST and the mark books twice, whatever observes the runs: `observe` reads the order service's
own counts. The raw socket is a library crashtest does not watch: it is said to be untested."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from urllib.parse import urlsplit

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

LIBRARIES = ["httpx", "requests", "urllib3", "urllib.request", "http.client", "socket"]


def _post(library: str, url: str, body: bytes) -> None:
    parts = urlsplit(url)
    if library == "httpx":
        import httpx

        httpx.post(url, content=body).raise_for_status()
    elif library == "requests":
        import requests

        requests.post(url, data=body, timeout=10).raise_for_status()
    elif library == "urllib3":
        import urllib3

        urllib3.request("POST", url, body=body)
    elif library == "urllib.request":
        urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST")).read()
    elif library == "http.client":
        import http.client

        conn = http.client.HTTPConnection(parts.hostname or "", parts.port)
        conn.request("POST", parts.path, body)
        conn.getresponse().read()
    else:
        with socket.create_connection((parts.hostname or "", parts.port or 80)) as raw:
            head = f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            raw.sendall(head.encode() + body)
            raw.recv(4096)


@activity.defn
def order_through(library: str) -> str:
    info = activity.info()
    marks = sqlite3.connect(os.path.join(os.environ["NOTES_DIR"], "marks.db"))
    marks.execute("create table if not exists marks (k text primary key)")
    key = f"{info.workflow_id}:{library}"
    if marks.execute("select 1 from marks where k = ?", (key,)).fetchone():
        return "already"
    url = f"{os.environ['ORDERS_URL']}/{info.workflow_id}/{library}"
    _post(library, url, json.dumps({"item": "milk"}).encode())
    with marks:
        marks.execute("insert into marks values (?)", (key,))
    return "ordered"


@workflow.defn
class OrderThroughEach:
    @workflow.run
    async def run(self, libraries: list[str]) -> int:
        for library in libraries:
            await workflow.execute_activity(
                order_through,
                library,
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100)),
            )
        return len(libraries)


def build(client: Client, task_queue: str) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[OrderThroughEach],
        activities=[order_through],
        activity_executor=ThreadPoolExecutor(4),
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )


def observe(workflow_id: str) -> dict[str, int]:
    """The order service's own counts for the run: orders per library."""
    with urllib.request.urlopen(f"{os.environ['ORDERS_URL']}/counts/{workflow_id}") as answer:
        counts: dict[str, int] = json.loads(answer.read())
    return counts
