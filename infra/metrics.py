"""Our counters beside the Temporal SDK's, on the worker's METRICS_PORT endpoint.

Every effect outcome is one log record on the `agent.effects` logger, with `event` and `effect`
fields (`agent.effects.log_effect`). `EffectCounters` is a logging handler that counts those
records into the SDK's metric meter, so the log line an operator greps for and the counter on the
dashboard are the same fact:

    grocery_effects_created{effect="orders"}        an effect written for the first time
    grocery_duplicates_refused{effect="orders"}     a retried effect that found its first one
"""

from __future__ import annotations

import ipaddress
import logging
from enum import StrEnum
from typing import TYPE_CHECKING

from infra.config import env_str
from infra.errors import ConfigError

if TYPE_CHECKING:  # the agent logs its effects without importing the Temporal SDK
    from temporalio.common import MetricMeter

EFFECTS_LOGGER = "agent.effects"


def metrics_host() -> str:
    """The address METRICS_PORT listens on: METRICS_HOST, default 127.0.0.1 (in a container,
    0.0.0.0, so that a scraper in another container reaches it)."""
    host = env_str("METRICS_HOST") or "127.0.0.1"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ConfigError(f"METRICS_HOST={host!r} is not an IP address") from None
    return host


def metrics_address(port: int) -> str:
    """HOST:PORT for the SDK's Prometheus exporter; an IPv6 host in brackets ([::1]:9464)."""
    host = metrics_host()
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class EffectEvent(StrEnum):
    CREATED = "effect_created"
    DUPLICATE_REFUSED = "duplicate_refused"


class EffectCounters(logging.Handler):
    def __init__(self, meter: MetricMeter) -> None:
        super().__init__()
        self.counters = {
            EffectEvent.CREATED: meter.create_counter(
                "grocery_effects_created", "side effects written for the first time, by effect"
            ),
            EffectEvent.DUPLICATE_REFUSED: meter.create_counter(
                "grocery_duplicates_refused",
                "retried side effects that found their first one instead, by effect",
            ),
        }

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        effect = getattr(record, "effect", None)
        if event in self.counters and isinstance(effect, str):
            self.counters[EffectEvent(event)].add(1, {"effect": effect})


def count_effects(meter: MetricMeter) -> None:
    """Count every effect outcome logged in this process into `meter`."""
    logger = logging.getLogger(EFFECTS_LOGGER)
    logger.addHandler(EffectCounters(meter))
    logger.setLevel(logging.INFO)  # counted even if the console shows only warnings
