"""`python -m grocer [--host 127.0.0.1] [--port 8300] [--test-mode]`: run the grocer.

GROCER_API_KEY (one account) or GROCER_API_KEYS=ACCOUNT=KEY,... (required): the secret keys a
request must carry. GROCER_KEY_TTL_S (default 86400): how long an idempotency key is remembered.
GROCER_HEADER_TIMEOUT_S, GROCER_BODY_TIMEOUT_S, GROCER_MAX_CONNECTIONS: the bounds on slow and
many clients (grocer.listener).
DATABASE_URL (unset: the embedded Postgres) holds its tables, in the schema `grocer`.
`--test-mode` takes faults to show (`POST /_faults`); never in production. SIGTERM or Ctrl-C
stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal

from aiohttp import web

from grocer.accounts import Accounts
from grocer.app import make_app
from grocer.faults import Faults
from grocer.listener import HttpLimits, listen
from grocer.store import Store
from infra.cli import ArgumentParser, run_main
from infra.config import grocer_key_ttl_s
from infra.db import ensure_database_url, open_pool
from infra.errors import ConfigError

log = logging.getLogger("grocer")
DEFAULT_PORT = 8300


def parse_args() -> argparse.Namespace:
    parser = ArgumentParser(prog="python -m grocer", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument(
        "--test-mode", action="store_true", help="take faults (POST /_faults); not in production"
    )
    args = parser.parse_args()
    if not 0 < args.port < 65536:
        parser.error("--port must be 1-65535")
    return args


# How long a request waits for a database connection before answering 503 (retryable): well
# inside the agent's request timeout, so a store without its database says so.
DB_WAIT_S = 5.0


async def main(args: argparse.Namespace) -> int:
    ttl = grocer_key_ttl_s()
    limits = HttpLimits.from_env()
    accounts = Accounts.from_env(os.environ)
    pool = await open_pool(ensure_database_url(), wait_s=DB_WAIT_S)
    try:
        store = Store(pool, ttl)
        await store.ensure_schema()
        app = make_app(store, accounts, Faults() if args.test_mode else None, limits)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            listener = await listen(runner, args.host, args.port, limits)
        except OSError as err:
            await runner.cleanup()
            raise ConfigError(
                f"the grocer cannot listen on {args.host}:{args.port}: {err.strerror}"
            ) from None
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        log.info(
            "grocer ready on http://%s:%d (idempotency keys live %g s%s)",
            args.host,
            args.port,
            ttl,
            "; test mode: takes faults" if args.test_mode else "",
        )
        await stop.wait()
        listener.close()
        await runner.cleanup()
    finally:
        await pool.close()
    return 0


if __name__ == "__main__":
    run_main(main(parse_args()))
