"""The HTTP observer's recorder, in a process of its own as in a worker: every library it watches
records each effectful request before sending it, and what it writes holds no secret."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from temporal_crashtest import HttpObserver
from temporal_crashtest._observers.http import observed, requests_of, start_record, unattributed
from temporal_crashtest._worker.http.urls import masked_path
from temporal_crashtest._worker.http_record import (
    LOG_NAME,
    Sender,
    _Recorder,
    _Settings,
    set_sender,
)

PROGRAM = Path(__file__).parent / "http_libraries.py"
sys.path.insert(0, str(Path(__file__).parent / "apps"))
from http_effects_app import LIBRARIES  # noqa: E402


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_every_library_records_each_effect_before_sending_it(tmp_path: Path) -> None:
    here, other = f"127.0.0.1:{closed_port()}", f"127.0.0.1:{closed_port()}"
    observer = HttpObserver(hosts=(here,), paid=(f"{here}/v1/",))
    env = {**os.environ, **start_record(observer, tmp_path)}
    done = subprocess.run(
        [sys.executable, str(PROGRAM), f"http://{here}", f"http://{other}"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    used = json.loads(done.stdout)
    assert {"urllib.request", "http.client"} <= set(used), used
    assert {"httpx", "httpx2", "requests", "aiohttp", "urllib3"} & set(used), used

    log = tmp_path / LOG_NAME
    rows = requests_of(log, "wf-libraries")
    sent = {(r["library"], r["method"], r["target"]) for r in rows}
    state = observed(log, "wf-libraries")
    if "botocore" in used:  # boto3's S3, SQS, SES: through urllib3
        assert ("urllib3", "PUT", f"{here}/botocore/charges") in sent, sent
        used.remove("botocore")
    for name in used:
        library = LAYER.get(name, name.removesuffix("-async"))
        # Nothing listens: every request failed, and each effectful one was recorded first.
        assert (library, "POST", f"{here}/{name}/charges") in sent, (name, sent)
        # Sent twice with one key: the receiver refuses the repeat, so it counts once.
        assert state["requests"][f"POST {here}/{name}/charges"] == 1
        assert state["requests"][f"POST {here}/{name}/mail"] == 1
        assert state["paid calls"][f"PUT {here}/v1/{name}/answer"] == 1
    assert not [r for r in rows if r["method"] == "GET"], "a GET is not an effect"
    assert not [r for r in rows if r["target"].startswith(other)], "a host not watched"
    assert {r["boundary"] for r in rows} == {"test"}
    text = log.read_text()
    for secret in ("sk-planted-header-secret-4242", "planted-query-secret-4242", "k-httpx",
                   "AKIAPLANTEDKEY", "planted-aws-secret"):  # fmt: skip
        assert secret not in text


# The layer that sees a library's requests: the one it stands on.
LAYER = {"requests": "urllib3", "urllib.request": "http.client"}


def test_a_repeat_without_a_key_is_the_duplicate(tmp_path: Path) -> None:
    log = tmp_path / LOG_NAME
    rows = [
        {"root": "wf", "method": "POST", "target": "h/charges", "key": None, "paid": False},
        {"root": "wf", "method": "POST", "target": "h/charges", "key": None, "paid": False},
        {"root": "wf", "method": "POST", "target": "h/mail", "key": "a1", "paid": False},
        {"root": "wf", "method": "POST", "target": "h/mail", "key": "a1", "paid": False},
        {"root": "wf", "method": "POST", "target": "h/mail", "key": "b2", "paid": False},
        {"root": "other", "method": "POST", "target": "h/mail", "key": None, "paid": False},
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"root": "wf", "meth')
    assert observed(log, "wf") == {
        "requests": {"POST h/charges": 2, "POST h/mail": 2},
        "paid calls": {},
    }


# (URL, what is written of it): every secret shape the probe planted, and names that stay.
MASKED = [
    ("http://h/bot123456:AAH-secret_token/sendMessage", "h/:id/sendMessage"),
    ("http://h/v1/customers/cus_9Xh2k3LmN0/charges", "h/v1/customers/:id/charges"),
    ("http://h/v1/chat/completions", "h/v1/chat/completions"),
    ("http://h/cart;jsessionid=0123456789ABCDEF", "h/cart;:id"),
    ("http://h/v1/aGVsbG8+d29ybGQ=/x", "h/v1/:id/x"),
    ("http://h/t/%73%6b%2d%6c%69%76%65%61%62%63", "h/t/:id"),
    ("http://h/hooks/sk-live-abcdefghij", "h/hooks/:id"),
    ("http://h/key=hunter2", "h/key=:id"),
    ("http://h/ghp_abcdefghijklmnop/x", "h/:id/x"),
    ("http://sk-live-abc.hooks.example.com/in", ":id.hooks.example.com/in"),
    ("http://abcd1234efgh5678.ngrok.io:8080/in", ":id.ngrok.io:8080/in"),
    ("http://127.0.0.1:9/httpx2-async/sendMessage", "127.0.0.1:9/httpx2-async/sendMessage"),
    ("https://api.openai.com/v1/chat/completions", "api.openai.com/v1/chat/completions"),
    # A base64 token holds `/`: split on it, each piece was too short to be masked.
    ("http://h/t/UGFzc3dk/S2V5+MTIzNA==/slot", "h/t/:id/:id/slot"),
    ("http://h/t/UGFzc3dk/S2V5%2BMTIzNA%3D%3D/slot", "h/t/:id/:id/slot"),
    ("http://h/a/Zm9vYmFy/YmF6cXV4/end", "h/a/:id/:id/end"),
]


def test_ids_and_tokens_in_paths_and_hosts_are_masked(tmp_path: Path) -> None:
    log = tmp_path / LOG_NAME
    start_record(HttpObserver(), tmp_path)
    recorder = _Recorder(_Settings(HttpObserver(), log))
    set_sender(Sender("wf", "send", 1))
    for url, _ in MASKED:
        recorder.record("test", "POST", url, None, None)
    assert [r["target"] for r in requests_of(log, "wf")] == [shown for _, shown in MASKED]
    for secret in ("0123456789ABCDEF", "aGVsbG8", "%73", "sk-live", "hunter2", "ghp_", "abcd1234",
                   "UGFzc3dk", "MTIzNA", "Zm9vYmFy", "YmF6cXV4"):  # fmt: skip
        assert secret not in log.read_text(), secret
    assert masked_path("/orders") == "/orders"


def test_nothing_to_observe_and_a_url_for_a_host_are_one_line_each() -> None:
    run = [sys.executable, "-m", "temporal_crashtest", "run", "--worker", "x:y", "--workflow", "W",
           "--input", "1"]  # fmt: skip
    for extra, said in [
        ([], "nothing observes the runs: give an observe function (--observe MODULE:FUNC)"),
        (["--http", "https://api.stripe.com"], "an HTTP host is HOST, HOST:PORT"),
        (["--http-paid", "api.x.test"], "--http-paid and --http-key-header go with --http"),
    ]:
        done = subprocess.run([*run, *extra], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0], lines


THREADS = Path(__file__).parent / "http_threads.py"


def test_requests_from_other_threads_are_the_activitys_or_said_to_be_no_ones(
    tmp_path: Path,
) -> None:
    """A request an activity sends through `run_in_executor`, a thread pool or a thread of its
    own is the activity's (context variables cross none of them by themselves: these were once
    in no run's state, a silent empty state). One from a thread started before any activity is
    the process's one run's; with two runs in the process, no one's, and the crash test says
    so (`unattributed`)."""
    pytest.importorskip("httpx")
    here = f"127.0.0.1:{closed_port()}"
    for roots in (["wf-a"], ["wf-a", "wf-b"]):
        folder = tmp_path / str(len(roots))
        folder.mkdir()
        env = {**os.environ, **start_record(HttpObserver(hosts=(here,)), folder)}
        done = subprocess.run([sys.executable, str(THREADS), f"http://{here}", ",".join(roots)],
                              env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        log = folder / LOG_NAME
        for root in roots:
            sent = {r["target"] for r in requests_of(log, root)}
            assert {f"{here}/executor", f"{here}/pool", f"{here}/thread"} <= sent, sent
        early = f"{here}/early"
        if len(roots) == 1:
            assert early in {r["target"] for r in requests_of(log, "wf-a")}
            assert unattributed(log) is None
        else:
            said = unattributed(log)
            assert said is not None and f"1 x POST {early}" in said, said


def test_an_unkeyed_post_sent_through_an_executor_is_caught(
    app_env: dict[str, str], tmp_path: Path
) -> None:
    """The probe's false ✓: an async activity that POSTs through `run_in_executor` without a key
    (apps/executor_app.py). Its requests were in no run's state (`{"requests": {}}`), every
    point ✓; now the repeat after a kill is the ✗ it is in production."""
    pytest.importorskip("httpx")
    here = f"127.0.0.1:{closed_port()}"
    env = {**app_env, "NOTIFY_URL": f"http://{here}/notify"}
    args = [sys.executable, "-m", "temporal_crashtest", "run", "--worker", "executor_app:build",
            "--workflow", "executor_app:NotifyWorkflow", "--input", '["a", "b"]',
            "--http", here, "--json", str(tmp_path / "report.json")]  # fmt: skip
    done = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 1, done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["reference"] == {"requests": {f"POST {here}/notify": 2}, "paid calls": {}}
    failed = {c["crash_at"] for c in report["cells"] if not c["matches"]}
    assert {"after-effect:1", "after-effect:2"} <= failed, done.stderr


class _Orders(ThreadingHTTPServer):
    """An order service: counts each POST to /RUN/LIBRARY; GET /counts/RUN answers them."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Order)
        self.counts: dict[str, dict[str, int]] = {}


class _Order(BaseHTTPRequestHandler):
    server: _Orders

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        run, _, library = self.path.strip("/").rpartition("/")
        counts = self.server.counts.setdefault(run, {})
        counts[library] = counts.get(library, 0) + 1
        self._answer(b"{}")

    def do_GET(self) -> None:
        run = self.path.removeprefix("/counts/")
        self._answer(json.dumps(self.server.counts.get(run, {})).encode())


def test_every_way_python_sends_http_is_a_crash_point_without_http(
    app_env: dict[str, str], tmp_path: Path
) -> None:
    """The probe's false ✓: look the key up, POST the order, mark it done, observed by the order
    service's own count. The POST was a crash point only with --http, and never through urllib,
    urllib3 (boto3) or http.client: "every point ends in the no-crash state" while a kill between
    the POST and the mark books twice. Now each library's POST is a point with --observe alone,
    and ✗; a POST through a raw socket, which nothing watches, is said to be untested."""
    libraries = [n for n in LIBRARIES if n == "socket" or importlib.util.find_spec(n.split(".")[0])]
    orders = _Orders()
    threading.Thread(target=orders.serve_forever, daemon=True).start()
    env = {**app_env, "ORDERS_URL": f"http://127.0.0.1:{orders.server_address[1]}"}
    args = [sys.executable, "-m", "temporal_crashtest", "run", "--worker", "http_effects_app:build",
            "--workflow", "http_effects_app:OrderThroughEach", "--input", json.dumps(libraries),
            "--observe", "http_effects_app:observe", "--points", "effect",
            "--json", str(tmp_path / "report.json")]  # fmt: skip
    try:
        done = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=240)  # fmt: skip
    finally:
        orders.shutdown()
    assert done.returncode == 1, done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["reference"] == {library: 1 for library in libraries}
    posts = {c["crash_at"]: c for c in report["cells"] if "POST" in c["activity"]}
    sent = [n for n in libraries if n != "socket"]
    assert sorted(posts) == [f"effect:{i}.1" for i in range(1, len(sent) + 1)], report["cells"]
    assert all(not c["matches"] and "1 → 2" in c["diff"] for c in posts.values()), posts
    marks = [c for c in report["cells"] if "COMMIT marks" in c["activity"]]
    assert len(marks) == len(libraries) and all(c["matches"] for c in marks), marks
    unseen = [u for u in report["untested"] if "does not watch" in u["why"]]
    assert [u["boundary"].rpartition(": ")[2] for u in unseen] == [
        f"POST 127.0.0.1:{orders.server_address[1]}/:id/socket"
    ], report["untested"]
