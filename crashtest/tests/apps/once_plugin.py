"""A plugin function that, like LangGraph's, may be built once per process only (it rewrites
what it is given): a second call in the same process raises."""

from __future__ import annotations

from temporalio.plugin import SimplePlugin

_built: list[int] = []  # this process's calls: the point of the app is to count them


def plugin() -> SimplePlugin:
    if _built:
        raise RuntimeError("the plugin was built twice in one process")
    _built.append(1)
    return SimplePlugin("once")
