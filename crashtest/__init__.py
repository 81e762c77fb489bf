"""crashtest: crash-test any Temporal workflow at every boundary of its run.

A worker interceptor SIGKILLs the worker's own process at a boundary (`crashtest.interceptor`), a
fresh worker finishes the run, and the user's view of the final state is compared with a run that
never crashed (`crashtest.runner`). `python -m crashtest run --help` for the command line;
`crashtest.pytest_plugin` for tests. Depends on temporalio and the standard library only.
"""
