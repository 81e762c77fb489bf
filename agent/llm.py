"""The language model (LLM) behind a small protocol, the deterministic stub, and the recorded call.

Every call is recorded in `model_calls` before its answer is returned. A call made with an
idempotency key first looks for a recorded answer under that key and reuses it: a retried step
does not pay for the same call twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Protocol, TypeVar

import psycopg
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ValidationError

from agent.effects import find_by_key, insert_once
from infra.errors import AgentError

T = TypeVar("T", bound=BaseModel)

CATALOGUE = ("milk", "eggs", "bread", "coffee", "apples", "rice", "oats", "tomatoes", "cheese")


class ModelOutputError(AgentError):
    """The model answered, but not with the JSON the step asked for. Retrying will not help."""


class Model(Protocol):
    async def complete(self, prompt: str) -> str:
        """Answer a prompt with text (the steps ask for JSON)."""
        ...


def make_prompt(task: str, instruction: str, payload: BaseModel | dict[str, object]) -> str:
    data = payload.model_dump() if isinstance(payload, BaseModel) else payload
    return f"task: {task}\n{instruction}\ninput: {json.dumps(data, sort_keys=True)}"


def _score(*parts: str) -> int:
    """A stable pseudo-random number (Python's hash() changes from process to process)."""
    return int.from_bytes(hashlib.sha256("|".join(parts).encode()).digest()[:4], "big")


class StubModel:
    """A deterministic stand-in for an LLM: the same prompt always gets the same answer.

    `latency_s` makes it 'think' so that a person can kill a run in the middle of a call.
    """

    def __init__(self, latency_s: float = 0.0) -> None:
        self.latency_s = latency_s

    async def complete(self, prompt: str) -> str:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        header, _, rest = prompt.partition("\n")
        task = header.removeprefix("task: ")
        data = json.loads(rest.rpartition("input: ")[2])
        if task == "plan":
            household = data["household"]
            staples = sorted(CATALOGUE, key=lambda item: _score(household, item))[:6]
            answer: dict[str, object] = {
                "staples": staples,
                "note": f"weekly staples for {household}",
            }
        elif task == "choose":
            answer = {
                "lines": [
                    {"item": item, "quantity": 1 + _score("qty", item) % 3}
                    for item in data["missing"]
                ]
            }
        elif task == "summarise":
            items = ", ".join(f"{line['quantity']} x {line['item']}" for line in data["lines"])
            answer = {
                "text": f"Order #{data['order_id']} placed ({items}); "
                f"confirmation sent to {data['recipient']}."
            }
        else:
            raise ValueError(f"the stub model has no answer for task {task!r}")
        return json.dumps(answer)


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
    """Ask the model, record the call, return the validated answer.

    With a key, an answer already recorded under it is returned without calling the model.
    """
    if key is not None:
        recorded = await find_by_key(conn, "model_calls", key, ["response"])
        if recorded is not None:
            return _validate(output_type, recorded[0], step)

    raw = await model.complete(prompt)
    try:
        response: object = json.loads(raw)
    except json.JSONDecodeError:
        response = {"unparsed": raw}
    values = {"run_id": run_id, "step": step, "prompt": prompt, "response": Jsonb(response)}
    (response,) = await insert_once(conn, "model_calls", values, key, ["response"])
    return _validate(output_type, response, step)


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
