"""The wire between a worker and the Temporal server, through a proxy the crash test runs.

A worker written with any Temporal SDK (Go, Java, TypeScript, .NET, Ruby, PHP, Python) reaches
the server only over gRPC; every moment the crash test kills at is a call on that wire (an
activity's completion, a workflow task's commands). `forward.WireProxy` passes every call through
untouched; `tasks.WireTasks` reads the activity tasks handed out and ended on it;
`kill.KillAtCompletion` kills a worker's process group as it sends an activity's completion,
which the server then never hears, or hears alone; `recover.end_workflow_tasks` ends the
workflow tasks a dead worker held.
"""

from temporal_crashtest._wire.forward import Pass, Watcher, WireProxy
from temporal_crashtest._wire.kill import KillAtCompletion, kill_group
from temporal_crashtest._wire.tasks import ActivityTask, TaskEnd, WireTasks

__all__ = [
    "ActivityTask",
    "KillAtCompletion",
    "Pass",
    "TaskEnd",
    "Watcher",
    "WireProxy",
    "WireTasks",
    "kill_group",
]
