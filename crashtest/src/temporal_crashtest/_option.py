"""One option of a crash test, declared once (`Option`): its name, what it holds, its default,
how the command line reads it, its check, and the value it belongs to (`Part`). The name is the
Python field's and the pytest fixture's keyword; the flag is the name with `-` (`deadline_s`:
`--deadline-s`). The command line's flags and their reading, the checks, the fixture's words and
crashtest/docs/options.md are all made from the declarations (`_front/options.py` lists them).

Standard library only: the pytest plugin reads the declarations without loading Temporal.
"""

from __future__ import annotations

import argparse
import enum
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from temporal_crashtest._errors import InputError

Add = Callable[..., argparse.Action]  # `ArgumentParser.add_argument`


class Part(enum.Enum):
    """The value an option belongs to."""

    TARGET = "Target"  # the code under test (`Target`'s own fields)
    OLD = "Target.old"  # the version every run starts on (a `Version` field)
    NEW = "Target.new"  # a deploy test's next version (a `Version` field)
    RUN = "CrashTestOptions"  # how the test runs
    CALL = "run_crash_test"  # the call's own argument (`observe`)
    OBSERVER = "observers"  # an observer kind's settings (`CrashTestOptions.observers`)
    REPORT = "report"  # a file the command line writes (in Python: the `Report`'s methods)


class Reads(enum.Enum):
    """How the command line reads an option's words (and the fixture writes its value)."""

    VALUE = "VALUE"  # --name VALUE
    SWITCH = "switch"  # --name, for true
    LIST = "A,B"  # --name A,B; given again, the lists join
    ALL_OR_LIST = "[A,B]"  # --name alone (every one), or --name A,B
    JSON = "JSON"  # --name JSON, or @FILE holding JSON (None is a value)
    NO_FLAG = "-"  # Python only: a callback, or what the command line makes itself


@dataclass(frozen=True)
class Option:
    name: str
    help: str
    part: Part
    reads: Reads = Reads.VALUE
    default: Any = None
    default_factory: Callable[[], Any] | None = None
    metavar: str | None = None
    type: Callable[[str], Any] | None = None  # argparse's `type` (int, float, Path)
    read: Callable[[Any], Any] | None = None  # the command line's value to the API's
    check: Callable[[Any], None] | None = None  # InputError for a value out of range
    write: Callable[[Any], str] = str  # a value the fixture was given, as the flag's word
    code: bool = False  # MODULE:NAME of code: the fixture also takes the object itself
    field: str | None = None  # its field in its part's value, when not `name` (Version's)
    also: tuple[str, ...] = ()  # other spellings of the flag, still taken
    required: bool = False
    choices: tuple[str, ...] | None = None
    default_text: str | None = None  # the default as the options page says it, when not its text

    @property
    def flag(self) -> str:
        return f"--{self.name.replace('_', '-')}"

    @property
    def attribute(self) -> str:
        """Its field in its part's value."""
        return self.field or self.name

    def initial(self) -> Any:
        """Its default value (a new one each time, for a factory's)."""
        return self.default_factory() if self.default_factory is not None else self.default

    def add_to(self, add: Add) -> None:
        """Its flag, on a parser (`add`: the parser's `add_argument`)."""
        if self.reads is Reads.NO_FLAG:
            return
        more: dict[str, Any] = {"help": self.help, "dest": self.name}
        if self.reads is Reads.SWITCH:
            more["action"] = "store_true"
        elif self.reads is Reads.LIST:
            more["action"] = "append"
        elif self.reads is Reads.ALL_OR_LIST:
            more.update(nargs="?", const="")
        for key in ("metavar", "type", "choices"):
            if getattr(self, key) is not None:
                more[key] = getattr(self, key)
        if self.required:
            more["required"] = True
        add(self.flag, *self.also, **more)

    def from_args(self, args: argparse.Namespace) -> Any:
        """Its value from the parsed command line: its default when not given."""
        given = getattr(args, self.name, None) if self.reads is not Reads.NO_FLAG else None
        if given is None or given is False:
            return self.initial()
        if self.reads is Reads.LIST:  # each time the flag was given
            return tuple(item for text in given for item in _items(text))
        if self.reads is Reads.ALL_OR_LIST:
            return _items(given)
        return self.read(given) if self.read is not None else given

    def words(self, value: Any) -> list[str]:
        """The command line's words for a value the fixture was given (none: not given)."""
        if self.reads is Reads.NO_FLAG or value is False:
            return []
        if self.reads is Reads.SWITCH or (self.reads is Reads.ALL_OR_LIST and value is True):
            return [self.flag]
        if self.reads is Reads.JSON:
            return [self.flag, json.dumps(value)]
        if self.reads in (Reads.LIST, Reads.ALL_OR_LIST):
            items = [value] if isinstance(value, str) else list(value)
            return [self.flag, ",".join(self._text(item) for item in items)]
        return [self.flag, self._text(value)]

    def _text(self, value: Any) -> str:
        return reference_to(value, self.name) if self.code else self.write(value)


def _items(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def reference_to(value: object, what: str) -> str:
    """MODULE:NAME of a module-level function or class (a string is taken as it is)."""
    if isinstance(value, str):
        return value
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if not module or not qualname or "<locals>" in qualname or module == "__main__":
        raise InputError(
            f"{what} must be a module-level function or class, or a 'MODULE:NAME' string: "
            "the crash test loads it again in processes of its own"
        )
    return f"{module}:{qualname}"


def declared(options: tuple[Option, ...], name: str) -> Any:
    """The dataclass field of the option `name`, with its default: a value class's fields are
    its options (`Target`, `CrashTestOptions`), and their defaults are the declarations'."""
    option = next(o for o in options if o.name == name)
    if option.default_factory is not None:
        return field(default_factory=option.default_factory)
    return field(default=option.default)
