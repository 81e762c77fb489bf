"""A module that ends its process when imported (EXIT_HOW: `sys` for sys.exit(3), `os` for
os._exit(0)), as a script imported by mistake does: crashtest says so in one line, exit 2 —
never a silent exit 0."""

from __future__ import annotations

import os
import sys

if os.environ.get("EXIT_HOW") == "os":
    os._exit(0)
sys.exit(3)
