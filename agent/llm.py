"""The language model (LLM) behind a small protocol, the deterministic stub, and the recorded call.

Every call is recorded in `model_calls` before its answer is returned. A call made with an
idempotency key first looks for a recorded answer under that key and reuses it: a retried step
does not pay for the same call twice. An answer is checked before it is recorded: one we cannot
keep (over MODEL_MAX_ANSWER_BYTES, nested deeper than MAX_ANSWER_DEPTH, or what Postgres's
`jsonb` refuses) is recorded as refused and fails the step at once (`ModelAnswerRefused`), after
one paid call, not twenty; the configured secrets are hidden in what is kept, should a model echo
one. Nothing here recurses into an answer: its depth is counted in one pass over the text before
anything parses it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import random
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from enum import StrEnum
from typing import Protocol, TypeVar

import psycopg
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ValidationError

from agent.effects import find_by_key, insert_once, log_effect
from agent.model_errors import (
    AnswerTooLarge,
    ModelAnswerRefused,
    ModelBudgetSpent,
    ModelNoAnswer,
    ModelOutputError,
    ModelUnavailable,
)
from infra.config import env_number, env_str, http_url, model_latency_seconds, parse_choice
from infra.errors import ConfigError
from infra.metrics import EffectEvent
from infra.redaction import redact

T = TypeVar("T", bound=BaseModel)
log = logging.getLogger(__name__)

CATALOGUE = ("milk", "eggs", "bread", "coffee", "apples", "rice", "oats", "tomatoes", "cheese")


class Model(Protocol):
    async def complete(self, prompt: str) -> str:
        """Answer a prompt with text (the steps ask for JSON)."""
        ...


def make_prompt(task: str, instruction: str, payload: BaseModel | dict[str, object]) -> str:
    data = payload.model_dump() if isinstance(payload, BaseModel) else payload
    return f"task: {task}\n{instruction}\ninput: {json.dumps(data, sort_keys=True)}"


def prompt_task(prompt: str) -> str:
    """The task a prompt of `make_prompt` asks for (the step's name)."""
    return prompt.partition("\n")[0].removeprefix("task: ")


def _score(*parts: str) -> int:
    """A stable pseudo-random number (Python's hash() changes from process to process)."""
    return int.from_bytes(hashlib.sha256("|".join(parts).encode()).digest()[:4], "big")


class StubFault(StrEnum):
    """How the stub can misbehave (STUB_MODEL_FAULT), to test what guards the agent."""

    MALFORMED = "malformed"  # the first answer to each prompt is not JSON
    UNKNOWN_ITEM = "unknown-item"  # choose adds an item the pantry did not report missing
    OVER_BUDGET = "over-budget"  # choose buys 6 of everything missing: over any household's budget
    TOO_MANY = "too-many"  # choose asks for a dozen of the first item
    # A quarter of the calls, at random, get no answer (as a 429 or a 503 would: nothing is
    # paid, `ModelUnavailable`, retried by the step's engine).
    UNAVAILABLE = "unavailable"


UNAVAILABLE_SHARE = 0.25


class StubModel:
    """A deterministic stand-in for an LLM: the same prompt always gets the same answer.

    `latency_s` makes it 'think' so that a person can kill a run in the middle of a call.
    """

    def __init__(self, latency_s: float = 0.0, fault: StubFault | None = None) -> None:
        self.latency_s = latency_s
        self.fault = fault
        self._asked: set[str] = set()  # prompts answered once already (for MALFORMED)

    async def complete(self, prompt: str) -> str:
        if self.latency_s:
            log.info("the stub model thinks for %.1f s", self.latency_s)  # a moment to kill in
            await asyncio.sleep(self.latency_s)
        if self.fault is StubFault.UNAVAILABLE and random.random() < UNAVAILABLE_SHARE:
            raise ModelUnavailable("the stub model is unavailable this time (429)")
        if self.fault is StubFault.MALFORMED and prompt not in self._asked:
            self._asked.add(prompt)
            return "Sure! Here is what you asked for: a lovely list."
        task = prompt_task(prompt)
        data = json.loads(prompt.rpartition("input: ")[2])
        if task == "plan":
            household = data["household"]
            staples = sorted(CATALOGUE, key=lambda item: _score(household, item))[:6]
            answer: dict[str, object] = {
                "staples": staples,
                "note": f"weekly staples for {household}",
            }
        elif task == "choose":
            answer = {"lines": self._choose(data["missing"])}
        elif task == "summarise":
            items = ", ".join(f"{line['quantity']} x {line['item']}" for line in data["lines"])
            answer = {
                "text": f"Order #{data['order_id']} placed ({items}); "
                f"confirmation sent to {data['recipient']}."
            }
        else:
            raise ValueError(f"the stub model has no answer for task {task!r}")
        return json.dumps(answer)

    def _choose(self, missing: list[str]) -> list[dict[str, object]]:
        lines: list[dict[str, object]] = [
            {"item": item, "quantity": 1 + _score("qty", item) % 2} for item in missing
        ]
        if self.fault is StubFault.UNKNOWN_ITEM:
            lines.append({"item": "caviar", "quantity": 1})
        elif self.fault is StubFault.OVER_BUDGET:
            lines = [{"item": item, "quantity": 6} for item in missing]
        elif self.fault is StubFault.TOO_MANY and lines:
            lines[0]["quantity"] = 12
        return lines


class ModelKind(StrEnum):
    STUB = "stub"
    OPENAI = "openai"


LOOPBACK = ("localhost", "127.0.0.1", "::1")


def _refuse_a_key_in_clear(base_url: str, api_key: str) -> None:
    """A model key is not sent over plain http to another machine, unless asked for
    (MODEL_ALLOW_PLAIN_HTTP=1)."""
    parts = http_url("MODEL_BASE_URL", base_url, repr(redact(base_url)))
    in_clear = parts.scheme == "http" and parts.hostname not in LOOPBACK and api_key != "none"
    if in_clear and env_str("MODEL_ALLOW_PLAIN_HTTP") != "1":
        raise ConfigError(
            f"MODEL_API_KEY would go in clear to {parts.hostname} over http: use https, or set "
            "MODEL_ALLOW_PLAIN_HTTP=1"
        )


def model_from_env() -> Model:
    """MODEL=stub (default: STUB_MODEL_LATENCY_MS, STUB_MODEL_FAULT) or MODEL=openai
    (MODEL_BASE_URL, MODEL_NAME, MODEL_API_KEY, MODEL_TIMEOUT_S). A bad value: one line."""
    kind = parse_choice(ModelKind, env_str("MODEL") or "stub", "MODEL")
    if kind is ModelKind.OPENAI:
        from agent.openai_model import OpenAIModel

        base_url, name = env_str("MODEL_BASE_URL"), env_str("MODEL_NAME")
        if not base_url or not name:
            raise ConfigError("MODEL=openai needs MODEL_BASE_URL and MODEL_NAME")
        api_key = env_str("MODEL_API_KEY") or "none"  # a local server may want none
        _refuse_a_key_in_clear(base_url, api_key)
        timeout_s = env_number("MODEL_TIMEOUT_S", 60.0, positive=True, maximum=MAX_TIMEOUT_S)
        return OpenAIModel(base_url, api_key, name, timeout_s, max_answer_bytes())
    max_answer_bytes()
    raw = env_str("STUB_MODEL_FAULT")
    fault = parse_choice(StubFault, raw, "STUB_MODEL_FAULT") if raw else None
    return StubModel(model_latency_seconds(), fault)


MAX_TIMEOUT_S = 240.0  # within the steps' 5-minute start-to-close timeout
MODEL_CALLS_PER_STEP = 3  # a malformed answer is asked again, this many calls in all
DEFAULT_PAID_ATTEMPTS = 3  # MODEL_PAID_ATTEMPTS: sent, unanswered calls a step may pay for
UNANSWERED = (
    "~unanswered-"  # a recorded call that was sent and never answered: `{key}~unanswered-…`
)
# An answer's size cap: every answer travels in a Temporal payload (2 MB at most, with the rest
# of the step's result) and is kept in model_calls.
DEFAULT_MAX_ANSWER_BYTES = 64 * 1024
MAX_ANSWER_BYTES_LIMIT = 1024 * 1024
REFUSED = "refused_answer"  # a recorded call whose answer was refused: {REFUSED: why}
# Our answers nest three deep; a parser that recurses (Python's json, pydantic, Postgres's jsonb)
# meets its limit in the thousands. An answer nested deeper than this is refused unparsed.
MAX_ANSWER_DEPTH = 32
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?')
_BRACKET = re.compile(r"[\[\]{}]")


def paid_attempts() -> int:
    """MODEL_PAID_ATTEMPTS (default 3, 1 to 20): how many times a step's call may be sent and
    go unanswered (each may be charged) before the step fails."""
    return int(env_number("MODEL_PAID_ATTEMPTS", DEFAULT_PAID_ATTEMPTS, minimum=1, maximum=20))


def max_answer_bytes() -> int:
    """MODEL_MAX_ANSWER_BYTES (default 65536, at most 1048576): the largest answer kept."""
    return int(
        env_number(
            "MODEL_MAX_ANSWER_BYTES",
            DEFAULT_MAX_ANSWER_BYTES,
            minimum=1,
            maximum=MAX_ANSWER_BYTES_LIMIT,
        )
    )


class _Unstorable(ValueError):
    """A number in an answer that jsonb cannot hold."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Unstorable(f"the number {text} (not finite)")
    return value


def _non_finite(text: str) -> float:
    raise _Unstorable(f"the non-finite number {text}")


def _bad_text(text: str) -> str | None:
    if "\x00" in text:
        return "a NUL character"
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        return "a lone surrogate"
    return None


def nesting(raw: str) -> int:
    """How deep the brackets outside strings nest in `raw`, JSON or not, in one pass (no
    recursion, whatever the depth)."""
    depth = deepest = 0
    for bracket in _BRACKET.findall(_STRING.sub("", raw)):
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth = max(0, depth - 1)
    return deepest


def unkeepable(raw: str, limit: int) -> str | None:
    """Why an answer cannot be kept — over `limit` bytes, nested deeper than MAX_ANSWER_DEPTH,
    or text Postgres's `jsonb` refuses (a NUL, a lone surrogate, a non-finite or out-of-range
    number) — or None. An answer that is not JSON at all can be kept (as `{"unparsed": text}`)
    and is asked again as malformed."""
    size = len(raw.encode("utf-8", "surrogatepass"))
    if size > limit:
        return f"it is {size} bytes, over MODEL_MAX_ANSWER_BYTES={limit}"
    if why := _bad_text(raw):
        return f"it contains {why}"
    if (depth := nesting(raw)) > MAX_ANSWER_DEPTH:
        return f"it nests {depth} deep, over {MAX_ANSWER_DEPTH}"
    try:
        parsed = json.loads(raw, parse_constant=_non_finite, parse_float=_finite)
    except _Unstorable as err:
        return f"it contains {err}"
    except json.JSONDecodeError:
        return None
    except ValueError:  # an integer past Python's digit limit
        return "it contains a number of too many digits"
    pending: list[object] = [parsed]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.values())
            texts = list(value)
        elif isinstance(value, list):
            pending.extend(value)
            continue
        else:
            texts = [value] if isinstance(value, str) else []
        for text in texts:
            if why := _bad_text(text):
                return f"it contains {why} (escaped)"
    return None


class UnrecordedAnswers:
    """Answers a model gave whose record failed (the database went away between the call and
    its insert), by the call's key, so that the step's next attempt in this process records
    them instead of paying for the calls again. Held by a worker or a DBOS process (bounded:
    the oldest are dropped) and lent to a step's attempts with `lend()`."""

    LIMIT = 1000

    def __init__(self) -> None:
        self._answers: dict[str, object] = {}

    @contextmanager
    def lend(self) -> Iterator[None]:
        token = _UNRECORDED.set(self)
        try:
            yield
        finally:
            _UNRECORDED.reset(token)

    def take(self, key: str) -> object | None:
        return self._answers.get(key)

    def keep(self, key: str, answer: object) -> None:
        self._answers[key] = answer
        while len(self._answers) > self.LIMIT:
            del self._answers[next(iter(self._answers))]

    def recorded(self, key: str) -> None:
        self._answers.pop(key, None)


# The answers lent to the step running in this task (None: none are kept between attempts).
_UNRECORDED: ContextVar[UnrecordedAnswers | None] = ContextVar("unrecorded", default=None)


async def _ask(model: Model, prompt: str) -> object:
    """One paid call: the answer as it is kept — its JSON, `{"unparsed": text}` for text that is
    not JSON, or `{REFUSED: why}` for an answer we cannot keep."""
    try:
        raw = await model.complete(prompt)
        why = unkeepable(raw, max_answer_bytes())
    except AnswerTooLarge as err:  # paid for, and not read to its end
        return {REFUSED: str(err)}
    if why is not None:
        return {REFUSED: why}
    raw = redact(raw)  # a model that echoes a configured key does not keep it
    try:
        answer: object = json.loads(raw)
    except json.JSONDecodeError:
        return {"unparsed": raw}
    return answer


async def _answer(
    conn: psycopg.AsyncConnection,
    model: Model,
    *,
    run_id: str,
    step: int,
    prompt: str,
    call_key: str | None,
) -> object:
    """Call `call_key`'s answer: the one recorded under it, or a new (paid) call's, recorded."""
    if call_key is not None:
        recorded = await find_by_key(conn, "model_calls", call_key, ["id", "response"])
        if recorded is not None:
            log_effect(
                EffectEvent.DUPLICATE_REFUSED,
                "model_calls",
                call_key,
                recorded[0],
                run_id=run_id,
                how="the recorded answer, not a new call",
            )
            return recorded[1]
    kept = _UNRECORDED.get() if call_key is not None else None
    answer = kept.take(call_key) if kept is not None and call_key is not None else None
    if answer is None:
        try:
            answer = await _ask(model, prompt)
        except ModelNoAnswer as err:
            if call_key is not None:
                await _unanswered(conn, run_id=run_id, step=step, prompt=prompt, key=call_key,
                                  why=str(err))  # fmt: skip
            raise
    elif call_key is not None:
        log.info("%s: the answer paid for in an earlier attempt, recorded now", call_key)
    if kept is not None and call_key is not None:
        kept.keep(call_key, answer)
    values = {"run_id": run_id, "step": step, "prompt": prompt, "response": Jsonb(answer)}
    row = await insert_once(conn, "model_calls", values, call_key, ["id", "response"])
    if kept is not None and call_key is not None:
        kept.recorded(call_key)
    return row[1]


async def _unanswered(
    conn: psycopg.AsyncConnection, *, run_id: str, step: int, prompt: str, key: str, why: str
) -> None:
    """Record a call that was sent and not answered (the provider may charge for it) under
    `{key}~unanswered-N`; ModelBudgetSpent once MODEL_PAID_ATTEMPTS of them are recorded for
    `key`, on any engine and across attempts, workers and restarts."""
    values = {"run_id": run_id, "step": step, "prompt": prompt,
              "response": Jsonb({"unanswered": redact(why)[:500]})}  # fmt: skip
    cur = await conn.execute(
        "select count(*) from model_calls where starts_with(idempotency_key, %s)"
        " and position('~superseded-' in idempotency_key) = 0",
        (key + UNANSWERED,),
    )
    row = await cur.fetchone()
    paid = (row[0] if row else 0) + 1
    await insert_once(conn, "model_calls", values, f"{key}{UNANSWERED}{paid}", ["id"])
    if paid >= (allowed := paid_attempts()):
        raise ModelBudgetSpent(
            f"step {step} ({prompt_task(prompt)}): the model did not answer on {paid} paid "
            f"attempts (MODEL_PAID_ATTEMPTS={allowed}): {redact(why)}; not asked again (each "
            "may be charged): raise MODEL_TIMEOUT_S if the model is slow, or "
            "MODEL_PAID_ATTEMPTS"
        )


async def call_model(
    conn: psycopg.AsyncConnection,
    model: Model,
    *,
    run_id: str,
    step: int,
    prompt: str,
    output_type: type[T],
    key: str | None,
) -> T:
    """Ask the model, record the call, return the validated answer. An answer that is not the
    JSON asked for is asked again with a fresh call, up to MODEL_CALLS_PER_STEP calls, each
    recorded (and paid for), before the step fails. An answer we cannot keep is recorded as
    refused and fails the step at once (`ModelAnswerRefused`).

    With a key, call n is recorded under `key` (n = 1) or `key#n`, and an answer already
    recorded under that key is used instead of calling the model: a retried step pays for no
    call twice, a malformed or refused one included. An answer whose record failed is kept for
    the step's next attempt in this process, when its engine lends it `UnrecordedAnswers`.
    """
    for n in range(1, MODEL_CALLS_PER_STEP + 1):
        call_key = None if key is None else key if n == 1 else f"{key}#{n}"
        response = await _answer(
            conn, model, run_id=run_id, step=step, prompt=prompt, call_key=call_key
        )
        if isinstance(response, dict) and set(response) == {REFUSED}:
            raise ModelAnswerRefused(
                f"step {step} ({prompt_task(prompt)}): the model's answer is refused: "
                f"{response[REFUSED]}; not asked again (that would pay again)"
            )
        try:
            return _validate(output_type, response, step)
        except ModelOutputError as err:
            if n == MODEL_CALLS_PER_STEP:
                raise ModelOutputError(f"{err}; {n} calls, none usable") from None
            log.warning("%s; asking again (call %d of %d)", err, n + 1, MODEL_CALLS_PER_STEP)
    raise AssertionError("unreachable")


async def forget_recorded_answers(conn: psycopg.AsyncConnection, run_id: str) -> int:
    """Let a run that failed be run again: its recorded model answers (a malformed one, or a
    choice the guardrails refused) stop answering for their keys, so the model is asked again.
    The rows stay, renamed, as the record of calls that were paid for. Orders and emails keep
    their keys: an order the failed run placed is found, not placed again."""
    cur = await conn.execute(
        "update model_calls set idempotency_key = idempotency_key || '~superseded-' || id"
        " where run_id = %s and idempotency_key is not null"
        " and idempotency_key not like '%%~superseded-%%'",
        (run_id,),
    )
    return cur.rowcount


def _validate(output_type: type[T], response: object, step: int) -> T:
    try:
        return output_type.model_validate(response)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        raise ModelOutputError(
            f"model output for step {step} is not a valid {output_type.__name__}: "
            f"{where}: {first['msg']} (got {json.dumps(response)[:120]})"
        ) from None
