"""Where the crash test writes, written safely.

- A report file (`--json`, `--markdown`, `--junit-xml`) is checked before the test starts
  (`check_output`): its folder exists and may be written to; the path itself is not a folder, a
  device or a symbolic link. It is written at the end into a file of its own beside it and moved
  into place (`write_output`): never half-written, never through a link planted meanwhile. A
  write that fails (a full disk) is `OutputError`, naming the output, and the other outputs are
  still written.
- A log file in the logs folder (which may be shared) is opened without following a symbolic
  link (`open_log`): a planted link ends the open, it does not append the log to its target.

Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from temporal_crashtest._errors import CrashTestError, InputError


class OutputError(CrashTestError):
    """A report file could not be written."""


def check_output(path: Path, flag: str) -> None:
    """InputError, now, for an output path that cannot be written at the end."""
    where = f"{flag} {path}"
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"{where}: the folder {folder} does not exist")
    try:
        found = path.lstat()
    except FileNotFoundError:
        found = None
    except OSError as err:
        raise InputError(f"{where}: {err.strerror}") from None
    if found is not None:
        if stat.S_ISLNK(found.st_mode):
            raise InputError(f"{where} is a symbolic link: name the file itself")
        if stat.S_ISDIR(found.st_mode):
            raise InputError(f"{where} is a folder: name a file in it")
        if not stat.S_ISREG(found.st_mode):
            raise InputError(f"{where} is not a regular file (a device, a pipe?)")
    if not os.access(folder, os.W_OK):
        raise InputError(f"{where}: the folder {folder} cannot be written to (read-only?)")


def write_output(path: Path, data: bytes, flag: str) -> None:
    """Write `data` to a new file beside `path`, then move it into place (OutputError if that
    fails)."""
    temporary = None
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
        temporary = None
    except OSError as err:
        raise OutputError(
            f"{flag} {path} could not be written: {err.strerror or err}; the verdicts above stand"
        ) from None
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def open_log(path: Path) -> int:
    """A log file's descriptor, for appending; a symbolic link in its place is an OSError."""
    return os.open(
        path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
    )
