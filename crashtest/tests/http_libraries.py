"""`python http_libraries.py URL OTHER`: the HTTP observer installed from the environment (as in
a crash test's worker process), then requests through every library it watches that is
installed, for the run `wf-libraries`: per library a keyed POST sent twice, an unkeyed POST, a
GET (not an effect), a PUT to a paid path, and a POST to OTHER (a host not watched); and a PUT
of an S3 object through botocore (boto3's layer). Nothing listens at either: each request fails,
and was recorded before it was sent. Prints the libraries it used, as JSON."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import importlib
import json
import sys
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from temporal_crashtest._worker.http_record import SENDER, Sender, install_from_env

SECRET = {"Authorization": "Bearer sk-planted-header-secret-4242"}
QUERY = "?api_key=planted-query-secret-4242"


def _each(send: Callable[..., Any], url: str, other: str, name: str) -> None:
    """The requests, through `send(method, url, body, headers)`, each one's failure ignored."""
    calls = [
        ("POST", f"{url}/{name}/charges{QUERY}", b'{"n": 1}', {"Idempotency-Key": f"k-{name}"}),
        ("POST", f"{url}/{name}/charges{QUERY}", b'{"n": 1}', {"Idempotency-Key": f"k-{name}"}),
        ("POST", f"{url}/{name}/mail", b"hello", {}),
        ("GET", f"{url}/{name}/mail", None, {}),
        ("PUT", f"{url}/v1/{name}/answer", b"{}", {}),
        ("POST", f"{other}/{name}/elsewhere", b"x", {}),
    ]
    for method, target, body, headers in calls:
        with contextlib.suppress(Exception):
            send(method, target, body, {**SECRET, **headers})


async def _each_async(send: Callable[..., Awaitable[Any]], url: str, other: str, name: str) -> None:
    pending: list[Any] = []
    _each(lambda *a: pending.append(a), url, other, name)
    for args in pending:
        with contextlib.suppress(Exception):
            await send(*args)


def main(url: str, other: str) -> None:
    assert install_from_env(), "no CRASHTEST_HTTP in the environment"
    SENDER.set(Sender("wf-libraries", "test", 1))
    used = []
    for name in ("httpx", "httpx2"):  # httpx2: the fork openai's client uses
        with contextlib.suppress(ImportError):
            module = importlib.import_module(name)
            with module.Client(timeout=2) as client:
                _each(
                    lambda m, u, b, h: client.request(m, u, content=b, headers=h), url, other, name
                )
            asyncio.run(_httpx_async(module, url, other, f"{name}-async"))
            used += [name, f"{name}-async"]
    with contextlib.suppress(ImportError):
        import requests

        with requests.Session() as session:
            _each(
                lambda m, u, b, h: session.request(m, u, data=b, headers=h, timeout=2),
                url,
                other,
                "requests",
            )
        used.append("requests")
    with contextlib.suppress(ImportError):
        importlib.import_module("aiohttp")
        asyncio.run(_aiohttp(url, other))
        used.append("aiohttp")
    with contextlib.suppress(ImportError):
        import urllib3

        pool = urllib3.PoolManager(retries=False, timeout=2)
        _each(lambda m, u, b, h: pool.request(m, u, body=b, headers=h), url, other, "urllib3")
        used.append("urllib3")
    _each(_urllib_request, url, other, "urllib.request")
    _each(_http_client, url, other, "http.client")
    used += ["urllib.request", "http.client"]
    with contextlib.suppress(ImportError):
        _botocore(url)
        used.append("botocore")
    print(json.dumps(used))


def _urllib_request(m: str, u: str, b: bytes | None, h: dict[str, str]) -> None:
    urllib.request.urlopen(urllib.request.Request(u, data=b, headers=h, method=m), timeout=2)


def _http_client(m: str, u: str, b: bytes | None, h: dict[str, str]) -> None:
    parts = urlsplit(u)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=2)
    conn.request(m, f"{parts.path}?{parts.query}", b, h)
    conn.getresponse().read()


def _botocore(url: str) -> None:
    import botocore.config
    import botocore.session

    client = botocore.session.get_session().create_client(
        "s3",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="AKIAPLANTEDKEY000000",
        aws_secret_access_key="planted-aws-secret-4242",
        config=botocore.config.Config(
            retries={"total_max_attempts": 1}, connect_timeout=2, s3={"addressing_style": "path"}
        ),
    )
    with contextlib.suppress(Exception):
        client.put_object(Bucket="botocore", Key="charges", Body=b"{}")


async def _httpx_async(module: Any, url: str, other: str, name: str) -> None:
    async with module.AsyncClient(timeout=2) as client:

        async def send(m: str, u: str, b: bytes | None, h: dict[str, str]) -> Any:
            return await client.request(m, u, content=b, headers=h)

        await _each_async(send, url, other, name)


async def _aiohttp(url: str, other: str) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as session:

        async def send(m: str, u: str, b: bytes | None, h: dict[str, str]) -> Any:
            async with session.request(m, u, data=b, headers=h) as answer:
                return answer.status

        await _each_async(send, url, other, "aiohttp")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
