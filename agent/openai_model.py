"""A real model behind the agent's small `Model` protocol: any OpenAI-compatible chat-completions
endpoint (`MODEL=openai`, `MODEL_BASE_URL`, `MODEL_API_KEY`, `MODEL_NAME`), through the
maintained `openai` client.

The client does not retry: Temporal does (the activity's retry policy), and a retry of an
answered call is prevented by the call's record, not by the client. Every response body is read
through a size cap (`CappedTransport`): a provider that sends more than an answer can hold is
cut off as it streams, not after the whole body sits in memory (`AnswerTooLarge`). A 429, a
5xx or no connection is `ModelUnavailable` (retried); a request sent and not answered (a timeout,
a dropped connection) is `ModelNoAnswer`, retried within the step's budget of paid attempts
(`agent.llm`); any other 4xx is `ModelRefused` (the run fails with the provider's reason). The
answer is validated like the stub's.

No key closes one window: a provider charges for a call whose answer we never recorded (the
worker dies after the provider answered and before the record was written), and the retry pays
again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import openai

from agent.model_errors import AnswerTooLarge, ModelNoAnswer, ModelRefused, ModelUnavailable
from infra.redaction import redact

# The transport's errors that mean the request never left (no connection was made): not paid.
NOT_SENT = frozenset({"ConnectError", "ConnectTimeout", "PoolTimeout", "UnsupportedProtocol"})
# A response body holds the answer JSON-escaped (a control character takes 6 bytes), with the
# rest of the completion around it.
ESCAPED_BYTES_PER_BYTE = 6
ENVELOPE_BYTES = 64 * 1024


def body_cap(max_answer_bytes: int) -> int:
    """The most bytes a response body may have for an answer of `max_answer_bytes`."""
    return ESCAPED_BYTES_PER_BYTE * max_answer_bytes + ENVELOPE_BYTES


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, max_answer_bytes: int) -> None:
        self.inner, self.max_answer_bytes = inner, max_answer_bytes
        self.cap = body_cap(max_answer_bytes)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self.inner:
            read += len(chunk)
            if read > self.cap:
                raise AnswerTooLarge(
                    f"its response passed {self.cap} bytes, more than an answer of "
                    f"MODEL_MAX_ANSWER_BYTES={self.max_answer_bytes} takes, and was cut off there"
                )
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class CappedTransport(httpx2.AsyncHTTPTransport):
    """An HTTP transport whose response bodies end in `AnswerTooLarge` past `body_cap` bytes."""

    def __init__(self, max_answer_bytes: int) -> None:
        super().__init__()
        self.max_answer_bytes = max_answer_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _CappedStream(response.stream, self.max_answer_bytes)
        return response


SYSTEM = "You are a grocery assistant. Answer with the JSON object asked for, nothing else."


class OpenAIModel:
    def __init__(
        self, base_url: str, api_key: str, name: str, timeout_s: float, max_answer_bytes: int
    ) -> None:
        self.base_url = base_url
        self.name = name
        self.timeout_s = timeout_s
        self.client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key,
            timeout=timeout_s,
            max_retries=0,
            http_client=httpx2.AsyncClient(
                transport=CappedTransport(max_answer_bytes), timeout=timeout_s
            ),
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
            if isinstance(err.__cause__, AnswerTooLarge):  # raised while the body was read
                raise err.__cause__ from None
            what = redact(f"no answer from the model at {self.base_url}: {err}")
            if type(err.__cause__).__name__ in NOT_SENT:
                raise ModelUnavailable(what) from None
            raise ModelNoAnswer(  # sent: the provider may have answered, and charged
                f"{what} (MODEL_TIMEOUT_S={self.timeout_s:g})"
                if isinstance(err, openai.APITimeoutError)
                else what
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
