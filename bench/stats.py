"""Medians and p99s of samples in milliseconds."""

from __future__ import annotations

import statistics

from pydantic import BaseModel

from infra.reporting import p99


class Figure(BaseModel):
    median_ms: float
    p99_ms: float
    n: int

    @classmethod
    def of_ns(cls, samples_ns: list[int], *, per: int = 1) -> Figure:
        """`per`: divide each sample (e.g. a batch of `per` steps timed together)."""
        ms = [s / 1e6 / per for s in samples_ns]
        return cls(median_ms=round(statistics.median(ms), 5), p99_ms=round(p99(ms), 5), n=len(ms))


class Throughput(BaseModel):
    per_s: float
    runs: int
    seconds: float
    rss_mb: float | None = None  # peak resident memory of the process that ran the steps
