"""`python -m temporal_crashtest run | merge | scaffold`: the command line (`_front.cli`)."""

from __future__ import annotations

from temporal_crashtest._front.cli import cli

if __name__ == "__main__":
    cli()
