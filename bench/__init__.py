"""Benchmarks: what a checkpoint, a replayed step, a Temporal step (activity and local activity),
a recovery after a SIGKILL and a whole crash test cost, throughput on both engines, and how each
grows (`--scale`). Every figure is a median and p99 beside a baseline measured in the same run."""
