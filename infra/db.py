"""Connections to the app database and the idempotent schema."""

from __future__ import annotations

from importlib import resources

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from infra.config import PLACEHOLDER, env_str
from infra.embedded_postgres import ensure_postgres
from infra.errors import ConfigError, DatabaseUnavailable, first_line
from infra.redaction import redact as hide_secrets

CONNECT_TIMEOUT_S = 5
# Any constant will do: it serialises concurrent schema creation across processes.
_SCHEMA_LOCK_ID = 0x67726F63  # "groc"


def ensure_database_url() -> str:
    """DATABASE_URL if set, else the embedded Postgres under .data/ (started on demand). A
    password still .env.example's placeholder is refused."""
    url = env_str("DATABASE_URL")
    if url is None:
        return ensure_postgres()
    try:
        password = conninfo_to_dict(url).get("password") or ""
    except psycopg.ProgrammingError:
        raise ConfigError(f"DATABASE_URL={redact(url)!r} is not a Postgres URL") from None
    if str(password).startswith(PLACEHOLDER):
        raise ConfigError("DATABASE_URL's password is .env.example's placeholder: set your own")
    return url


def redact(url: str) -> str:
    """The URL without its password, for error messages."""
    return hide_secrets(url)


def _unavailable(url: str, err: Exception) -> DatabaseUnavailable:
    return DatabaseUnavailable(f"cannot connect to Postgres at {redact(url)}: {first_line(err)}")


async def connect_postgres(url: str) -> psycopg.AsyncConnection:
    """One autocommit connection: each statement commits on its own unless inside a transaction."""
    try:
        return await psycopg.AsyncConnection.connect(
            url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
        )
    except psycopg.OperationalError as err:
        raise _unavailable(url, err) from None


async def open_pool(url: str, *, max_size: int = 10, wait_s: float = 30.0) -> AsyncConnectionPool:
    """A pool whose connections are checked before use, so a restarted Postgres is reconnected to
    rather than failing the next activity; its first connection, and any asked for later, are
    waited for up to `wait_s` (a Postgres just started, or a loaded machine; then one line)."""
    pool = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        timeout=wait_s,
        kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
        check=AsyncConnectionPool.check_connection,
        open=False,
    )
    try:
        await pool.open(wait=True, timeout=wait_s)
    except Exception as err:  # PoolTimeout hides the cause; say what was tried
        await pool.close()
        raise _unavailable(url, err) from None
    return pool


def schema_sql() -> str:
    return resources.files("infra").joinpath("schema.sql").read_text()


async def ensure_schema(conn: psycopg.AsyncConnection) -> None:
    """Create the tables if missing. Safe to call from many processes at once."""
    async with conn.transaction():
        await conn.execute("select pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_ID,))
        await conn.execute(schema_sql())
