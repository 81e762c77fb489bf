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


def test_the_deploy_matrix_expects_the_product_designs_to_survive_the_patched_deploy() -> None:
    from crashlab.deploys import EXPECTED, Change, Verdict, all_deploy_cells

    cells = all_deploy_cells()
    assert len(cells) == 18 * 4 + 4 * 6  # the journal and DBOS at 4 moments, Temporal at 6
    for (engine, design, change), verdicts in EXPECTED.items():
        if design in ("durable", "keyed", "workflow") and change is Change.PATCHED:
            assert set(verdicts) == {Verdict.OK}, (engine, design)
        if design in ("positional", "position") and change is Change.PATCHED:
            assert Verdict.DUP in verdicts, (engine, design)  # the harness must see it
    with pytest.raises(ConfigError, match="unknown change sideways"):
        from crashlab.deploys import select_deploy_cells

        select_deploy_cells(cells, None, ["sideways"], None)


def test_deploy_matrix_subset_end_to_end(
    db_url: str, temporal_address: str, tmp_path: Path
) -> None:
    """Runs killed in a process of the release before and resumed in today's (the check behind
    the engine's versioning) or in the check with none: keys by the step's number survive what
    keys by position do not, and an unversioned step blocks a run past it, loudly."""
    out = tmp_path / "d.json"
    args = [
        "-m", "crashlab", "deploys", "--engine", "all",
        "--designs", "durable,positional,keyed,position",
        "--changes", "patched,unversioned", "--moments", "after-effect:4,after-checkpoint:4",
        "--json", str(out),
    ]  # fmt: skip
    done = run_python(args, child_env(db_url, TEMPORAL_ADDRESS=temporal_address), 300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[ 18/18]" in done.stderr  # and Temporal's positional ids, patched: both ok
    got = {
        (c["cell"]["engine"], c["cell"]["design"], c["cell"]["change"], c["cell"]["moment"]): c
        for c in json.loads(out.read_text())["cells"]
    }
    verdicts = {k: c["verdict"] for k, c in got.items()}
    for engine, by_step, by_place in (
        ("journal", "durable", "positional"),
        ("dbos", "keyed", "position"),
    ):
        assert verdicts[engine, by_step, "patched", "after-effect:4"] == "ok"
        assert verdicts[engine, by_step, "patched", "after-checkpoint:4"] == "ok"
        # the order placed under key 4, then again under the key the check moved it to
        dup = got[engine, by_place, "patched", "after-effect:4"]
        assert (dup["verdict"], dup["orders"]) == ("dup", 2)
        assert dup["keys"][:2] == ["order :4", "order :5" if engine == "journal" else "order :6"]
        assert verdicts[engine, by_place, "unversioned", "after-checkpoint:4"] == "blocked"
    assert verdicts["journal", "durable", "unversioned", "after-checkpoint:4"] == "ok"
    assert verdicts["temporal", "position", "patched", "after-effect:4"] == "ok"
    blocked = got["dbos", "keyed", "unversioned", "after-checkpoint:4"]
    assert "DBOSUnexpectedStepError" in blocked["why"], blocked
    assert (
        "refusing to replay"
        in got["journal", "positional", "unversioned", "after-checkpoint:4"]["why"]
    )
