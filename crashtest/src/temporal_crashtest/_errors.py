"""Every error the tool raises for a user's mistake or a server it cannot use, under one base:

    CrashTestError                  the crash test cannot run as asked (the CLI: one line, exit 2)
    ├── InputError (ValueError)     an argument that does not load or parse: a MODULE:NAME that
    │   │                           is not importable or not what it should be, --input, --expect
    │   └── CrashPointError         a crash point written wrong, or naming no boundary of the run
    ├── ServerUnreachable (ConnectionError)
    │                               no Temporal server answers at the address, or it has no such
    │                               namespace
    ├── DevServerError              the private dev server could not be found or started
    └── CrashTestAborted            the crash test cannot go on: the run without a crash failed,
                                    the observer raised or returned what is not JSON, the
                                    workflow ran nothing to crash

A crash point whose final state differs is a result (`Cell.matches` is False), never an
exception.
"""

from __future__ import annotations


class CrashTestError(Exception):
    """The crash test cannot run as asked: the base of every error the tool raises for a
    user's mistake or a server it cannot use."""


class InputError(CrashTestError, ValueError):
    """An argument that does not load or parse (a `MODULE:NAME` reference, the workflow's input,
    the expected state)."""


class CrashPointError(InputError):
    """A crash point that is not written right, or names no boundary of the workflow."""


class ServerUnreachable(CrashTestError, ConnectionError):
    """No Temporal server answered at the address, or it has no such namespace."""


class DevServerError(CrashTestError):
    """The private dev server could not be found or started."""


class CrashTestAborted(CrashTestError):
    """The crash test cannot go on: the reference run failed, observe is broken, the workflow
    ran nothing to crash."""


class DriveTimeout(CrashTestError, TimeoutError):
    """A drive helper (`send_update`, `send_signal`, `wait_until`) tried until its timeout
    without success: what it waited for and the last answer."""


class CellFailed(Exception):
    """A cell could not be run as designed (not: its state differs, which is a result). Never
    leaves a cell's run: its `Outcome.failed` says why, and the cell's report."""


class NotReached(CellFailed):
    """A cell's run ended with its first worker alive, never at the crash point the run without
    a crash reached: the point is not tested (no verdict), and the report says why."""


INSIDE = (CellFailed, NotReached)  # the exceptions that never leave the tool (no CrashTestError)
