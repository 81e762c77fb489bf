"""The crash lab's logic on a subset of cells, run for real (processes, SIGKILL, Temporal)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crashlab.cells import MatrixCell, MatrixResult, select_cells
from crashlab.engines import all_cells, engine_named
from crashlab.report import MatrixReport
from infra.errors import ConfigError
from tests.helpers import child_env, run_python


def test_expected_outcomes_follow_the_designs() -> None:
    expect = {(c.engine, c.design, c.crash_at): c.expected_match for c in all_cells("all")}
    # journal, Temporal (+ reset), the grocer rows with and without the check, DBOS
    assert len(expect) == 4 * 12 + 3 * 13 + 3 * 2 + 2 * 12
    assert not expect["journal", "naive", "after-checkpoint:1"]
    assert not expect["journal", "checkpoint", "after-effect:4"]
    assert expect["journal", "checkpoint", "after-effect:2"]  # the pantry check only reads
    assert expect["journal", "checkpoint", "after-checkpoint:4"]
    assert not expect["temporal", "none", "after-effect:5"]
    assert not expect["temporal", "run", "reset"]
    assert expect["temporal", "workflow", "reset"]
    for row in ("key-expiry", "reset-key-expiry", "rerun-key-expiry"):
        assert expect["temporal", "workflow", row]
        assert not expect["temporal", "workflow-unchecked", row]
    assert not expect["dbos", "none", "after-effect:4"]
    assert expect["dbos", "none", "after-checkpoint:4"]
    assert all(v for (e, d, _), v in expect.items() if d in ("durable", "transactional", "keyed"))


def test_a_cell_that_disagrees_with_its_design_is_unexpected() -> None:
    def result(design: str, matches: bool) -> MatrixResult:
        cell = MatrixCell(engine="journal", design=design, crash_at="after-effect:4")
        return MatrixResult(
            engine="journal", design=design, crash_at="after-effect:4", model_calls=3,
            orders=1 if matches else 2, emails=1, matches_no_crash=matches,
            expected=cell.expected_match, seconds=1.0,
        )  # fmt: skip

    report = MatrixReport(
        cells=[result("durable", False), result("checkpoint", False)], seconds=1.0
    )
    assert [(c.design, c.counts) for c in report.unexpected] == [("durable", "3/2/1")]
    assert "✗ 3/2/1 (!)" in report.table()


def test_an_engine_not_in_the_registry_is_one_error() -> None:
    """Every dispatch goes through the registry: a name it does not hold is refused, never sent
    down another engine's path."""
    for call in (lambda: engine_named("restate"), lambda: all_cells("restate")):
        with pytest.raises(ConfigError, match="unknown engine 'restate'; the engines: journal"):
            call()


def test_the_columns_and_the_legend_come_from_the_registry() -> None:
    one_run = {"model_calls": 3, "orders": 1, "emails": 1, "matches_no_crash": True}
    cells = [
        MatrixResult.model_validate(
            {"engine": e, "design": d, "crash_at": "none", "expected": True, "seconds": 1.0}
            | one_run
        )
        for e, d in [("dbos", "keyed"), ("temporal", "workflow"), ("journal", "naive")]
    ]
    report = MatrixReport(cells=cells, seconds=1.0)
    head = report.table().splitlines()[0].split()
    assert head == ["crash", "at", "J", "naive", "T", "workflow", "D", "keyed"]
    assert report.legend().startswith("J = hand-rolled journal (design), T = Temporal")


def test_unknown_filter_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown crash point after-lunch"):
        select_cells(all_cells("journal"), None, ["after-lunch"])


def test_matrix_subset_end_to_end(db_url: str, temporal_address: str, tmp_path: Path) -> None:
    out_json, out_md = tmp_path / "m.json", tmp_path / "m.md"
    args = [
        "-m", "crashlab", "matrix", "--engine", "all",
        "--designs", "checkpoint,durable,none,run,workflow,keyed",
        "--crash-points", "after-effect:4,reset",
        "--json", str(out_json), "--markdown", str(out_md),
    ]  # fmt: skip
    done = run_python(args, child_env(db_url, TEMPORAL_ADDRESS=temporal_address), 300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[ 10/10]" in done.stderr  # progress, one line per finished cell
    report = json.loads(out_json.read_text())
    assert set(report) == {"cells", "seconds"}
    got = {(c["engine"], c["design"], c["crash_at"]): c for c in report["cells"]}
    counts = {k: (c["model_calls"], c["orders"], c["emails"]) for k, c in got.items()}
    assert counts == {
        ("journal", "checkpoint", "after-effect:4"): (3, 2, 1),
        ("journal", "durable", "after-effect:4"): (3, 1, 1),
        ("temporal", "none", "after-effect:4"): (3, 2, 1),
        ("temporal", "run", "after-effect:4"): (3, 1, 1),
        ("temporal", "workflow", "after-effect:4"): (3, 1, 1),
        ("temporal", "none", "reset"): (4, 2, 2),
        ("temporal", "run", "reset"): (4, 2, 2),  # a reset gives a new run id: a new key
        ("temporal", "workflow", "reset"): (3, 1, 1),
        ("dbos", "none", "after-effect:4"): (3, 2, 1),  # DBOS runs the killed step again
        ("dbos", "keyed", "after-effect:4"): (3, 1, 1),  # keyed by workflow id and step number
    }
    matches = {k for k, c in got.items() if c["matches_no_crash"]}
    assert matches == {k for k, v in counts.items() if v == (3, 1, 1)}
    assert "| crash at |" in out_md.read_text()


def test_key_expiry_needs_the_effect_check(
    db_url: str, temporal_address: str, tmp_path: Path
) -> None:
    """Orders at the grocer, whose keys live 1 s, and the week run again after the key expired:
    a retry of the killed order step, a reset to before it, a second run of the business id. One
    order if the step looks it up first, two if not."""
    out = tmp_path / "ke.json"
    rows = ["key-expiry", "reset-key-expiry", "rerun-key-expiry"]
    args = ["-m", "crashlab", "matrix", "--engine", "temporal", "--crash-points", ",".join(rows),
            "--json", str(out)]  # fmt: skip
    done = run_python(args, child_env(db_url, TEMPORAL_ADDRESS=temporal_address), 180)
    assert done.returncode == 0, done.stdout + done.stderr
    cells = json.loads(out.read_text())["cells"]
    outcome = {(c["crash_at"], c["design"]): (c["orders"], c["matches_no_crash"]) for c in cells}
    assert outcome == {
        **{(row, "workflow"): (1, True) for row in rows},
        **{(row, "workflow-unchecked"): (2, False) for row in rows},
    }
