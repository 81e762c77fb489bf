"""A process's peak memory, for the throughput figures."""

from __future__ import annotations

from pathlib import Path


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident memory (VmHWM), in MiB; None once it has exited."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None
