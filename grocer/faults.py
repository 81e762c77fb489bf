"""Faults the grocer can be told to show, one per coming `POST /orders`, so that a client's
handling of a slow, failing or vanishing store can be tested. Only a grocer started in test mode
(`python -m grocer --test-mode`) takes them, at most MAX_COMING at a time, none slower than
MAX_DELAY_S."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

KINDS = ("error", "rate-limit", "refuse", "drop-after-store")  # and slow:MS
MAX_COMING = 100
MAX_DELAY_S = 30.0


class BadFault(ValueError):
    """A fault the grocer does not know."""


@dataclass(frozen=True)
class Fault:
    kind: str | None = None  # error (500) | rate-limit (429) | refuse (400) | drop-after-store
    delay_s: float = 0.0  # answer this much later

    @classmethod
    def parse(cls, text: str) -> Fault:
        if not isinstance(text, str):
            raise BadFault(f"a fault is a string, not {type(text).__name__}")
        if text.startswith("slow:"):
            try:
                delay_s = float(text.removeprefix("slow:")) / 1000
            except ValueError:
                delay_s = math.nan
            if not 0 <= delay_s <= MAX_DELAY_S:  # also nan and inf
                raise BadFault(f"{text!r}: slow:MS takes 0 to {MAX_DELAY_S * 1000:g} ms")
            return cls(delay_s=delay_s)
        if text in KINDS:
            return cls(kind=text)
        raise BadFault(f"unknown fault {text!r}; known: slow:MS, {', '.join(KINDS)}")


class Faults:
    def __init__(self) -> None:
        self.coming: deque[Fault] = deque()

    def add(self, texts: list[str]) -> None:
        faults = [Fault.parse(text) for text in texts]  # all or none
        if len(self.coming) + len(faults) > MAX_COMING:
            raise BadFault(f"at most {MAX_COMING} faults may be waiting ({len(self.coming)} are)")
        self.coming.extend(faults)

    def clear(self) -> None:
        self.coming.clear()

    def next(self) -> Fault:
        return self.coming.popleft() if self.coming else Fault()
