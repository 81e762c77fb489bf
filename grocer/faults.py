"""Faults the grocer can be told to show, one per coming `POST /orders`, so that a client's
handling of a slow, failing or vanishing store can be tested."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

KINDS = ("error", "rate-limit", "refuse", "drop-after-store")  # and slow:MS


class BadFault(ValueError):
    """A fault the grocer does not know."""


@dataclass(frozen=True)
class Fault:
    kind: str | None = None  # error (500) | rate-limit (429) | refuse (400) | drop-after-store
    delay_s: float = 0.0  # answer this much later

    @classmethod
    def parse(cls, text: str) -> Fault:
        if text.startswith("slow:"):
            try:
                return cls(delay_s=float(text.removeprefix("slow:")) / 1000)
            except ValueError:
                pass
        elif text in KINDS:
            return cls(kind=text)
        raise BadFault(f"unknown fault {text!r}; known: slow:MS, {', '.join(KINDS)}")


class Faults:
    def __init__(self) -> None:
        self.coming: deque[Fault] = deque()

    def add(self, texts: list[str]) -> None:
        faults = [Fault.parse(text) for text in texts]  # all or none
        self.coming.extend(faults)

    def next(self) -> Fault:
        return self.coming.popleft() if self.coming else Fault()
