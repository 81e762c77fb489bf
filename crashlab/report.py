"""The matrix as a table (terminal and Markdown) and as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from crashlab.cells import GROCER_ROWS, MatrixResult
from crashlab.engines import ENGINES
from infra.reporting import render


class MatrixReport(BaseModel):
    cells: list[MatrixResult]
    seconds: float

    @property
    def unexpected(self) -> list[MatrixResult]:
        return [c for c in self.cells if not c.as_expected]

    def write_json(self, path: Path) -> None:
        path.write_text(json.dumps(self.model_dump(), indent=1) + "\n")

    def columns(self) -> list[tuple[str, str]]:
        present = {(c.engine, c.design) for c in self.cells}
        order = [(e.name, d) for e in ENGINES.values() for d in e.columns()]
        return [col for col in order if col in present]

    def rows(self) -> list[str]:
        present = {c.crash_at for c in self.cells}
        every = [row for e in ENGINES.values() for row in (*e.rows, *(r for _, r in e.more_cells))]
        return [p for p in dict.fromkeys(every) if p in present]

    def _cell_text(self, engine: str, design: str, crash_at: str) -> str:
        for c in self.cells:
            if (c.engine, c.design, c.crash_at) == (engine, design, crash_at):
                mark = "✓" if c.matches_no_crash else "✗"
                flag = "" if c.as_expected else " (!)"
                return f"{mark} {c.counts}{flag}"
        return "—"

    def table(self, *, markdown: bool = False) -> str:
        cols = self.columns()
        head = ["crash at", *(f"{ENGINES[e].letter} {d}" for e, d in cols)]
        body = [[row, *(self._cell_text(e, d, row) for e, d in cols)] for row in self.rows()]
        return render(head, body, markdown=markdown)

    def legend(self) -> str:
        legend = ", ".join(f"{e.letter} = {e.says}" for e in ENGINES.values()) + (
            ". Each cell: ✓ the final state equals a run that never crashed, ✗ it does not; then "
            "model calls/orders/emails (no crash: 3/1/1). (!) marks a cell whose outcome is not "
            "the one its design predicts."
        )
        if any(row in GROCER_ROWS for row in self.rows()):
            legend += (
                " key-expiry, reset-key-expiry, rerun-key-expiry: orders at the grocer, whose keys "
                "live 1 s; the week run again after the key expired (a retry of the killed order "
                "step, a reset to before it, a second run of the business id); T workflow looks "
                "the order up by its reference first, T workflow-unchecked does not."
            )
        return legend
