"""The HTTP observer's half in a worker process: what it records (`Watched`, the settings it is
given in the environment) and the record itself, one line per effectful request, written before
the request goes out, with the run and the activity that sent it (`Sender`, set by the crash
interceptor per attempt). See `_observers.http` for the crash test's half and what is written."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from temporalio import activity

from temporal_crashtest._worker.effects import follow_into_threads
from temporal_crashtest._worker.http import install as watch_requests
from temporal_crashtest._worker.http.sending import effectful, listen
from temporal_crashtest._worker.http.urls import target_of

ENV = "CRASHTEST_HTTP"  # the recorder's settings, as JSON, in each worker process's environment


LOG_NAME = "http-requests.jsonl"


DEFAULT_KEY_HEADER = "Idempotency-Key"


# Model providers' API hosts: a request to one is a paid call.
DEFAULT_PAID = (
    "api.openai.com",
    "api.anthropic.com",
    "generativelanguage.googleapis.com",
    "api.mistral.ai",
    "api.groq.com",
    "api.cohere.com",
    "api.deepseek.com",
    "openrouter.ai",
)


@dataclass(frozen=True, kw_only=True)
class Watched:
    """What the recorder records: the requests that are effects, the header of their key, the
    paid ones (`HttpObserver`, the settings a user gives, is one; this is all a worker needs).

    Args:
        hosts: the hosts whose requests are effects (`HOST` or `HOST:PORT`); empty: every host.
        key_header: the header that carries a request's idempotency key.
        paid: `HOST[:PORT][/PATH]` prefixes whose requests are paid calls (model providers').
        methods: the methods that are effects; empty: every method but GET, HEAD and OPTIONS.
    """

    hosts: tuple[str, ...] = ()
    key_header: str = DEFAULT_KEY_HEADER
    paid: tuple[str, ...] = DEFAULT_PAID
    methods: tuple[str, ...] = ()

    def effectful(self, method: str, netloc: str) -> bool:
        if self.methods:
            if method.upper() not in {m.upper() for m in self.methods}:
                return False
        elif not effectful(method):
            return False
        return not self.hosts or _host_matches(netloc, self.hosts)

    def is_paid(self, netloc: str, path: str) -> bool:
        target = f"{netloc}{path}"
        host = netloc.split(":")[0]
        return any(
            target.startswith(spec) or (("/" not in spec) and spec in (host, netloc))
            for spec in self.paid
        )


def _host_matches(netloc: str, hosts: Iterable[str]) -> bool:
    host = netloc.split(":")[0]
    return any(h in (netloc, host) for h in hosts)


@dataclass(frozen=True)
class _Settings:
    """The recorder's settings in a worker process: the observer and its file."""

    observer: Watched
    log: Path

    def to_env(self) -> dict[str, str]:
        return {ENV: json.dumps({"observer": asdict(self.observer), "log": str(self.log)})}

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> _Settings | None:
        raw = environ.get(ENV)
        if not raw:
            return None
        data = json.loads(raw)
        given = data["observer"]
        observer = Watched(
            hosts=tuple(given["hosts"]),
            key_header=given["key_header"],
            paid=tuple(given["paid"]),
            methods=tuple(given["methods"]),
        )
        return cls(observer, Path(data["log"]))


@dataclass(frozen=True)
class Sender:
    """The run and boundary a request is sent for (set by the crash interceptor per attempt)."""

    root: str
    boundary: str
    attempt: int


SENDER: contextvars.ContextVar[Sender | None] = contextvars.ContextVar("crashtest_http_sender")


UNFOLLOWED = "(sent from a thread crashtest could not follow)"  # a record's boundary, then


def set_sender(sender: Sender) -> None:
    """The activity attempt running in this context sends what follows (the interceptor's
    call); the process remembers each run it served (`_ROOTS`)."""
    SENDER.set(sender)
    _ROOTS.add(sender.root)


# The runs this worker process served activities for. A crash test gives each cell's tree a task
# queue, so a worker process serves one tree: a request from a thread that carries no sender (a
# library's own thread, started before any activity) is that tree's, if the process served one.
_ROOTS: set[str] = set()


def _sender() -> Sender | None:
    found = SENDER.get(None)
    if found is not None:
        return found
    with contextlib.suppress(RuntimeError):  # not in an activity
        info = activity.info()
        if info.workflow_id:
            return Sender(
                info.workflow_id, f"{info.activity_type} {info.activity_id}", info.attempt
            )
    if len(_ROOTS) == 1:
        return Sender(next(iter(_ROOTS)), UNFOLLOWED, 0)
    return None


def digest(data: object) -> str | None:
    """A digest of a header's value or a body (a stream's: of its presence only)."""
    if data is None:
        return None
    if isinstance(data, str):
        raw = data.encode(errors="surrogatepass")
    elif isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
    else:  # a file, a generator, an iterable of chunks: not read here
        raw = b"<stream>"
    return hashlib.sha256(raw).hexdigest()[:12]


@dataclass
class _Recorder:
    settings: _Settings
    _fd: int | None = field(default=None, init=False)

    def record(
        self,
        library: str,
        method: str,
        url: str,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None,
        body: bytes | str | None,
    ) -> None:
        """Record the request if it is an effect the observer watches."""
        parts = urlsplit(url)
        netloc = parts.hostname or ""
        with contextlib.suppress(ValueError):  # a port out of range: no port
            if parts.port is not None:
                netloc += f":{parts.port}"
        observer = self.settings.observer
        if not observer.effectful(method, netloc):
            return
        sender = _sender()
        path = parts.path or "/"
        row = {
            "root": sender.root if sender else None,
            "boundary": sender.boundary if sender else None,
            "attempt": sender.attempt if sender else None,
            "library": library,
            "method": method.upper(),
            "target": target_of(url),
            "key": digest(_header(headers, observer.key_header)),
            "body": digest(body),
            "paid": observer.is_paid(netloc, path),
            "pid": os.getpid(),
        }
        if self._fd is None:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
            self._fd = os.open(self.settings.log, flags, 0o600)
        # One write of one line to an O_APPEND file: in the kernel once it returns, so a SIGKILL
        # right after the send cannot lose it (only the machine's crash could: no fsync, which
        # cost ~2 ms a request).
        os.write(self._fd, (json.dumps(row) + "\n").encode())


def _header(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None, name: str) -> str | None:
    if headers is None:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    wanted = name.lower()
    for key, value in items:
        key_text = key.decode() if isinstance(key, bytes) else str(key)
        if key_text.lower() == wanted:
            return value.decode() if isinstance(value, bytes) else str(value)
    return None


def install_from_env(environ: Mapping[str, str] = os.environ) -> bool:
    """In a worker process: record for the settings in the environment, if any. True if so."""
    settings = _Settings.from_env(environ)
    if settings is None:
        return False
    watch_requests()  # in a crash test's worker already; here for a process of one's own
    follow_into_threads()
    listen(_Recorder(settings).record)
    return True


def attempt_started(root: str, boundary: str, attempt: int) -> None:
    """In a worker process: the activity attempt that runs in this context sends what follows."""
    set_sender(Sender(root, boundary, attempt))
