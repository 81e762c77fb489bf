"""A worker module that never finishes importing (it waits at import, as code that connects to
a service at import time does when the service is away): a fork server for it must give up."""

from __future__ import annotations

import time

from notes_app import NotesWorkflow, build, notes_of

__all__ = ["NotesWorkflow", "build", "notes_of"]

time.sleep(3600)
