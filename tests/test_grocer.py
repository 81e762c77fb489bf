"""The grocer, a real HTTP service on 127.0.0.1, through the agent's own client: its keys live
their TTL and no longer, its faults look like a real store's."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from agent.data import OrderLine
from agent.grocer import GrocerClient, GrocerRefused, GrocerUnavailable
from tests.conftest import GROCER_TTL_S as TTL_S
from tests.helpers import assert_one_line_error, child_env, run_python

MILK = [OrderLine(item="milk", quantity=2)]
EGGS = [OrderLine(item="eggs", quantity=1)]


def ref() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


async def test_a_key_repeats_its_order_within_the_ttl_and_not_after(grocer_url: str) -> None:
    grocer = GrocerClient(grocer_url)
    try:
        reference, key = ref(), uuid.uuid4().hex
        first = await grocer.place(reference, MILK, key)
        again = await grocer.place(reference, MILK, key)
        assert again.id == first.id  # the same order, not a second one
        with pytest.raises(GrocerRefused, match=r"\(409\).*was used for another request"):
            await grocer.place(reference, EGGS, key)  # the same key for another order
        await asyncio.sleep(TTL_S + 0.2)
        later = await grocer.place(reference, MILK, key)  # the key is forgotten
        assert later.id != first.id
        assert [o.id for o in await grocer.find(reference)] == [first.id, later.id]
        unkeyed = [await grocer.place(reference, MILK, None) for _ in range(2)]
        assert unkeyed[0].id != unkeyed[1].id  # no key, no memory
    finally:
        await grocer.close()


async def test_faults_look_like_a_real_store(grocer_url: str) -> None:
    grocer = GrocerClient(grocer_url)
    try:
        async with grocer._http().post(f"{grocer_url}/_faults", json={
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
    finally:
        await grocer.close()


def test_a_busy_port_is_one_line(grocer_url: str, db_url: str) -> None:
    port = grocer_url.rsplit(":", 1)[1]
    done = run_python(["-m", "grocer", "--port", port], child_env(db_url), timeout=30)
    assert_one_line_error(done, f"the grocer cannot listen on 127.0.0.1:{port}")
    bad_ttl = run_python(["-m", "grocer"], child_env(db_url, GROCER_KEY_TTL_S="forever"))
    assert_one_line_error(bad_ttl, "GROCER_KEY_TTL_S='forever' is not a number")
