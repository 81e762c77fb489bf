"""The HTTP observer: effects seen in the requests the workers send, with no observer to write.

Most agent tools take their effects through HTTP (payments, mail, chat, tickets), and every model
call is an HTTP request that costs money. Given an `HttpObserver` among `CrashTestOptions.observers`
(`--http` on the command line), every worker process of the crash test records each effectful
request it sends — through every library `_worker.http` watches (httpx, aiohttp, urllib3 and
requests, http.client and urllib.request); not GET, HEAD or OPTIONS — in one file, *before* the
request goes out, so a worker killed the moment after sending has it recorded: its method, host and
path (ids and tokens masked, `_worker.http.urls`), a digest of its `Idempotency-Key` header (or the
one configured), a digest of its body, the root workflow of the run it was sent for and the boundary
(activity) that sent it. No header value, query value or body is written.

The observed state of a run is what the receivers saw, counted: per `METHOD host/path`, each
request without a key once, and each key once however often it was sent (the receiver refuses a
repeat); requests to a paid host (a model provider) are paid calls, every one counted. A run
killed after a request and before its activity's completion was recorded sends it again: keyed
with the same key, the state is the reference's; without one, a count is one higher, the
duplicate the crash test reports.

Each effectful request, once answered, is also an effect of the activity that sent it: a crash
point inside the activity (`effect:N.K`), where a model call is paid again and an unkeyed
request sent again — with or without this observer (`_worker.http`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporal_crashtest._errors import InputError
from temporal_crashtest._observers import Kind
from temporal_crashtest._option import Option, Part, Reads
from temporal_crashtest._worker.http_record import (
    DEFAULT_KEY_HEADER,
    DEFAULT_PAID,
    LOG_NAME,
    Watched,
    _Settings,
)


@dataclass(frozen=True, kw_only=True)
class HttpObserver(Watched):
    """What the HTTP observer records (among `CrashTestOptions.observers`; `--http`): its
    settings.

    Args:
        hosts: the hosts whose requests are effects (`HOST` or `HOST:PORT`); empty: every host.
        key_header: the header that carries a request's idempotency key.
        paid: `HOST[:PORT][/PATH]` prefixes whose requests are paid calls (model providers').
        methods: the methods that are effects; empty: every method but GET, HEAD and OPTIONS.
    """

    def check(self) -> None:
        for spec in (*self.hosts, *self.paid):
            if not spec or any(c.isspace() for c in spec) or "://" in spec:
                raise InputError(
                    f"an HTTP host is HOST, HOST:PORT (or, for --http-paid, HOST[:PORT]/PATH), "
                    f"not {spec!r}"
                )
        if not re.fullmatch(r"[A-Za-z0-9-]+", self.key_header):
            raise InputError(
                f"an HTTP header name is letters, digits and '-', not {self.key_header!r}"
            )

    def observer(self, log_dir: Path, deadline_s: float) -> HttpRequests:
        return HttpRequests(self, log_dir)


def start_record(observer: Watched | None, log_dir: Path) -> dict[str, str]:
    """A fresh record in `log_dir` (what an earlier crash test left there removed, a link
    itself rather than what it points to), and the environment that makes a worker process
    write it for `observer` (none: {}, and nothing removed)."""
    if observer is None:
        return {}
    (log_dir / LOG_NAME).unlink(missing_ok=True)
    return _Settings(observer, log_dir / LOG_NAME).to_env()


# --- In the worker process: where a request is sent from, and the record ------------------------


# --- In the crash test: the observed state ------------------------------------------------------


def requests_of(log: Path, root: str | None) -> list[dict[str, Any]]:
    """The records of the requests sent for the run rooted at `root` (None: for no known run),
    in the order sent."""
    if not log.exists():
        return []
    rows = []
    for line in log.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:  # cut by a kill mid-write: it was never sent
            continue
        if isinstance(row, dict) and row.get("root") == root:
            rows.append(row)
    return rows


def unattributed(log: Path) -> str | None:
    """What to say of the effectful requests no run could be named for (sent from a thread
    that carried no activity's context, in a process that served several runs or none): they
    are in no cell's state. None if there were none."""
    found: Counter[str] = Counter()
    for row in requests_of(log, None):
        found[f"{row.get('method')} {row.get('target')}"] += 1
    if not found:
        return None
    shown = ", ".join(f"{n} x {what}" for what, n in found.most_common(5))
    return (
        f"{found.total()} effectful request(s) sent where crashtest could not tell which run "
        f"sent them ({shown}{', …' if len(found) > 5 else ''}): from a thread that carries no "
        "activity's context, in a worker process serving several runs; they count in no cell's "
        "state, so a repeat of them is not seen. Send them from the activity (or a thread or "
        "executor it starts), or observe their receiver with --observe"
    )


def observed(log: Path, root: str) -> dict[str, Any]:
    """The run's HTTP effects as the receivers saw them (see the module's docstring)."""
    effects: Counter[str] = Counter()
    paid: Counter[str] = Counter()
    keys: set[tuple[str, str]] = set()
    for row in requests_of(log, root):
        name = f"{row['method']} {row['target']}"
        if row["paid"]:
            paid[name] += 1
            continue
        if row["key"] is not None:
            if (name, row["key"]) in keys:
                continue
            keys.add((name, row["key"]))
        effects[name] += 1
    return {"requests": dict(sorted(effects.items())), "paid calls": dict(sorted(paid.items()))}


@dataclass(frozen=True)
class HttpRequests:
    """The HTTP observer in the crash test: the effectful requests each run's workers sent, as
    their receivers saw them (`observed`)."""

    observer: HttpObserver
    log_dir: Path
    name: str = "http"
    half: str | None = "temporal_crashtest._worker.http_record"  # its half in the worker

    def worker_env(self) -> dict[str, str]:
        """A fresh record, and the settings that make each worker process write it."""
        return start_record(self.observer, self.log_dir)

    async def view(self, workflow_id: str) -> dict[str, Any]:
        return observed(self.log_dir / LOG_NAME, workflow_id)

    def untested(self) -> list[tuple[str, str]]:
        lost = unattributed(self.log_dir / LOG_NAME)
        return [("HTTP requests", lost)] if lost else []


def _settings(values: Mapping[str, Any]) -> HttpObserver | None:
    if values["http"] is None:
        if values["http_paid"] is not None or values["http_key_header"] != DEFAULT_KEY_HEADER:
            raise InputError("--http-paid and --http-key-header go with --http")
        return None
    paid = DEFAULT_PAID if values["http_paid"] is None else tuple(values["http_paid"])
    hosts = tuple(values["http"])
    return HttpObserver(hosts=hosts, key_header=values["http_key_header"], paid=paid)


KIND = Kind(
    (
        Option(
            "http",
            "the HTTP observer: record the effectful requests (not GET, HEAD, OPTIONS) the "
            "workers send (httpx, aiohttp, requests, urllib3, urllib.request, http.client) to "
            "these hosts (none named: every host), before each is sent; a repeat with the same "
            "idempotency key counts once",
            Part.OBSERVER,
            reads=Reads.ALL_OR_LIST,
            metavar="HOST[,HOST...]",
        ),
        Option(
            "http_key_header",
            "the header that carries a request's idempotency key",
            Part.OBSERVER,
            default=DEFAULT_KEY_HEADER,
            metavar="NAME",
        ),
        Option(
            "http_paid",
            "where requests are paid calls, every one counted (default: the model providers' "
            "API hosts, api.openai.com, api.anthropic.com, ...)",
            Part.OBSERVER,
            reads=Reads.LIST,
            metavar="HOST[:PORT][/PATH][,...]",
        ),
    ),
    _settings,
)
