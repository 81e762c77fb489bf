"""A crash test's `--json` report read back (`merge`): input anyone could have written.

Every field is checked before anything is drawn from it: its type against the `Report`, `Cell`
and `Untested` fields it fills (a `"matches": "no"` is not a pass, it is refused), every number
finite and within bounds (a timeline of length 1e-300 would draw ticks without end), every text
and list within a size, the web UI's address http(s) only (it becomes every link of the HTML
report), the shard `K/N`. The file itself: a regular file (not a FIFO, not /dev/zero), at most
`MAX_BYTES`. One `InputError` names the file and the field.

Standard library only.
"""

from __future__ import annotations

import json
import math
import types
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from temporal_crashtest._errors import InputError
from temporal_crashtest._files import read_regular
from temporal_crashtest._history.timeline import Timeline
from temporal_crashtest._report.report import Report

MAX_BYTES = 256 * 2**20  # a report of thousands of cells with their timelines is a few MB
MAX_TEXT = 1 * 2**20
MAX_ITEMS = 100_000
MAX_SECONDS = 366 * 86_400.0  # a duration or a time in a run: at most a year
MIN_LENGTH = 1e-3  # a timeline shorter than a millisecond is drawn as one


def read_report(path: Path) -> Report:
    """The report in `path`, checked (see the module), or one InputError."""
    data = read_regular(path, MAX_BYTES, str(path))
    try:
        return report_from_json(json.loads(data, parse_constant=_no_constant))
    except (ValueError, RecursionError) as err:
        raise InputError(f"{path} is not a crash test's --json report ({err})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON holds")


def report_from_json(data: Any) -> Report:
    """A Report from parsed JSON, every field checked; ValueError says which is wrong."""
    report = _build(Report, data, "the report")
    assert isinstance(report, Report)
    if report.ui_url is not None and not report.ui_url.startswith(("http://", "https://")):
        raise ValueError(f"ui_url: a web address is http(s), not {report.ui_url[:40]!r}")
    if report.shard is not None:
        k, _, n = report.shard.partition("/")
        if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
            raise ValueError(f"shard: K/N, not {report.shard[:40]!r}")
    for workflow_id, timeline in report.timelines.items():
        _build(Timeline, timeline, f"timelines[{workflow_id[:40]!r}]")
        if timeline["length"] < MIN_LENGTH and timeline["length"] != 0:
            raise ValueError(f"timelines[{workflow_id[:40]!r}].length: {timeline['length']!r}")
    return report


def _build(cls: type, data: Any, where: str) -> Any:
    """`cls(**data)` with each field's value checked against its annotation."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: an object, not {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"{where}: unknown field {sorted(unknown)[0][:40]!r}")
    values = {name: _check(hints[name], value, f"{where}.{name}") for name, value in data.items()}
    try:
        return cls(**values)
    except TypeError as err:  # a required field missing
        raise ValueError(f"{where}: {err}") from None


def _check(hint: Any, value: Any, where: str) -> Any:
    """`value` if it is of type `hint` (the nested dataclasses built), else ValueError."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return _any(value, where, 0)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _check(inner[0], value, where)
    if is_dataclass(hint) and isinstance(hint, type):
        return _build(hint, value, where)
    if origin is list:
        if not isinstance(value, list) or len(value) > MAX_ITEMS:
            raise ValueError(f"{where}: a list of at most {MAX_ITEMS}")
        return [_check(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict) or len(value) > MAX_ITEMS:
            raise ValueError(f"{where}: an object of at most {MAX_ITEMS} entries")
        return {_text(k, where): _check(args[1], v, f"{where}.{k[:40]}") for k, v in value.items()}
    if hint is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where}: true or false, not {json.dumps(value)[:40]}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10**9:
            raise ValueError(f"{where}: a whole number from 0, not {json.dumps(value)[:40]}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{where}: a number, not {json.dumps(value)[:40]}")
        if not (math.isfinite(value) and -MAX_SECONDS <= value <= MAX_SECONDS):
            raise ValueError(f"{where}: a number of seconds, not {value!r}")
        return float(value)
    if hint is str:
        return _text(value, where)
    raise ValueError(f"{where}: cannot be checked")  # a field this reader does not know


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise ValueError(f"{where}: a text of at most {MAX_TEXT} characters")
    return value


def _any(value: Any, where: str, depth: int) -> Any:
    """A JSON value of the user's (an observed state): bounded in depth and size."""
    if depth > 64:
        raise ValueError(f"{where}: nested more than 64 deep")
    if isinstance(value, str):
        return _text(value, where)
    if isinstance(value, list):
        if len(value) > MAX_ITEMS:
            raise ValueError(f"{where}: a list of at most {MAX_ITEMS}")
        return [_any(v, where, depth + 1) for v in value]
    if isinstance(value, dict):
        if len(value) > MAX_ITEMS:
            raise ValueError(f"{where}: an object of at most {MAX_ITEMS} entries")
        return {k: _any(v, where, depth + 1) for k, v in value.items()}
    return value
