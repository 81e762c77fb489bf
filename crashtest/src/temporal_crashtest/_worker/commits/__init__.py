"""Committed database transactions, each an effect of the activity that committed it.

An activity that writes to a database and then does anything else — marks its work done, calls
a service, returns — has a window after the commit in which a killed worker leaves the write
made and the rest unrun; the retried attempt writes again unless the write is keyed. In a crash
test's worker process, every transaction that wrote a row, once committed, is an effect
(`_effects.effect("COMMIT orders")`): a crash point inside the activity (`effect:N.K`).

Seen through each library's own calls, patched in the worker process before the user's code is
imported (`install`), one module per library:

- `with_psycopg`: psycopg 3, sync and async, plain connections and pools (a pool's connection is
  a psycopg connection): a write in autocommit mode, `commit()`, a `with conn.transaction()`
  block's end, `with conn:`'s end, a `COPY ... FROM` block, pipeline mode (each write taken to
  have written: its row count comes later);
- `with_asyncpg`: asyncpg, connections and pools, `execute`/`fetch*`/prepared statements, a
  statement outside a transaction or a transaction's commit;
- `with_sqlite3`: sqlite3 (and what is built on it, as aiosqlite), a connection's `commit`,
  `with conn:`'s end, or a write in autocommit mode.

SQLAlchemy sessions and engines are seen through the driver under them (psycopg, asyncpg,
sqlite3). What a write is: a statement that changed a row (psycopg's and asyncpg's command tag
`INSERT`/`UPDATE`/`DELETE`/`MERGE`/`COPY` with a row count above 0, sqlite3's `total_changes`;
asyncpg's `fetch*` by their SQL, which has no tag). A transaction that only read is no effect; a
rolled-back one is none. Not seen: a driver not listed (mark its commits with
`temporal_crashtest.effect`). Nothing here changes what the user's code sees: the watch reads
only what the library has already done.

Which connection has uncommitted writes is kept here (`wrote`, `settled`, `rolled_back`), by
connection, for as long as the connection lives. To add a library: a module
`with_<library>.py` here with `install() -> None` that calls these three after the library's own
calls, and the library's name in `LIBRARIES`.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import weakref
from typing import Any

from temporal_crashtest._worker.effects import effect

# The libraries watched, by the name each is imported as; `with_<library>` here watches it.
LIBRARIES = ("psycopg", "asyncpg", "sqlite3")
KINDS = {library: f"{__name__}.with_{library}" for library in LIBRARIES}
WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "MERGE", "COPY", "REPLACE"})
# The table a write names: `insert into T`, `update T`, `delete from T`, `merge into T`, `copy T`
# (not `for update ...`, not `do update set`).
_TABLE = re.compile(
    r"""\b(?:insert\s+(?:or\s+\w+\s+)?into|replace\s+into|(?<!for\s)update(?!\s+set\b)|delete\s+from
    |merge\s+into|copy)\s+((?:"[^"]*"|`[^`]*`|\[[^\]]*\]|[\w$]+)(?:\s*\.\s*(?:"[^"]*"|[\w$]+))?)""",
    re.IGNORECASE | re.VERBOSE,
)
_LEADING = re.compile(r"^(?:\s+|--[^\n]*\n?|/\*.*?\*/)*(\w+)", re.DOTALL)

_installed: set[str] = set()
_pending: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()


def install() -> None:
    """Watch the commits of every library of `KINDS` this process can import (once). A version
    whose calls are not the ones patched is said in one line, and its commits are not seen."""
    for library, module in KINDS.items():
        if library in _installed or importlib.util.find_spec(library) is None:
            continue
        _installed.add(library)
        try:
            importlib.import_module(module).install()
        except Exception as err:  # a driver's version whose calls are not those patched
            print(
                f"crashtest: {library}'s commits are not crash points in this worker "
                f"({type(err).__name__}: {err}); mark them with temporal_crashtest.effect",
                file=sys.stderr,
                flush=True,
            )


def table_of(query: str) -> str:
    """The table a write names, without its schema or quotes ("a table" if none is found)."""
    found = _TABLE.search(query)
    if found is None:
        return "a table"
    return found.group(1).split(".")[-1].strip().strip('"`[]') or "a table"


def command_of(query: str) -> str:
    """A statement's first keyword, upper case ("" if it has none); `WITH ... INSERT` is a write,
    named by the first write it holds."""
    found = _LEADING.match(query)
    command = found.group(1).upper() if found else ""
    if command == "WITH":
        writes = re.findall(r"\b(insert|update|delete|merge)\b", query, re.IGNORECASE)
        return writes[0].upper() if writes else command
    return command


_COPY_OUT = re.compile(r"\bto\s+(?:stdout\b|program\b|')", re.IGNORECASE)


def copies_out(query: str) -> bool:
    """Whether a statement is a `COPY ... TO` (it reads: its rows go out, none is written)."""
    return command_of(query) == "COPY" and _COPY_OUT.search(query) is not None


def tag_of(status: str | None) -> tuple[str, int]:
    """A command tag (`INSERT 0 1`, `UPDATE 3`, `COMMIT`) as its command and row count."""
    words = (status or "").split()
    if not words:
        return "", 0
    rows = int(words[-1]) if len(words) > 1 and words[-1].isdigit() else 0
    return words[0].upper(), rows


def wrote(conn: Any, query: str) -> None:
    """`conn` changed rows of the table `query` names, in a transaction not yet said committed."""
    _pending.setdefault(conn, []).append(table_of(query))


def settled(conn: Any, in_transaction: bool) -> None:
    """After a call on `conn`: outside a transaction, the writes made since the last commit are
    committed — one effect of the running activity, named by their tables."""
    if in_transaction:
        return
    tables = _pending.pop(conn, None)
    if tables:
        effect("COMMIT " + ", ".join(dict.fromkeys(tables)))


def rolled_back(conn: Any) -> None:
    """`conn`'s transaction ended without committing: its writes are no effect."""
    _pending.pop(conn, None)
