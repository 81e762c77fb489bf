"""The grocer, a real HTTP service on 127.0.0.1, through the agent's own client: its keys live
their TTL and no longer, its faults look like a real store's."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import selectors
import socket
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from agent.data import OrderLine
from agent.grocer import GrocerClient, GrocerRefused, GrocerUnavailable
from grocer.app import DATABASE_DOWN
from grocer.store import MAX_LINES
from infra.processes import free_port
from tests.helpers import (
    GROCER_API_KEY,
    GROCER_API_KEYS,
    GROCER_TTL_S,
    STRANGER_API_KEY,
    assert_one_line_error,
    child_env,
    run_python,
    running_grocer,
)

AUTH = {"Authorization": f"Bearer {GROCER_API_KEY}"}
MILK = [OrderLine(item="milk", quantity=2)]
EGGS = [OrderLine(item="eggs", quantity=1)]


def ref() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


async def test_a_key_repeats_its_order_within_the_ttl_and_not_after(grocer_url: str) -> None:
    async with GrocerClient(grocer_url, GROCER_API_KEY) as grocer:
        reference, key = ref(), uuid.uuid4().hex
        first = await grocer.place(reference, MILK, key)
        again = await grocer.place(reference, MILK, key)
        assert again.id == first.id  # the same order, not a second one
        with pytest.raises(GrocerRefused, match=r"\(409\).*was used for another request"):
            await grocer.place(reference, EGGS, key)  # the same key for another order
        await asyncio.sleep(GROCER_TTL_S + 0.2)
        later = await grocer.place(reference, MILK, key)  # the key is forgotten
        assert later.id != first.id
        assert [o.id for o in await grocer.find(reference)] == [first.id, later.id]
        unkeyed = [await grocer.place(reference, MILK, None) for _ in range(2)]
        assert unkeyed[0].id != unkeyed[1].id  # no key, no memory


async def test_faults_look_like_a_real_store(grocer_url: str) -> None:
    async with GrocerClient(grocer_url, GROCER_API_KEY) as grocer:
        async with grocer._http().post(f"{grocer_url}/_faults", headers=AUTH, json={
            "next": ["error", "rate-limit", "refuse", "drop-after-store", "slow:300"]
        }) as response:  # fmt: skip
            assert response.status == 200
        reference, key = ref(), uuid.uuid4().hex
        with pytest.raises(GrocerUnavailable, match="answered 500"):
            await grocer.place(reference, MILK, key)
        with pytest.raises(GrocerUnavailable, match="answered 429"):
            await grocer.place(reference, MILK, key)
        with pytest.raises(GrocerRefused, match=r"\(400\): this order is refused"):
            await grocer.place(reference, MILK, key)
        assert await grocer.find(reference) == []  # none of those stored anything
        with pytest.raises(GrocerUnavailable, match="no answer from the grocer"):
            await grocer.place(reference, MILK, key)  # stored, then the connection dropped
        stored = await grocer.find(reference)
        assert len(stored) == 1
        started = time.monotonic()
        repeat = await grocer.place(reference, MILK, key)  # slow, and the same order
        assert repeat.id == stored[0].id and time.monotonic() - started >= 0.3


def test_a_busy_port_is_one_line(grocer_url: str, db_url: str) -> None:
    port = grocer_url.rsplit(":", 1)[1]
    done = run_python(["-m", "grocer", "--port", port], child_env(db_url), timeout=30)
    assert_one_line_error(done, f"the grocer cannot listen on 127.0.0.1:{port}")
    bad_ttl = run_python(["-m", "grocer"], child_env(db_url, GROCER_KEY_TTL_S="forever"))
    assert_one_line_error(bad_ttl, "GROCER_KEY_TTL_S='forever' is not a number")


GOOD = {"reference": "probe", "lines": [{"item": "milk", "quantity": 2}]}


def with_line(**line: object) -> dict[str, object]:
    return {"reference": "probe", "lines": [{"item": "milk", "quantity": 2, **line}]}


# (what is tried, method, path, the request's keyword arguments, the key it carries)
PROBES: list[tuple[str, str, str, dict[str, Any], str | None]] = [
    ("no key", "POST", "/orders", {"json": GOOD}, None),
    ("a wrong key", "POST", "/orders", {"json": GOOD}, "not-the-key-0123456789"),
    ("no key, finding", "GET", "/orders?reference=probe", {}, None),
    ("a quantity as text", "POST", "/orders", {"json": with_line(quantity="3")}, GROCER_API_KEY),
    ("a quantity as float", "POST", "/orders", {"json": with_line(quantity=2.0)}, GROCER_API_KEY),
    ("a quantity as bool", "POST", "/orders", {"json": with_line(quantity=True)}, GROCER_API_KEY),
    ("a huge quantity", "POST", "/orders", {"json": with_line(quantity=10**6)}, GROCER_API_KEY),
    ("NUL in an item", "POST", "/orders", {"json": with_line(item="mi\x00lk")}, GROCER_API_KEY),
    ("NUL in a reference", "POST", "/orders",
     {"json": {**GOOD, "reference": "pro\x00be"}}, GROCER_API_KEY),
    ("a field too many", "POST", "/orders", {"json": with_line(price=1)}, GROCER_API_KEY),
    ("too many lines", "POST", "/orders",
     {"json": {"reference": "probe", "lines": [{"item": f"i{n}", "quantity": 1}
                                                for n in range(51)]}}, GROCER_API_KEY),
    ("a body that is not JSON", "POST", "/orders", {"data": b"{not json"}, GROCER_API_KEY),
    ("a body too large", "POST", "/orders", {"data": b"x" * 100_000}, GROCER_API_KEY),
    ("an empty key", "POST", "/orders",
     {"json": GOOD, "headers": {"Idempotency-Key": ""}}, GROCER_API_KEY),
    ("an 8,000-byte key", "POST", "/orders",
     {"json": GOOD, "headers": {"Idempotency-Key": "k" * 8000}}, GROCER_API_KEY),
    ("a latin-1 key", "POST", "/orders",
     {"json": GOOD, "headers": {"Idempotency-Key": "caf\xe9"}}, GROCER_API_KEY),
    ("a tab in a key", "POST", "/orders",
     {"json": GOOD, "headers": {"Idempotency-Key": "k\tx"}}, GROCER_API_KEY),
    ("an empty reference", "GET", "/orders?reference=", {}, GROCER_API_KEY),
    ("NUL in a reference, finding", "GET", "/orders?reference=a%00b", {}, GROCER_API_KEY),
    ("a path it does not serve", "GET", "/nope", {}, GROCER_API_KEY),
    ("a method it does not take", "PUT", "/orders", {"json": GOOD}, GROCER_API_KEY),
]  # fmt: skip


def order_count(db_url: str) -> int:
    """The orders under the probes' reference (other tests place orders meanwhile)."""
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "select count(*) from grocer.orders where reference = %s", (GOOD["reference"],)
        ).fetchone()
        assert row is not None
        return int(row[0])


async def test_every_probe_is_answered_4xx_with_json_and_changes_nothing(
    grocer_url: str, db_url: str
) -> None:
    before = order_count(db_url)
    async with aiohttp.ClientSession() as http:
        async with http.delete(f"{grocer_url}/_faults", headers=AUTH) as response:
            assert response.status == 200  # none left by another test: every answer is the probe's
        for what, method, path, kwargs, key in PROBES:
            headers = {**({"Authorization": f"Bearer {key}"} if key else {}),
                       **kwargs.pop("headers", {})}  # fmt: skip
            async with http.request(method, f"{grocer_url}{path}", headers=headers,
                                    **kwargs) as response:  # fmt: skip
                body = await response.json(content_type=None)
                assert 400 <= response.status < 500, (what, response.status, body)
                assert isinstance(body, dict) and body.get("error"), (what, body)
        async with http.get(f"{grocer_url}/health") as response:
            assert response.status == 200 and (await response.json())["ok"] is True
    assert order_count(db_url) == before


async def test_an_account_sees_and_replays_only_its_own_orders(grocer_url: str) -> None:
    async with (
        GrocerClient(grocer_url, GROCER_API_KEY) as ours,
        GrocerClient(grocer_url, STRANGER_API_KEY) as theirs,
    ):
        reference, key = ref(), uuid.uuid4().hex
        mine = await ours.place(reference, MILK, key)
        assert await theirs.find(reference) == []  # a stranger cannot see it under our reference
        other = await theirs.place(reference, MILK, key)  # nor replay our key: its own order
        assert other.id != mine.id and not other.replayed
        assert [o.id for o in await ours.find(reference)] == [mine.id]


async def test_faults_are_bounded_and_can_be_cleared(grocer_url: str) -> None:
    async with aiohttp.ClientSession(headers=AUTH) as http:
        for faults in (["slow:inf"], ["slow:nan"], ["slow:60000"], ["error"] * 101, [3]):
            async with http.post(f"{grocer_url}/_faults", json={"next": faults}) as response:
                assert response.status == 400, faults
        async with http.post(f"{grocer_url}/_faults", json={"next": ["error"]}) as response:
            assert (await response.json())["coming"] == 1
        async with http.delete(f"{grocer_url}/_faults") as response:
            assert (await response.json())["coming"] == 0


def test_a_grocer_not_in_test_mode_takes_no_faults(db_url: str) -> None:
    with running_grocer(db_url) as url:
        request = urllib.request.Request(
            f"{url}/_faults", data=b'{"next": ["error"]}', method="POST", headers=AUTH
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 404  # not in production
        assert json.loads(refused.value.read())["error"]


async def test_health_says_when_the_database_is_gone(
    fresh_db_url: str, db: psycopg.Connection
) -> None:
    """A grocer whose database is dropped under it: /health and an order answer 503 with JSON
    (the agent retries a 503), within the grocer's wait for a connection."""
    with running_grocer(fresh_db_url) as url:
        async with aiohttp.ClientSession(headers=AUTH) as http:
            async with http.get(f"{url}/health") as response:
                assert response.status == 200 and (await response.json())["ok"] is True
            name = sql.Identifier(str(conninfo_to_dict(fresh_db_url)["dbname"]))
            db.execute(sql.SQL("drop database {} with (force)").format(name))
            async with http.get(f"{url}/health") as response:
                body = await response.json()
                assert response.status == 503 and body["ok"] is False, body
            async with http.post(f"{url}/orders", json=GOOD) as response:
                body = await response.json(content_type=None)
                assert response.status == 503 and body == {"error": DATABASE_DOWN}, body


def test_a_grocer_without_a_key_or_with_a_weak_one_does_not_start(db_url: str) -> None:
    env = {k: v for k, v in child_env(db_url).items() if not k.startswith("GROCER_API_KEY")}
    done = run_python(["-m", "grocer", "--port", str(free_port())], env, timeout=30)
    assert_one_line_error(done, "the grocer needs at least one account: set GROCER_API_KEY")
    weak = run_python(["-m", "grocer", "--port", str(free_port())],
                      {**env, "GROCER_API_KEY": "tooshort1"}, timeout=30)  # fmt: skip
    assert_one_line_error(weak, "a key of 9 characters is too easy to guess")
    placeholder = {**env, "GROCER_API_KEY": "change-me-grocer-account-key"}
    example = run_python(["-m", "grocer", "--port", str(free_port())], placeholder, timeout=30)
    assert_one_line_error(example, "the key is .env.example's placeholder: set your own")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
GOOD_LINE = st.fixed_dictionaries(
    {"item": st.sampled_from(["milk", "eggs", "caviar"]), "quantity": st.integers(1, 100)}
)
NEAR_LINE = GOOD_LINE | st.fixed_dictionaries(
    {"item": st.text(max_size=120) | JSON_VALUES, "quantity": st.integers(-5, 200) | JSON_VALUES},
    optional={"price": JSON_VALUES},
)
# What HTTP allows in a header value (RFC 9110: visible ASCII, space, obs-text); a DEL or another
# control character is not HTTP, and aiohttp's parser answers it 400 in plain text, before the app.
HEADER_TEXT = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=300
)


@st.composite
def order_bodies(draw: st.DrawFn, reference: str) -> object:
    """Request bodies: mostly near an order (the probes' reference, lines with wrong types,
    bounds, fields), some any JSON at all."""
    if draw(st.booleans()):
        return draw(JSON_VALUES)
    lines = st.lists(NEAR_LINE, max_size=3) | st.lists(GOOD_LINE, max_size=MAX_LINES + 2)
    return {"reference": reference, "lines": draw(lines)}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_body_is_an_order_or_a_4xx_with_json(
    grocer_url: str, db_url: str, data: st.DataObject
) -> None:
    """Whatever the body and the key, the answer is an order (2xx) or a 4xx JSON error, never a
    5xx; a row is added only for an order answered as new."""
    reference = f"prop-{uuid.uuid4().hex[:10]}"
    body = data.draw(order_bodies(reference))
    key = data.draw(st.none() | HEADER_TEXT)
    headers = {**AUTH, "Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    request = urllib.request.Request(
        f"{grocer_url}/orders", data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, answer = response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        status, answer = err.code, json.loads(err.read())
    event(f"answered {status}")
    assert status < 500, (status, answer, body)
    assert isinstance(answer, dict)
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "select count(*) from grocer.orders where reference = %s", (reference,)
        ).fetchone()
    added = row[0] if row else None
    if status >= 400:
        assert answer.get("error") and added == 0, (status, answer, body)
    else:
        assert status in (200, 201) and answer["reference"] == reference, answer
        assert added == 1, (answer, body)


# An order's head, and the first byte of the 100 its body says it has.
TRICKLED_BODY = (
    b"POST /orders HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
    b"Authorization: Bearer " + GROCER_API_KEY.encode() + b"\r\n\r\n{"
)


def _closed_within(socks: list[socket.socket], seconds: float) -> list[tuple[float, bytes]]:
    """For each socket, when the grocer answered or closed it (seconds from now; `seconds` if
    never) and what it sent first."""
    started = time.monotonic()
    ends: dict[socket.socket, tuple[float, bytes]] = {}
    with selectors.DefaultSelector() as waiting:
        for sock in socks:
            waiting.register(sock, selectors.EVENT_READ, sock)
        while len(ends) < len(socks) and time.monotonic() - started < seconds:
            for key, _ in waiting.select(timeout=0.05):
                ready: socket.socket = key.data
                try:
                    data = ready.recv(4096)
                except ConnectionResetError:
                    data = b""
                ends[ready] = (time.monotonic() - started, data)
                waiting.unregister(ready)
    return [ends.get(sock, (seconds, b"(still open)")) for sock in socks]


# How long the test waits for the bounds to act: they act at once or after 1 s; the slack is for
# a loaded machine (a test must not need an idle CPU), the bound itself is what is checked.
BOUNDED_WITHIN_S = 20


def test_slow_and_broken_clients_are_bounded(db_url: str, tmp_path: Path) -> None:
    """On loopback only, bounded in count and time: 30 clients that trickle their headers
    against a grocer allowing 20 connections and 1 s for a request's head and body. The 10 past
    the bound take the places of the 10 oldest (answered 503 at once: none has shown a key); the
    20 left are closed within the timeout, a trickled body is
    answered 408; requests that are not HTTP are answered JSON; a client that hangs up is one
    log line; nothing is a traceback; a well-formed request is served throughout after."""
    log = tmp_path / "grocer.log"
    limits = {"GROCER_HEADER_TIMEOUT_S": "1", "GROCER_BODY_TIMEOUT_S": "1",
              "GROCER_MAX_CONNECTIONS": "20"}  # fmt: skip
    with running_grocer(db_url, log_path=log, **limits) as url:
        port = int(url.rsplit(":", 1)[1])
        time.sleep(0.5)  # the start-up probe's connection is gone at the grocer too
        slow = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(30)]
        try:
            for sock in slow:
                sock.sendall(b"GET /health HTTP/1.1\r\nHo")  # and never the rest
            ends = _closed_within(slow, BOUNDED_WITHIN_S)
        finally:
            for sock in slow:
                sock.close()
        busy = [(s, d) for s, d in ends if d.startswith(b"HTTP/1.1 503")]
        closed = [(s, d) for s, d in ends if d == b""]
        assert len(busy) == 10, ends
        assert b'{"error": "too many connections; try again"}' in busy[0][1]
        assert len(closed) == 20, ends  # by the 1 s timeout, whenever a loaded machine gets to it

        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(TRICKLED_BODY)
            [(seconds, answer)] = _closed_within([sock], BOUNDED_WITHIN_S)
        assert answer.startswith(b"HTTP/1.1 408") and seconds < BOUNDED_WITHIN_S, answer
        assert b'"error"' in answer
        for broken in (b"NOT HTTP\r\n\r\n", b"GET / HTTP/1.1\r\nX: \x7f\r\n\r\n",
                       b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n"):  # fmt: skip
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(broken)
                [(_, answer)] = _closed_within([sock], 5)
            head, _, body = answer.partition(b"\r\n\r\n")
            assert b" 400 " in head and b"application/json" in head, answer
            assert json.loads(body) == {"error": "not a valid HTTP request"}  # echoes nothing
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(TRICKLED_BODY)  # and hangs up
        time.sleep(0.3)  # the hang-up reaches the grocer
        with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
            assert json.loads(response.read()) == {"ok": True}
    text = log.read_text()
    assert "Traceback" not in text and " ERROR " not in text, text
    assert text.count("refused a request from 127.0.0.1 (400)") == 3, text
    assert "a client at 127.0.0.1 hung up mid-request" in text, text
    assert "20 connections open, the most allowed: answered 503" in text, text


def _answered(sock: socket.socket, seconds: float = 5) -> bytes:
    """Everything the grocer sent on `sock` until it closed it (or `seconds` passed)."""
    sock.settimeout(seconds)
    data = b""
    with contextlib.suppress(TimeoutError, ConnectionResetError):
        while chunk := sock.recv(4096):
            data += chunk
    return data


def test_clients_without_a_key_cannot_hold_the_connections(db_url: str) -> None:
    """A grocer allowing 10 connections: 10 keep-alive clients asking without a key are
    answered 401 and closed (they hold nothing); then 10 that connect and send nothing are
    displaced, the oldest first, by a real client, whose requests with a key are served; once
    its connection has shown a key, a newcomer displaces the next idle one, not it."""
    with running_grocer(
        db_url, GROCER_MAX_CONNECTIONS="10", GROCER_API_KEYS=GROCER_API_KEYS
    ) as url:
        port = int(url.rsplit(":", 1)[1])
        time.sleep(0.5)  # the start-up probe's connection is gone at the grocer too
        asking = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(10)]
        for sock in asking:
            sock.sendall(b"GET /x HTTP/1.1\r\nHost: grocer\r\nConnection: keep-alive\r\n\r\n")
        for sock in asking:
            answer = _answered(sock)  # the whole answer, then the end of the connection
            assert answer.startswith(b"HTTP/1.1 401") and b"Connection: close" in answer, answer
            sock.close()
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(10)]
        time.sleep(0.3)  # all 10 are open at the grocer
        real = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            for n in range(3):
                real.request("GET", f"/orders?reference={ref()}", headers=AUTH)
                response = real.getresponse()
                assert response.status == 200, response.read()
                assert json.loads(response.read()) == {"orders": []}
                if n == 1:  # a newcomer: the next idle one makes room, not the real client
                    idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
                    time.sleep(0.3)
            displaced = [_answered(sock, 1) for sock in idle[:2]]
            assert all(d.startswith(b"HTTP/1.1 503") for d in displaced), displaced
        finally:
            real.close()
            for sock in idle:
                sock.close()


def _get(conn: http.client.HTTPConnection, key: str) -> int:
    conn.request("GET", f"/orders?reference={ref()}", headers={"Authorization": f"Bearer {key}"})
    response = conn.getresponse()
    response.read()
    return response.status


def test_one_account_cannot_hold_every_connection(db_url: str) -> None:
    """A grocer allowing 6 connections, 4 an account: one household's 5th connection is answered
    503, and when the others fill the rest, a newcomer takes the place of the greediest
    household's oldest idle connection, not a 503 (one valid account holding the cap once
    turned every other household away)."""
    with running_grocer(db_url, GROCER_MAX_CONNECTIONS="6", GROCER_MAX_CONNECTIONS_PER_ACCOUNT="4",
                        GROCER_API_KEYS=GROCER_API_KEYS) as url:  # fmt: skip
        port = int(url.rsplit(":", 1)[1])
        time.sleep(0.5)  # the start-up probe's connection is gone at the grocer too
        opened: list[http.client.HTTPConnection] = []

        def connect() -> http.client.HTTPConnection:
            opened.append(http.client.HTTPConnection("127.0.0.1", port, timeout=5))
            return opened[-1]

        try:
            greedy = [connect() for _ in range(5)]
            assert [_get(c, GROCER_API_KEY) for c in greedy] == [200, 200, 200, 200, 503]
            other = [connect() for _ in range(2)]
            assert [_get(c, STRANGER_API_KEY) for c in other] == [200, 200]
            time.sleep(0.3)  # 6 open: 4 of the greedy household's, 2 of the other's
            assert _get(connect(), STRANGER_API_KEY) == 200
            try:  # its oldest idle connection made room: answered 503, or closed under us
                evicted = _get(greedy[0], GROCER_API_KEY)
            except (ConnectionError, http.client.HTTPException):
                evicted = 503
            assert evicted == 503
        finally:
            for conn in opened:
                conn.close()
