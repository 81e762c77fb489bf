"""What the crash test reads and writes, read and written safely.

- A file the user names to read (`--input @FILE`, a shard's report) is read only if it is a
  regular file, up to a limit (`read_regular`): never a FIFO waited on, never /dev/zero.
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
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

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


def read_regular(path: Path, limit: int, what: str) -> bytes:
    """A regular file's bytes, at most `limit`; InputError (naming `what`) for anything else:
    a FIFO (never waited on), a device such as /dev/zero, a larger file, one not readable."""
    try:  # opened without waiting (a FIFO's open waits for a writer), then checked
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb", buffering=0) as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise InputError(f"{what} is not a regular file (a device, a pipe?)")
            data = file.read(limit + 1)
    except OSError as err:
        raise InputError(f"{what}: cannot read it ({err.strerror})") from None
    if len(data) > limit:
        raise InputError(f"{what} is over {limit / 2**20:g} MiB")
    return data


MAX_INPUT_BYTES = 16 * 2**20  # Temporal refuses a payload over 2 MB by default


def read_json(text: str, flag: str) -> Any:
    """A value given as JSON, or as @FILE holding JSON (`--input`, `--expect`)."""
    what = flag
    if text.startswith("@"):
        what = f"{flag} {text}"
        raw = read_regular(Path(text[1:]), MAX_INPUT_BYTES, what)
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            raise InputError(f"{what} is not UTF-8 text") from None
    try:
        return json.loads(text, parse_constant=_not_json)
    except (ValueError, RecursionError) as err:
        raise InputError(f"{what} is not JSON: {err}") from None


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON holds")
