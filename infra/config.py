"""Configuration from the environment. A bad value fails at start with one clear line."""

from __future__ import annotations

import math
import os
from enum import StrEnum
from pathlib import Path
from typing import TypeVar
from urllib.parse import SplitResult, urlsplit

from infra.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parent.parent

Choice = TypeVar("Choice", bound=StrEnum)


def data_dir() -> Path:
    """Where the embedded Postgres and the Temporal dev server keep their files (`.data/`)."""
    path = Path(os.environ.get("DATA_DIR") or PROJECT_ROOT / ".data").resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


PLACEHOLDER = "change-me"  # how .env.example's secrets begin: refused wherever one is read
MAX_KEY_TTL_S = 366 * 86400.0  # a year: longer is a typo, not a policy
MAX_STUB_LATENCY_MS = 600_000.0  # ten minutes: past the steps' start-to-close timeout
MAX_STEP_PAUSE_MS = 60_000.0  # a minute: the chaos lab pauses for milliseconds


def env_str(name: str) -> str | None:
    """An environment variable, with blank treated as unset."""
    value = os.environ.get(name, "").strip()
    return value or None


def env_number(
    name: str,
    default: float,
    *,
    minimum: float = 0,
    maximum: float = math.inf,
    positive: bool = False,
) -> float:
    """A finite number in [minimum, maximum] (more than 0 if `positive`), or `default`."""
    raw = env_str(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None
    if not math.isfinite(value):
        raise ConfigError(f"{name}={raw!r} is not a finite number")
    if positive and value <= 0:
        raise ConfigError(f"{name}={raw!r} must be more than 0")
    if not minimum <= value <= maximum:
        top = "" if maximum == math.inf else f" and at most {maximum:.10g}"
        raise ConfigError(f"{name}={raw!r} must be at least {minimum:.10g}{top}")
    return value


def env_port(name: str) -> int | None:
    raw = env_str(name)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or not 0 < int(raw) < 65536:
        raise ConfigError(f"{name}={raw!r} is not a TCP port (1-65535)")
    return int(raw)


DEFAULT_TASK_QUEUE = "grocery-agent"


def task_queue() -> str:
    """TASK_QUEUE (default `grocery-agent`): the crash lab gives each cell a queue of its own."""
    return env_str("TASK_QUEUE") or DEFAULT_TASK_QUEUE


def grocer_key_ttl_s() -> float:
    """GROCER_KEY_TTL_S (default 86400, a day): how long the grocer remembers an idempotency key,
    and how long the order step trusts a key to still be remembered."""
    return env_number("GROCER_KEY_TTL_S", 86400.0, positive=True, maximum=MAX_KEY_TTL_S)


def model_latency_seconds() -> float:
    """STUB_MODEL_LATENCY_MS: how long the stub model 'thinks' (default 0), so a person can kill
    a run in the middle of a model call."""
    return env_number("STUB_MODEL_LATENCY_MS", 0.0, maximum=MAX_STUB_LATENCY_MS) / 1000.0


def step_pause_seconds() -> tuple[float, float] | None:
    """STEP_PAUSE_MS, `LOW-HIGH` or `N` milliseconds: both engines sleep a random time in that
    range before each step's work and again after its effect, before it is recorded (unset: no
    pause). It widens the windows that the chaos lab's random kills land in."""
    raw = env_str("STEP_PAUSE_MS")
    if raw is None:
        return None
    low, _, high = raw.partition("-")
    try:
        bounds = (float(low), float(high or low))
    except ValueError:
        raise ConfigError(f"STEP_PAUSE_MS={raw!r} is not N or LOW-HIGH milliseconds") from None
    if not all(math.isfinite(b) for b in bounds):
        raise ConfigError(f"STEP_PAUSE_MS={raw!r}: the bounds must be finite")
    if not 0 <= bounds[0] <= bounds[1] <= MAX_STEP_PAUSE_MS:
        raise ConfigError(f"STEP_PAUSE_MS={raw!r}: need 0 <= LOW <= HIGH <= {MAX_STEP_PAUSE_MS:g}")
    return bounds[0] / 1000, bounds[1] / 1000


def http_url(
    name: str, url: str, shown: str | None = None, *, credentials: bool = True
) -> SplitResult:
    """The parts of an http(s) URL with a host and, if any, a port 1-65535 in ASCII digits;
    else ConfigError naming `name` (with the URL as `shown`, e.g. without its password).
    `credentials=False`: a `user:password@` in it is refused too."""
    shown = shown or repr(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ConfigError(f"{name}={shown} is not an http(s) URL with a valid port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{name}={shown} is not an http(s) URL with a host")
    if port == 0:  # urlsplit refuses the rest: past 65535, not ASCII digits
        raise ConfigError(f"{name}={shown} is not an http(s) URL with a valid port")
    if not credentials and (parts.username is not None or parts.password is not None):
        raise ConfigError(f"{name} carries credentials (user:password@): leave them out")
    return parts


def parse_choice(options: type[Choice], text: str, what: str) -> Choice:
    """One of an enum's values, or a ConfigError that lists them all."""
    try:
        return options(text)
    except ValueError:
        valid = ", ".join(o.value for o in options)
        raise ConfigError(f"unknown {what} {text!r}; valid: {valid}") from None
