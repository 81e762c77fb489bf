"""How two states differ, in words (`differences`: at most MAX_DIFFERENCES places, each value
`short`), and a value made JSON to compare (`to_json`)."""

from __future__ import annotations

import json
from typing import Any

from temporal_crashtest._errors import CrashTestAborted
from temporal_crashtest._text import finite, shown

MAX_DIFFERENCES = 3


def short(value: object, chars: int = 40) -> str:
    """A JSON value in at most `chars` characters."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= chars else text[: chars - 3] + "..."


Place = tuple[object, ...]  # where in a JSON value: its keys and indexes, outermost first


def _walk(reference: object, observed: object, path: Place, out: list[tuple[Place, str]]) -> None:
    """Each place where `observed` differs from `reference`, and how (its values not shown yet)."""
    if isinstance(reference, dict) and isinstance(observed, dict):
        for key in sorted(set(reference) | set(observed), key=str):
            if key not in observed:
                out.append(((*path, key), "missing"))
            elif key not in reference:
                out.append(((*path, key), "not in the reference"))
            else:
                _walk(reference[key], observed[key], (*path, key), out)
    elif isinstance(reference, list) and isinstance(observed, list):
        if len(reference) != len(observed):
            out.append((path, f"{len(reference)} → {len(observed)} entries"))
        else:
            for i, (a, b) in enumerate(zip(reference, observed, strict=True)):
                _walk(a, b, (*path, i), out)
    elif reference != observed:
        out.append((path, f"{short(reference)} → {short(observed)}"))


def _where(path: Place) -> str:
    """A place in a JSON value as the report names it: `a.b[2].c`."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else f".{shown(step)}" if text else shown(step)
    return text or "the observed value"


def differences(reference: object, observed: object) -> str | None:
    """What differs between two JSON values, in one line (None: nothing)."""
    out: list[tuple[Place, str]] = []
    _walk(reference, observed, (), out)
    if not out:
        return None
    said = [f"{_where(path)}: {how}" for path, how in out[:MAX_DIFFERENCES]]
    more = f" (+{len(out) - MAX_DIFFERENCES} more)" if len(out) > MAX_DIFFERENCES else ""
    return "; ".join(said) + more


def to_json(value: object, what: str) -> Any:
    """A JSON round trip, so that tuples and lists compare equal and the report can hold it; a
    NaN or an infinity becomes the string Python writes for it (it then equals itself, and any
    JSON parser reads the report)."""
    try:
        return finite(json.loads(json.dumps(value, sort_keys=True)))
    except (TypeError, ValueError, RecursionError) as err:
        raise CrashTestAborted(
            f"{what} returned something that is not JSON: {shown(err)}"
        ) from None
