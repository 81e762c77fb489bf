"""What the labs and the benches print — tables (aligned columns for a terminal, or Markdown),
progress lines on stderr — and the p99 their figures report. Here, below both, so that the crash
lab and the bench each use it without importing the other (the bench uses the lab; never the
reverse)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def say(text: str) -> None:
    """A progress line on stderr, at once (stdout is the result's)."""
    print(text, file=sys.stderr, flush=True)


def render(head: Sequence[str], rows: Sequence[Sequence[str]], *, markdown: bool = False) -> str:
    """`rows` under `head`: columns padded to their widest cell (text), or a Markdown table.
    Cells that read as numbers are right-aligned in text."""
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        out = []
        for cell, width in zip(cells, widths, strict=True):
            numeric = cell.replace(".", "", 1).replace("-", "", 1).isdigit()
            out.append(cell.rjust(width) if numeric else cell.ljust(width))
        return "  ".join(out).rstrip()

    return "\n".join(line(r) for r in [head, *rows])


def p99(values: list[float]) -> float:
    """The 99th percentile of `values` (nearest rank; with fewer than 100, the largest few)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
