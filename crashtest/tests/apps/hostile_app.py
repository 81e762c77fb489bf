"""The notes app's workflow observed by hostile observers: what an observer returns, raises or
does flows into every output the crash test writes, so these put line breaks that GitHub Actions
would read as commands, escape codes, NUL, BEL, a lone surrogate and NaN into the observed state;
one never returns; one removes the folder a report is to be written to."""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import time

from notes_app import notes_file, notes_of

INJECTED = "k\n::add-mask::SECRET\n::set-output name=x::y"


def hostile(workflow_id: str) -> dict[str, object]:
    """The notes written (a note may hold a line break: counted by their keys), under keys and
    beside values no output may print raw."""
    path = notes_file(workflow_id)
    lines = path.read_text().splitlines() if path.exists() else []
    notes = [line.split(" ", 1)[0] for line in lines if line.startswith(f"{workflow_id}:")]
    notes = [f"note {n}" for n in range(len(notes))]
    return {
        INJECTED: len(notes),
        "esc\x1b[2J\x00\x07": "value\r\n::error::forged",
        "lone \ud800 surrogate": notes,
        "not a number": math.nan,
        "##[set-output name=z;]w": 1,
    }


def hangs(workflow_id: str) -> None:
    time.sleep(3600)


async def blocks_the_loop(workflow_id: str) -> None:
    """An async observer that blocks the event loop (a sync call inside `async def`)."""
    time.sleep(3600)  # noqa: ASYNC251 - the mistake this observer stands for


def removes_the_report_folder(workflow_id: str) -> list[str]:
    """The notes; and the folder OUTPUT_TO_REMOVE names is gone by the end of the test."""
    shutil.rmtree(os.environ["OUTPUT_TO_REMOVE"], ignore_errors=True)
    return notes_of(workflow_id)


async def hangs_building(client: object, task_queue: str) -> None:
    """A worker factory that never returns."""
    await asyncio.sleep(3600)
