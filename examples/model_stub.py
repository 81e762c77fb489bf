"""A local model provider for the order agents (`examples/order_agent.py`, and the same agent in
TypeScript, `examples/typescript/src/agent.ts`): an OpenAI-compatible `POST /v1/chat/completions`
that answers from the conversation it is sent, never from a counter (a worker that takes over
after a kill asks again with the same conversation and must get the same answer):

- no tool result yet: call `place_order` (2 of the item the user asked for) and `send_message`
  (to sam, saying so);
- otherwise: the final answer, in words.

Each choice says why the model stopped (`finish_reason`: `tool_calls`, else `stop`), as OpenAI's
API does: the AI SDK (`@temporalio/ai-sdk`) runs the tools a reply calls only when it says so.

`serving()` runs it on a free port of 127.0.0.1 in a thread of the caller's process;
`python -m examples.model_stub` runs it until stopped and prints its URL.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def answer(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant's next message for `messages` (OpenAI's chat format)."""
    if any(m.get("role") == "tool" for m in messages):
        return {"role": "assistant", "content": "Ordered, and sam knows."}
    asked = next((m["content"] for m in messages if m.get("role") == "user"), "")
    item = str(asked).rsplit(" ", 1)[-1] or "milk"
    calls = [
        ("place_order", {"item": item, "quantity": 2}),
        ("send_message", {"to": "sam", "text": f"2 x {item} ordered"}),
    ]
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for n, (name, arguments) in enumerate(calls, 1)
        ],
    }


class _Completions(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            messages = json.loads(self.rfile.read(length))["messages"]
        except (ValueError, KeyError, TypeError):
            self.send_error(400, "expected a JSON body with messages")
            return
        if self.path.split("?")[0] != "/v1/chat/completions":
            self.send_error(404)
            return
        message = answer(messages)
        finish = "tool_calls" if message.get("tool_calls") else "stop"  # as OpenAI says it
        choice = {"index": 0, "message": message, "finish_reason": finish}
        body = json.dumps({"object": "chat.completion", "choices": [choice]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:  # no access log
        pass


@contextmanager
def serving() -> Iterator[str]:
    """The stub on a free port; yields its base URL (`http://127.0.0.1:PORT/v1`)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Completions)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="model-stub", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    with serving() as url:
        print(url, flush=True)
        threading.Event().wait()
