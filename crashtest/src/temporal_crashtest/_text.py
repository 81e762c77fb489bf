"""User data made safe for everything the crash test prints or writes.

What a crash test shows comes in part from the code under test: activity types, labels made from
inputs, the workflow's name, the keys and values its `observe` returns, its exceptions' text.
Any of these may hold a line break (a terminal, or GitHub Actions reading the log, takes what
follows as a new line: `::add-mask::`, `::set-output::`), an escape code, a NUL, a bidirectional
override or a lone surrogate (which no UTF-8 writer takes). So every such text goes through one of
these before it is printed or written:

- `shown(text)`: one line, every character that is not printable written as its Python escape
  (`\\n`, `\\x1b`, `\\u202e`, `\\ud800`), a field that begins with `::` (after spaces: GitHub
  trims them) or holds `##[` (GitHub's workflow commands) defused; printable text, non-ASCII
  letters included, unchanged. `defused(line)`: a whole line's start, the same way.
- `markdown_cell(text)`: `shown`, and `|`, raw HTML, links and backquotes escaped.
- `json_bytes(value)`: JSON any parser takes (no NaN, lone surrogates as `\\udXXX` escapes), as
  UTF-8.

The JUnit writer uses `shown` for every attribute and line of text (XML 1.0 has no way to hold a
control character at all). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import timedelta
from typing import Any, NoReturn

_COMMAND = "::"
_LEGACY_COMMAND = "##["


def _escape(ch: str) -> str:
    return ch if ch.isprintable() else ch.encode("unicode_escape", "backslashreplace").decode()


def shown(text: object) -> str:
    """`text` on one line, as characters that print as themselves (see the module)."""
    out = "".join(_escape(ch) for ch in str(text))
    return defused(out).replace(_LEGACY_COMMAND, "#\\x23[")


def defused(line: str) -> str:
    """`line` with no workflow command at its start: GitHub's runner trims a line's leading
    whitespace before it reads one (`  ::error::...`)."""
    text = line.lstrip()
    if not text.startswith(_COMMAND):
        return line
    return line[: len(line) - len(text)] + "\\x3a" + text[1:]


_MARKDOWN = str.maketrans(
    {"|": "\\|", "<": "&lt;", ">": "&gt;", "&": "&amp;", "[": "\\[", "]": "\\]", "`": "\\`"}
)


def markdown_cell(text: object) -> str:
    """`shown`, then what Markdown would read as markup escaped: `|` (a column), `<` `>` `&`
    (raw HTML: `<script>`, `<img onerror>`), `[` `]` (a link), backquotes (code)."""
    return shown(text).translate(_MARKDOWN)


def finite(value: Any) -> Any:
    """`value` with every float that JSON cannot hold (NaN, ±Infinity) as the string Python
    writes for it, so that it compares equal to itself and any parser reads it."""
    if isinstance(value, float) and not math.isfinite(value):
        return json.dumps(value)  # "NaN", "Infinity", "-Infinity"
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite(item) for item in value]
    return value


def json_bytes(value: Any, *, indent: int | None = 1) -> bytes:
    """`value` as strict JSON, UTF-8 encoded; a lone surrogate becomes its `\\udXXX` escape
    (they occur only inside strings, where that escape is valid JSON)."""
    text = json.dumps(finite(value), indent=indent, ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8", "backslashreplace")


class ArgumentParser(argparse.ArgumentParser):
    """argparse's, whose error line shows the arguments it names as text (`shown`): an argument
    it does not know is the user's, and may hold an escape code."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {shown(message)}\n")


SKIPPED_SPAN = timedelta(hours=1)  # a run longer than this in workflow time says how long


def span_text(span: timedelta) -> str:
    """A span of (workflow) time in the unit it is best read in: "7 days", "3 hours", "5 s"."""
    seconds = span.total_seconds()
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:g} s"
