"""The HTTP requests an activity sends, as its worker process sees them: each effectful one (any
method but GET, HEAD and OPTIONS), once answered, is an effect of the activity (`_effects.effect
("POST api.stripe.com/v1/charges")`): a crash point inside it (`effect:N.K`), whatever observes
the runs. A kill there is the window in which "send it, then mark it done" sends it again.

Seen through each library's own calls, patched in the worker process (`install`; a library not
yet imported is patched as it is imported), one module per library, the layers the others stand
on:

- `with_httpx`: httpx (and httpx2, the fork openai's client uses), sync and async, `send`;
- `with_aiohttp`: aiohttp's `ClientSession._request`;
- `with_urllib3`: urllib3's connections, `request` (requests and botocore, so boto3's S3, SQS and
  SES calls, stand on it; the answer is `http.client`'s);
- `with_http_client`: the standard library's `http.client` connections, `request` then
  `getresponse` (urllib.request, httplib2 and urllib3 stand on it).

A request that none of them sent, yet shows on a Python socket as an HTTP/1 request line (a
library not listed, a socket of the activity's own), is *unseen* (`unseen`): no point follows
it, and the crash test lists it as not tested (`_effects.unseen`). A library that writes to its
sockets from native code (pycurl, grpc) is not seen at all.

Listeners (the HTTP observer's recorder, `listen`) are told of every request as it is about to go
out, effectful or not, before anything is sent. To add a library: a module with `install(module)`
that wraps its send in `sending.sending(...)` and says `answered()` once the answer came, and its
row in `KINDS`.
"""

from __future__ import annotations

import http.client
import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

from temporal_crashtest._worker.http import unseen

# The library each module watches, by the name it is imported as.
KINDS = {
    "http.client": "temporal_crashtest._worker.http.with_http_client",
    "urllib3.connection": "temporal_crashtest._worker.http.with_urllib3",
    "httpx": "temporal_crashtest._worker.http.with_httpx",
    "httpx2": "temporal_crashtest._worker.http.with_httpx",
    "aiohttp": "temporal_crashtest._worker.http.with_aiohttp",
}

_installed: set[str] = set()


def install() -> None:
    """Watch every library of `KINDS`: those imported now at once, the others as they are
    imported; and what goes out on Python's sockets (`unseen`). Once per process."""
    _patch("http.client", http.client)  # always: where urllib3's answers are read too
    for name in KINDS:
        if name in sys.modules:
            _patch(name, sys.modules[name])
    if not any(isinstance(f, _OnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _OnImport())
    unseen.install()


def _patch(name: str, module: ModuleType) -> None:
    if name in _installed:
        return
    _installed.add(name)
    try:
        importlib.import_module(KINDS[name]).install(module)
    except Exception as err:  # a library's version whose calls are not those patched
        print(
            f"crashtest: {name}'s requests are not crash points in this worker "
            f"({type(err).__name__}: {err}); mark them with temporal_crashtest.effect",
            file=sys.stderr,
            flush=True,
        )


class _OnImport(importlib.abc.MetaPathFinder):
    """Patches a library of `KINDS` once it is imported: its loader, found by the finders after
    this one, runs the module, then the patch."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in KINDS or fullname in _installed:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _patch(fullname, module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
