"""Crash points: the moments and how a point is written and read (`points`), and what a worker is
told and what an activity carries (`sites`). Standard library and temporalio's payloads only."""
