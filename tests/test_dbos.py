"""The agent on DBOS through what production throws at it: a Postgres outage mid-step, a model that
does not answer every time, two processes that would share an executor id, bad input, a run that
fails. Real `python -m dbos_agent` processes on a real Postgres (the outage: a Postgres of the
test's own, stopped with `-m immediate` and started again)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy
from dbos import DBOSClient, EnqueueOptions
from dbos._sys_db import db_retry
from psycopg.conninfo import conninfo_to_dict

from crashlab.servers import LabPostgres
from dbos_agent.__main__ import READY_LINE, database_url
from dbos_agent.agent import QUEUE_NAME, WORKFLOW_NAME, DBOSRequest, KeyDesign
from dbos_agent.outages import count_missing_socket_as_outage, through_outage
from infra.embedded_postgres import postmaster_pid
from infra.errors import DatabaseUnavailable
from tests.helpers import (
    ROOT,
    assert_one_line_error,
    child_env,
    new_run_id,
    prepare_database,
    run_python,
)

pytestmark = pytest.mark.servers
SCHEMA = "dbos"
RUN_TIMEOUT_S = 120


class Serve:
    """`python -m dbos_agent serve ARGS` with its output in a log; stopped with SIGTERM."""

    def __init__(self, db_url: str, log: Path, *args: str, **env: str) -> None:
        self.log_path = log
        self._log = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dbos_agent", "serve", *args],
            cwd=ROOT,
            env=child_env(db_url, **env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def ready(self, timeout_s: float = 60) -> str:
        """The executor id it holds, once it says it is ready."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = re.search(rf"{READY_LINE}: executor (\S+)", self.log())
            if found:
                return found.group(1)
            assert self.proc.poll() is None, self.log()
            time.sleep(0.1)
        raise AssertionError(f"not ready in {timeout_s} s: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


@pytest.fixture
def serves(tmp_path: Path) -> Iterator[list[Serve]]:
    started: list[Serve] = []
    yield started
    for serve in started:
        serve.stop()


def setup_dbos(db_url: str) -> None:
    done = run_python(["-m", "dbos_agent", "setup"], child_env(db_url))
    assert done.returncode == 0, done.stderr


def enqueue(db_url: str, run_ids: list[str]) -> None:
    client = DBOSClient(system_database_url=database_url(db_url), dbos_system_schema=SCHEMA)
    try:
        for run_id in run_ids:
            options = EnqueueOptions(
                workflow_name=WORKFLOW_NAME, queue_name=QUEUE_NAME, workflow_id=run_id
            )
            client.enqueue(
                options, DBOSRequest(household=f"h{run_id[-8:]}", design=KeyDesign.KEYED)
            )
    finally:
        client.destroy()


def statuses(db_url: str, run_ids: list[str]) -> dict[str, str]:
    with psycopg.connect(db_url, autocommit=True) as conn:
        rows = conn.execute(
            f"select workflow_uuid, status from {SCHEMA}.workflow_status"
            " where workflow_uuid = any(%s)",
            (run_ids,),
        ).fetchall()
    return dict(rows)


def wait_ended(db_url: str, run_ids: list[str], timeout_s: float = RUN_TIMEOUT_S) -> dict[str, str]:
    """Each run's DBOS status once all have ended (SUCCESS or ERROR), or as they are at the
    timeout; asked again while Postgres is away."""
    deadline = time.monotonic() + timeout_s
    found: dict[str, str] = {}
    while time.monotonic() < deadline:
        try:
            found = statuses(db_url, run_ids)
        except psycopg.OperationalError:
            time.sleep(0.5)
            continue
        if len(found) == len(run_ids) and set(found.values()) <= {"SUCCESS", "ERROR"}:
            break
        time.sleep(0.5)
    return found


def paid_calls(db_url: str, run_id: str) -> list[tuple[int, int]]:
    """(step, model calls recorded) for the run: one each for steps 1, 3 and 6 without a crash."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        rows = conn.execute(
            "select step, count(*) from model_calls where run_id = %s group by step order by step",
            (run_id,),
        ).fetchall()
    return [(int(step), int(n)) for step, n in rows]


def effects(db_url: str, run_id: str) -> tuple[int, int]:
    with psycopg.connect(db_url, autocommit=True) as conn:
        orders = conn.execute("select count(*) from orders where run_id = %s", (run_id,))
        emails = conn.execute("select count(*) from emails where run_id = %s", (run_id,))
        return int(orders.fetchone()[0]), int(emails.fetchone()[0])  # type: ignore[index]


NO_CRASH_CALLS = [(1, 1), (3, 1), (6, 1)]


def wait_call_out(serve: Serve, timeout_s: float = RUN_TIMEOUT_S) -> None:
    """Until the stub model has a call out (it says so as it starts thinking)."""
    deadline = time.monotonic() + timeout_s
    while "the stub model thinks" not in serve.log():
        assert time.monotonic() < deadline, "no run called the model"
        time.sleep(0.02)


async def test_runs_live_through_a_postgres_outage_mid_step_and_pay_once(
    tmp_path: Path, serves: list[Serve]
) -> None:
    """Five runs whose model takes 1.5 s; Postgres stopped (-m immediate) while the calls are
    out, and started again 5 s later: every run ends SUCCESS with one paid call per step (an
    answer that came back while Postgres was away is recorded by the step's next attempt, not
    paid for again), one order, one email."""
    postgres = LabPostgres(tmp_path / "own")
    (tmp_path / "own").mkdir()
    url = prepare_database(await postgres.start())
    setup_dbos(url)
    serve = Serve(url, tmp_path / "serve.log", STUB_MODEL_LATENCY_MS="1500")
    serves.append(serve)
    serve.ready()
    run_ids = [new_run_id("outage") for _ in range(5)]
    enqueue(url, run_ids)
    # While a call is out (it takes 1.5 s): not a fixed time after the enqueue, which a loaded
    # machine can spend launching, nor after a record, when no call need be out.
    await asyncio.to_thread(wait_call_out, serve)
    pid = postmaster_pid(postgres.pgdata)
    assert pid is not None
    os.kill(pid, signal.SIGQUIT)  # pg_ctl stop -m immediate
    await asyncio.sleep(5)
    await postgres.start()
    try:
        ended = await asyncio.to_thread(wait_ended, url, run_ids)
        assert ended == dict.fromkeys(run_ids, "SUCCESS"), serve.log()[-3000:]
        for run_id in run_ids:
            assert paid_calls(url, run_id) == NO_CRASH_CALLS, run_id
            assert effects(url, run_id) == (1, 1), run_id
        assert "recorded now" in serve.log()  # the outage did fall between a call and its record
    finally:
        serve.stop()
        await postgres.stop()


def test_dbos_waits_for_a_socket_that_is_away(db_url: str, tmp_path: Path) -> None:
    """DBOS's own calls (recording a step, reading the next) wait for a Postgres whose socket
    is away, as it is while the server restarts, instead of failing the run that made them:
    without `count_missing_socket_as_outage` the first attempt raises."""
    count_missing_socket_as_outage()
    folder = Path(str(conninfo_to_dict(db_url)["host"]))
    [socket] = [found for found in folder.glob(".s.PGSQL.*") if found.is_socket()]
    away = tmp_path / "socket-away"
    away.mkdir()
    url = sqlalchemy.engine.make_url(database_url(db_url)).set(drivername="postgresql+psycopg")
    engine = sqlalchemy.create_engine(url.update_query_dict({"host": str(away)}))
    attempts = 0

    @db_retry(initial_backoff=0.1, max_backoff=0.2)
    def ask() -> int:
        nonlocal attempts
        attempts += 1
        with engine.connect() as conn:
            return int(conn.execute(sqlalchemy.text("select 1")).scalar_one())

    back = threading.Timer(0.5, lambda: (away / socket.name).symlink_to(socket))
    back.start()
    try:
        assert ask() == 1
    finally:
        back.cancel()
        engine.dispose()
    assert attempts > 1


async def test_a_call_dbos_does_not_retry_waits_out_an_outage(db_url: str) -> None:
    """Registering the queue (a DBOS call with no retry of its own) on a connection Postgres
    ended, as a restart does: `through_outage` calls it again, where the bare call raised (a
    `serve` started during a restart died of it); an outage that outlasts its wait is one line,
    without the password."""
    url = sqlalchemy.engine.make_url(database_url(db_url)).set(drivername="postgresql+psycopg")
    engine = sqlalchemy.create_engine(url)
    with engine.connect() as conn:  # the pool keeps it: the next call gets it, ended
        pid = conn.execute(sqlalchemy.text("select pg_backend_pid()")).scalar_one()
    attempts = 0

    async def register() -> int:
        nonlocal attempts
        attempts += 1
        with engine.connect() as conn:
            return int(conn.execute(sqlalchemy.text("select 1")).scalar_one())

    try:
        async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as admin:
            await admin.execute("select pg_terminate_backend(%s)", (pid,))
        assert await through_outage(register, "cannot register") == 1
        assert attempts == 2  # the first met the ended connection
    finally:
        engine.dispose()
    away = sqlalchemy.create_engine(url.update_query_dict({"host": "/nonexistent-socket-dir"}))

    async def never() -> int:
        with away.connect() as conn:
            return int(conn.execute(sqlalchemy.text("select 1")).scalar_one())

    with pytest.raises(DatabaseUnavailable) as raised:
        await through_outage(never, "cannot register the queue", wait_s=1.0)
    text = str(raised.value)
    assert text.startswith("cannot register the queue: Postgres was away for 1 s: ")
    assert "\n" not in text
    password = url.password
    assert not password or password not in text
    away.dispose()


def test_a_model_that_does_not_always_answer_is_retried(fresh_db_url: str) -> None:
    """A quarter of the calls get no answer (a 429): each step is retried in its process, as
    Temporal retries an activity, and the run completes having paid one call per step."""
    setup_dbos(fresh_db_url)
    run_id = new_run_id("flaky")
    done = run_python(
        ["-m", "dbos_agent", "run", "--run-id", run_id],
        child_env(fresh_db_url, STUB_MODEL_FAULT="unavailable"),
        timeout=RUN_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"run {run_id}: 3 model calls, 1 order, 1 email" in done.stdout
    assert paid_calls(fresh_db_url, run_id) == NO_CRASH_CALLS


def test_executor_ids_cannot_collide(
    fresh_db_url: str, tmp_path: Path, serves: list[Serve]
) -> None:
    """Two processes without an id take two ids; one asking for a held id is refused in one
    line; a process killed leaves its id to the next that starts, which recovers its runs."""
    setup_dbos(fresh_db_url)
    first = Serve(fresh_db_url, tmp_path / "a.log")
    second = Serve(fresh_db_url, tmp_path / "b.log")
    serves += [first, second]
    a, b = first.ready(), second.ready()
    assert a != b and {a.rsplit("-", 1)[1], b.rsplit("-", 1)[1]} == {"0", "1"}
    done = run_python(
        ["-m", "dbos_agent", "serve", "--executor-id", a], child_env(fresh_db_url), timeout=60
    )
    assert_one_line_error(done, f"executor id {a} is held by another running process")
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(10)
    third = Serve(fresh_db_url, tmp_path / "c.log")
    serves.append(third)
    assert third.ready() == a  # the dead process's slot, and with it its pending runs


@pytest.mark.parametrize(
    ("flag", "value", "why"),
    [
        ("--household", "victim@evil.example>\r\nBcc: all@corp.example", "is not a household"),
        ("--run-id", "run with spaces", "is not a run id"),
    ],
)
def test_bad_input_is_one_line(fresh_db_url: str, flag: str, value: str, why: str) -> None:
    args = ["-m", "dbos_agent", "run", "--run-id", new_run_id("bad"), flag, value]
    done = run_python(args, child_env(fresh_db_url))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and why in done.stderr
    assert "\r\nBcc" not in done.stderr


def test_a_failed_run_is_one_line_without_dbos_traceback(fresh_db_url: str) -> None:
    """A model that never answers with the JSON asked for fails the run (not retried: another
    attempt cannot help). `run` says so in one line, then again, when asked for the same run id:
    DBOS's recorded failure, not its traceback."""
    setup_dbos(fresh_db_url)
    run_id = new_run_id("fails")
    for _ in range(2):
        done = run_python(
            ["-m", "dbos_agent", "run", "--run-id", run_id, "--household", "caviar-lover"],
            child_env(fresh_db_url, STUB_MODEL_FAULT="unknown-item"),
            timeout=RUN_TIMEOUT_S,
        )
        assert_one_line_error(done, f"run {run_id} failed: ")
        assert "not on the price list" in done.stderr or "did not report" in done.stderr
    assert statuses(fresh_db_url, [run_id]) == {run_id: "ERROR"}


def test_stuck_watch_settings_are_checked_and_spare_a_slow_step(
    fresh_db_url: str, tmp_path: Path, serves: list[Serve]
) -> None:
    """DBOS_STUCK_AFTER_S out of range is one line at start; set to 1 s beside a 3 s model call,
    the process does not take the call for a stuck run (it is running) and the run completes."""
    done = run_python(
        ["-m", "dbos_agent", "serve"], child_env(fresh_db_url, DBOS_STUCK_AFTER_S="1e306")
    )
    assert_one_line_error(done, "DBOS_STUCK_AFTER_S='1e306' must be at least")
    setup_dbos(fresh_db_url)
    serve = Serve(
        fresh_db_url, tmp_path / "serve.log", DBOS_STUCK_AFTER_S="1", STUB_MODEL_LATENCY_MS="3000"
    )
    serves.append(serve)
    serve.ready()
    run_id = new_run_id("slow")
    enqueue(fresh_db_url, [run_id])
    assert wait_ended(fresh_db_url, [run_id]) == {run_id: "SUCCESS"}, serve.log()[-2000:]
    assert serve.proc.poll() is None and "stuck" not in serve.log()
    assert paid_calls(fresh_db_url, run_id) == NO_CRASH_CALLS


def test_runs_another_version_left_pending_are_listed_with_what_to_do(
    fresh_db_url: str,
) -> None:
    """DBOS recovers a workflow only on a process of its own application version: a run killed
    on one version stays PENDING when a process of the next one starts (it says "No workflows
    to recover", and runs its own). `python -m dbos_agent pending` lists it, with what to do."""
    setup_dbos(fresh_db_url)
    left, fresh = new_run_id("left-pending"), new_run_id("next-version")
    killed = run_python(
        ["-m", "crashlab.dbos_crash", "run", "--run-id", left],
        child_env(fresh_db_url, CRASH_AT="after-effect:4", DBOS__APPVERSION="v-old"),
        timeout=RUN_TIMEOUT_S,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    done = run_python(
        ["-m", "dbos_agent", "run", "--run-id", fresh],
        child_env(fresh_db_url, DBOS__APPVERSION="v-new"),
        timeout=RUN_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    listed = run_python(["-m", "dbos_agent", "pending"], child_env(fresh_db_url))
    assert listed.returncode == 1, listed.stdout + listed.stderr
    lines = listed.stdout.strip().splitlines()
    assert lines[0].startswith(f"{left}: pending on version v-old (executor "), lines
    assert lines[1].startswith("1 run(s) left pending by another version than the latest (v-new)")
    assert "DBOS__APPVERSION=<their version> python -m dbos_agent serve" in lines[1]
    assert fresh not in listed.stdout  # completed on the latest version
