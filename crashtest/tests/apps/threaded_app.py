"""The notes app behind a module that starts a thread when imported (as some SDKs and metrics
clients do): a process holding it cannot fork safely, so every worker starts afresh."""

from __future__ import annotations

import threading

from notes_app import NotesWorkflow, build, notes_of

__all__ = ["NotesWorkflow", "build", "notes_of"]

threading.Thread(target=threading.Event().wait, name="started-at-import", daemon=True).start()
