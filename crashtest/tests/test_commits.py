"""The database commits a worker sees as effects (`_worker.commits`), through sqlite3 (a real
database in a file): a committed write is one effect, named by its tables; a read, a rolled-back
write and a write not yet committed are none. (psycopg, asyncpg and SQLAlchemy are crash-tested end
to end on Postgres in the project's tests/test_crashtest_shapes.py::test_every_commit_kind.)"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporal_crashtest._worker import commits as commits
from temporal_crashtest._worker.commits import command_of, install, table_of, tag_of
from temporal_crashtest._worker.effects import attempting, done


class Said(list[str]):
    """An activity attempt of a crash test's worker: the effects said in its context."""

    def made(self, what: str) -> None:
        self.append(what)

    def unseen(self, what: str) -> None:
        raise AssertionError(f"unseen: {what}")


@pytest.fixture
def made() -> Iterator[list[str]]:
    """The effects said in this context, as an activity attempt of a crash test's worker."""
    install()
    said = Said()
    token = attempting(said)
    yield said
    done(token)


def test_a_committed_write_is_one_effect_named_by_its_tables(tmp_path: Path, made: list[str]):
    conn = sqlite3.connect(tmp_path / "shop.db")
    conn.executescript("create table orders (k text); create table marks (k text);")
    made.clear()  # (no row changed: no effect either way)
    conn.execute("select * from orders").fetchall()
    assert made == []  # a read
    conn.execute("insert into orders values ('a')")
    conn.execute("insert into marks values ('a')")
    assert made == []  # written, not committed
    conn.commit()
    assert made == ["COMMIT orders, marks"]
    conn.execute("insert into orders values ('b')")
    conn.rollback()
    conn.commit()
    assert made == ["COMMIT orders, marks"]  # rolled back: none
    with conn:
        conn.cursor().executemany("insert into orders values (?)", [("c",), ("d",)])
    assert made == ["COMMIT orders, marks", "COMMIT orders"]  # `with conn:` commits
    with pytest.raises(ValueError), conn:
        conn.execute("update orders set k = 'e'")
        raise ValueError
    assert made == ["COMMIT orders, marks", "COMMIT orders"]  # rolled back by the block
    conn.execute("delete from orders where k = 'nothing'")
    conn.commit()
    assert len(made) == 2  # no row changed


def test_autocommit_writes_and_scripts(tmp_path: Path, made: list[str]) -> None:
    conn = sqlite3.connect(tmp_path / "shop.db", isolation_level=None)
    conn.execute("create table orders (k text)")
    conn.execute("insert into orders values ('a')")
    assert made == ["COMMIT orders"]  # each statement commits on its own
    conn.executescript("begin; insert into orders values ('b'); update orders set k = 'c'; commit;")
    assert made == ["COMMIT orders", "COMMIT orders"]


def test_outside_an_activity_nothing_is_said(tmp_path: Path) -> None:
    install()
    conn = sqlite3.connect(tmp_path / "shop.db", isolation_level=None)
    conn.execute("create table orders (k text)")
    conn.execute("insert into orders values ('a')")  # no attempt in this context: a no-op


def test_a_factory_of_the_users_is_kept(tmp_path: Path, made: list[str]) -> None:
    class Mine(sqlite3.Connection):
        pass

    conn = sqlite3.connect(tmp_path / "shop.db", factory=Mine, isolation_level=None)
    assert isinstance(conn, Mine)
    conn.execute("create table t (k text)")
    conn.execute("insert into t values ('a')")
    assert made == ["COMMIT t"]


@pytest.mark.parametrize(
    ("query", "table"),
    [
        ("insert into orders (k) values (1)", "orders"),
        ('INSERT INTO public."Order Lines" VALUES (1)', "Order Lines"),
        ("update shop.orders set k = 1", "orders"),
        ("delete from marks where k = 1", "marks"),
        ("insert into t values (1) on conflict (k) do update set k = 2", "t"),
        ("with x as (select 1) insert into audit select * from x", "audit"),
        ("insert or ignore into orders values (?)", "orders"),
        ("select 1 for update", "a table"),
    ],
)
def test_the_table_a_write_names(query: str, table: str) -> None:
    assert table_of(query) == table


def test_commands_and_tags() -> None:
    assert command_of("  -- a comment\n/* more */ insert into t values (1)") == "INSERT"
    assert command_of("with x as (select 1) update t set k = 1") == "UPDATE"
    assert command_of("with x as (select 1) select * from x") == "WITH"
    assert tag_of("INSERT 0 1") == ("INSERT", 1)
    assert tag_of("UPDATE 0") == ("UPDATE", 0)
    assert tag_of("COMMIT") == ("COMMIT", 0)
    assert tag_of(None) == ("", 0)


def test_a_driver_it_cannot_patch_is_one_line_not_a_failed_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A driver's version whose calls are not the ones patched: its commits are not points,
    said in one line; the worker starts."""
    (tmp_path / "odd_driver_watch.py").write_text(
        "def install():\n    raise AttributeError(\"'Connection' has no attribute 'commit'\")\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(commits, "KINDS", {"json": "odd_driver_watch"})
    install()
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [
        "crashtest: json's commits are not crash points in this worker (AttributeError: "
        "'Connection' has no attribute 'commit'); mark them with temporal_crashtest.effect"
    ]
