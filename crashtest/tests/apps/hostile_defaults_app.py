"""A workflow whose activity class's constructor has a default that ends a docstring and runs
code (it writes the file named by HOSTILE_MARK): the scaffold quotes the constructor's signature
into the hooks file it writes, which must stay text."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow


class Tools:
    def __init__(
        self,
        token: str,
        note: str = '"""; import os; open(os.environ["HOSTILE_MARK"], "w"); """',
    ) -> None:
        self.token, self.note = token, note

    @activity.defn
    async def act(self) -> None:
        return None


@workflow.defn
class HostileDefaults:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity_method(
            Tools.act, start_to_close_timeout=timedelta(seconds=5)
        )
