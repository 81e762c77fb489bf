"""Benchmarks: what a checkpoint, a Temporal step and a recovery cost."""
