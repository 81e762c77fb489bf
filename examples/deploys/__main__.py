"""`python -m examples.deploys [--jobs N]`: crash-test every deploy of `pairs.PAIRS` and print
the table — each pair's verdict at every crash point, its exit code and wall time, and whether
it is the verdict the pair must get. Needs a Temporal server (as `temporal_crashtest` finds one)
and DATABASE_URL (`make up`). Exit 1 if any verdict is not the expected one."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from examples.deploys.pairs import PAIRS, Pair
from infra.cli import ArgumentParser


def crash_test(pair: Pair, out: Path) -> tuple[int, float, dict[str, bool]]:
    """Its exit code, wall time and verdict at each point."""
    report = out / f"{pair.name}.json"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "temporal_crashtest", "run", *pair.args(), "--json", str(report)],
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - started
    data: dict[str, Any] = json.loads(report.read_text()) if report.exists() else {}
    if not data:
        print(f"{pair.name}: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
    return done.returncode, seconds, {c["crash_at"]: c["matches"] for c in data.get("cells", [])}


def row(pair: Pair, code: int, seconds: float, verdicts: dict[str, bool]) -> tuple[str, bool]:
    """The pair's Markdown row, and whether its verdicts are the expected ones."""
    failing = {point for point, ok in verdicts.items() if not ok}
    expected = bool(verdicts) and failing == set(pair.failing)
    marks = {True: "✓", False: "✗", None: "?"}  # ?: no verdict (the test did not run)
    cells = ", ".join(f"{p} {marks[verdicts.get(p)]}" for p in pair.points.split(","))
    line = (
        f"| {pair.old} → {pair.new} | {pair.what} | {cells} | {code} | {seconds:.0f} s | "
        f"{'yes' if expected else '**no**'} |"
    )
    return line, expected


def main() -> int:
    parser = ArgumentParser(prog="python -m examples.deploys", description=__doc__)
    parser.add_argument("--jobs", type=int, default=3, help="crash tests at once")
    jobs = parser.parse_args().jobs
    with tempfile.TemporaryDirectory(prefix="deploys-") as folder, ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(lambda p: crash_test(p, Path(folder)), PAIRS))
    print("| deploy | what it shows | verdict at each crash point | exit | wall | as it must |")
    print("|---|---|---|---|---|---|")
    all_expected = True
    for pair, (code, seconds, verdicts) in zip(PAIRS, results, strict=True):
        line, expected = row(pair, code, seconds, verdicts)
        all_expected &= expected
        print(line)
    return 0 if all_expected else 1


if __name__ == "__main__":
    sys.exit(main())
