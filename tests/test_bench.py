"""A smoke test of the benchmarks: they run and write valid JSON. No timing is asserted here."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import child_env, run_python


def test_bench_quick_writes_valid_json(db_url: str, temporal_address: str, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    args = [*"-m bench --quick -n 50 --temporal-n 2 --runs 4 --json".split(), str(out)]
    done = run_python(args, child_env(db_url, TEMPORAL_ADDRESS=temporal_address), 300)
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    for name in (
        "bare INSERT commit (floor)",
        "journal checkpoint save",
        "journal replayed step",
        "temporal step (activity)",
        "recovery: new worker start -> run completed",
        "dbos step (output recorded)",
        "dbos grocery run (stub model)",
        "recovery: dbos process start -> run completed",
    ):
        assert set(figures[name]) == {"median_ms", "p99_ms", "n"}, name
        assert figures[name]["n"] >= 1
    assert figures["bare INSERT commit (floor)"]["n"] == 50
    for name in ("throughput: journal durable", "throughput: temporal", "throughput: dbos"):
        assert figures[name]["per_s"] > 0
        assert figures[name]["runs"] == 4
    assert "checkpoint save / floor:" in done.stdout and "dbos step / floor:" in done.stdout
