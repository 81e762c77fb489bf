"""The wire between a worker and the Temporal server, through a proxy the crash test runs.

A worker written with any Temporal SDK (Go, Java, TypeScript, .NET, Ruby, PHP, Python) reaches
the server only over gRPC; every moment the crash test kills at is a call on that wire (an
activity's completion, a workflow task's commands). `forward.WireProxy` passes every call through
untouched; `tasks.WireTasks` reads the activity tasks handed out and ended on it;
`status.WireStatus` keeps what a worker says of itself, read off the wire; `kill.KillAtSite`
kills a worker's process group at a crash point's moment (`kill.KillAtCompletion`: at the n-th
activity completion), which the server then never hears, or hears alone;
`recover.end_workflow_tasks` ends the workflow tasks a dead worker held. `run --worker-cmd`
starts each worker command behind a proxy of its own (`_workers`).
"""
