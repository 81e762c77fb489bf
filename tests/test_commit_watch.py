"""crashtest's watch of the commits in a worker (`temporal_crashtest`'s psycopg patches), probed as
a hostile user would: pipeline mode, COPY in and out, a server-side cursor, autocommit, a
connection used from several threads, `executemany` with `returning`, a block that raises, a
failed statement, a closed connection, async pipeline and COPY. The user's code sees exactly
what it sees without the watch; each way that commits a write is one effect (a crash point),
each that does not, none."""

from __future__ import annotations

import json

import pytest

from tests.helpers import ROOT, child_env, run_python

pytestmark = pytest.mark.servers
PROGRAM = ROOT / "crashtest" / "tests" / "commit_watch.py"  # crashtest's own: its private parts
# Each operation, and the effects it makes under the watch. Pipeline mode and COPY were not
# seen at all (their commits were no crash points).
EFFECTS = {
    "pipeline": 1,
    "pipeline, autocommit": 1,
    "copy in": 1,
    "copy out": 0,
    "server-side cursor": 0,
    "autocommit": 1,
    "threads": 1,
    "executemany returning": 1,
    "a block that raises": 0,
    "a failed statement": 0,
    "a closed connection": 0,
    "async pipeline": 1,
    "async copy in": 1,
}


def test_the_watch_changes_nothing_the_user_sees_and_sees_each_commit(db_url: str) -> None:
    seen = {}
    for mode in ("plain", "watched"):
        done = run_python([str(PROGRAM), mode], child_env(db_url))
        assert done.returncode == 0, done.stderr
        seen[mode] = [json.loads(line) for line in done.stdout.splitlines()]
    plain, watched = seen["plain"], seen["watched"]
    assert [(o["op"], o["saw"]) for o in watched] == [(o["op"], o["saw"]) for o in plain]
    assert {o["op"]: o["effects"] for o in watched} == EFFECTS
