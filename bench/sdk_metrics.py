"""The Temporal SDK's own view of a step: its Prometheus histograms, read back after a bench.

The bench's client and worker share a runtime that exports metrics on a loopback port; the mean
of each histogram (sum / count) says how long the worker spent on a task and how long each call
to the server took.
"""

from __future__ import annotations

import re
import urllib.request

from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from infra.processes import free_port

# (metric, operation label or None) -> what it measures.
LEGS = {
    ("temporal_workflow_task_schedule_to_start_latency", None): (
        "server: workflow task scheduled -> handed to the worker"
    ),
    ("temporal_workflow_task_execution_latency", None): "worker: run the workflow code",
    ("temporal_request_latency", "RespondWorkflowTaskCompleted"): (
        "server: RespondWorkflowTaskCompleted call"
    ),
    ("temporal_activity_execution_latency", None): "worker: run the activity",
    ("temporal_request_latency", "RespondActivityTaskCompleted"): (
        "server: RespondActivityTaskCompleted call"
    ),
}
_SAMPLE = re.compile(r"^(\w+)_(sum|count)\{(.*)\} ([0-9.e+-]+)$")


def runtime_with_metrics() -> tuple[Runtime, str]:
    port = free_port()
    runtime = Runtime(
        telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=f"127.0.0.1:{port}"))
    )
    return runtime, f"http://127.0.0.1:{port}/metrics"


def mean_latencies_ms(metrics_url: str) -> dict[str, float]:
    """The mean of each histogram in LEGS, in milliseconds, over everything the runtime saw."""
    with urllib.request.urlopen(metrics_url, timeout=5) as response:
        text = response.read().decode()
    totals: dict[tuple[str, str | None], dict[str, float]] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match:
            continue
        name, kind, labels, value = match.groups()
        op = re.search(r'operation="(\w+)"', labels)
        key = (name, op.group(1) if op and (name, op.group(1)) in LEGS else None)
        if key in LEGS:
            totals.setdefault(key, {"sum": 0.0, "count": 0.0})[kind] += float(value)
    return {
        LEGS[key]: round(t["sum"] / t["count"], 2)
        for key in LEGS
        if (t := totals.get(key)) and t["count"]
    }
