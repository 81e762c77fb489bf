"""Watching the services a long-running process depends on: one log line when it loses one,
one when it has it back, nothing in between."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping

from infra.errors import first_line

PROBE_EVERY_S = 0.5
PROBE_TIMEOUT_S = 2.0

Probe = Callable[[], Awaitable[object]]


async def watch(probes: Mapping[str, Probe], log: logging.Logger) -> None:
    """Probe each service every PROBE_EVERY_S, forever; log when one stops or starts answering."""
    lost_at: dict[str, float] = {}
    while True:
        for name, probe in probes.items():
            try:
                await asyncio.wait_for(probe(), PROBE_TIMEOUT_S)
            except Exception as err:  # any failure to answer is the news
                if name not in lost_at:
                    lost_at[name] = time.monotonic()
                    log.warning("lost %s: %s", name, first_line(err))
                continue
            if name in lost_at:
                down = time.monotonic() - lost_at.pop(name)
                log.warning("%s is back after %.1f s", name, down)
        await asyncio.sleep(PROBE_EVERY_S)
