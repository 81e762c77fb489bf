"""A real model behind the agent's small `Model` protocol: any OpenAI-compatible chat-completions
endpoint (`MODEL=openai`, `MODEL_BASE_URL`, `MODEL_API_KEY`, `MODEL_NAME`), through the
maintained `openai` client.

The client does not retry: Temporal does (the activity's retry policy), and a retry of an
answered call is prevented by the call's record, not by the client. A 429, a 5xx, no answer or a
timeout is `ModelUnavailable` (retried); any other 4xx is `ModelRefused` (the run fails with the
provider's reason). The answer is validated like the stub's.

No key closes one window: a provider charges for a call whose answer we never recorded (the
worker dies after the provider answered and before the record was written), and the retry pays
again.
"""

from __future__ import annotations

import openai

from agent.model_errors import ModelRefused, ModelUnavailable
from infra.redaction import redact

SYSTEM = "You are a grocery assistant. Answer with the JSON object asked for, nothing else."


class OpenAIModel:
    def __init__(self, base_url: str, api_key: str, name: str, timeout_s: float) -> None:
        self.base_url = base_url
        self.name = name
        self.client = openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0
        )

    async def complete(self, prompt: str) -> str:
        try:
            response = await self.client.chat.completions.create(
                model=self.name,
                messages=[
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": prompt},
                ],
            )
        except openai.APIStatusError as err:
            # Hidden before it is raised: an activity's failure is kept in the Temporal history.
            what = redact(
                f"the model at {self.base_url} answered {err.status_code}: {_message(err)}"
            )
            if err.status_code == 429 or err.status_code >= 500:
                raise ModelUnavailable(what) from None
            raise ModelRefused(what) from None
        except openai.APIConnectionError as err:  # a timeout is one too
            raise ModelUnavailable(
                redact(f"no answer from the model at {self.base_url}: {err}")
            ) from None
        if not response.choices:
            return ""
        return response.choices[0].message.content or ""


def _message(err: openai.APIStatusError) -> str:
    body = err.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return err.message
