"""An OpenAI-compatible chat-completions server on 127.0.0.1, for the model adapter's tests: a
real HTTP exchange with the real `openai` client. It answers as the stub model would, unless the
test has scripted a failure for the coming requests ("429", "400", "echo-auth": a 400 that
echoes the request's Authorization header, as careless providers do), or a hostile answer for a
step (`hostile[task] = text`: that step's prompt gets `text`, whoever asks, as a real model
answers from the conversation), or a slow one (`slow[task] = seconds` before it answers). `asked`
counts the calls answered per step, `received` every call that reached it (each may be paid)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque

from aiohttp import web

from agent.llm import StubModel, prompt_task
from infra.processes import free_port


class FakeOpenAI:
    def __init__(self) -> None:
        self.script: deque[str] = deque()  # what the coming requests get; then answers
        self.requests = 0
        self.hostile: dict[str, str] = {}  # a step's name -> the answer its prompt gets
        self.asked: Counter[str] = Counter()  # a step's name -> the calls answered for it
        self.received: Counter[str] = Counter()  # a step's name -> the calls that reached it
        self.slow: dict[str, float] = {}  # a step's name -> seconds before its answer
        self.stub = StubModel()
        self.runner: web.AppRunner | None = None
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def env(self, api_key: str = "test-key") -> dict[str, str]:
        """The settings that point the agent's model at this server."""
        return {"MODEL": "openai", "MODEL_BASE_URL": self.base_url, "MODEL_NAME": "grocer-llm",
                "MODEL_API_KEY": api_key}  # fmt: skip

    async def start(self) -> None:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._completions)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def _completions(self, request: web.Request) -> web.Response:
        self.requests += 1
        body = await request.json()
        scripted = self.script.popleft() if self.script else "answer"
        if scripted == "429":
            return web.json_response(
                {"error": {"message": "Rate limit reached for requests", "type": "requests"}},
                status=429,
            )
        if scripted == "echo-auth":
            return web.json_response(
                {"error": {"message": f"Invalid credentials: {request.headers['Authorization']}",
                           "type": "invalid_request_error"}},
                status=400,
            )  # fmt: skip
        if scripted == "400":
            return web.json_response(
                {"error": {"message": f"The model `{body['model']}` does not exist",
                           "type": "invalid_request_error"}},
                status=400,
            )  # fmt: skip
        prompt = body["messages"][-1]["content"]
        self.received[prompt_task(prompt)] += 1
        await asyncio.sleep(self.slow.get(prompt_task(prompt), 0))
        self.asked[prompt_task(prompt)] += 1
        content = self.hostile.get(prompt_task(prompt)) or await self.stub.complete(prompt)
        return web.json_response({
            "id": f"chatcmpl-{self.requests}", "object": "chat.completion",
            "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        })  # fmt: skip
