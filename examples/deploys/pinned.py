"""Worker Versioning, pinned: each version's worker is a version of a Worker Deployment (one per
task queue, so that crash tests running at once never share it), every workflow pinned to the
version it started on, and each worker makes its version the current one once it polls (what a
deploy does once the new workers are up: `temporal worker deployment set-current-version`). A
pinned run never replays on another version — so no patch is needed — and needs a worker of its
own version until it ends: when the old version's last worker dies mid-run, the run waits for
one forever. A run killed inside its first workflow task is pinned to nothing yet: it moves to
the version made current after it."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker, WorkerDeploymentConfig

from examples.deploys.steps import order_worker


class CurrentOnStart(Worker):
    """A versioned worker that makes its version the deployment's current one as it starts
    (not when it is built: a worker built early, to take over later, must not take the runs
    that the version before it is still starting), as a deploy does: it polls first, then sets
    its version current once the server has its poll. (Set first, the server refused v2 — "is
    missing active task queues from the current version" — and the worker never polled; before
    v1 it had, through the deployment's own workflow, taken over 20 s on a loaded machine, or
    outrun its deadline.)"""

    async def run(self) -> None:
        polling = asyncio.create_task(super().run())
        try:
            await self._make_current(polling)
        except BaseException:
            polling.cancel()
            raise
        await polling

    async def _make_current(self, polling: asyncio.Task[None]) -> None:
        deployment = self.config().get("deployment_config")
        assert deployment is not None
        request = SetWorkerDeploymentCurrentVersionRequest(
            namespace=self.client.namespace,
            deployment_name=deployment.version.deployment_name,
            build_id=deployment.version.build_id,
            allow_no_pollers=True,  # the first version: its poll may be on its way
            identity=self.client.identity,
        )
        while True:
            try:
                await self.client.workflow_service.set_worker_deployment_current_version(
                    request, timeout=SET_CURRENT_TIMEOUT
                )
                return
            except RPCError as err:
                late = err.status in LATE or (
                    # the client's own timeout: CANCELLED, from the SDK's core
                    err.status == RPCStatusCode.CANCELLED and err.message == "Timeout expired"
                )
                if not (late or "missing active task queues" in err.message) or polling.done():
                    raise
            await asyncio.sleep(POLL_REGISTERED_S)


class CurrentIfNone(CurrentOnStart):
    """A versioned worker made current only on a deployment that has no current version yet (a
    deploy that brings up the new version's workers and leaves the old one current)."""

    async def _make_current(self, polling: asyncio.Task[None]) -> None:
        deployment = self.config().get("deployment_config")
        assert deployment is not None
        try:
            described = await self.client.workflow_service.describe_worker_deployment(
                DescribeWorkerDeploymentRequest(
                    namespace=self.client.namespace,
                    deployment_name=deployment.version.deployment_name,
                )
            )
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
        else:
            if described.worker_deployment_info.routing_config.current_deployment_version.build_id:
                return
        await super()._make_current(polling)


LATE = (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE)
POLL_REGISTERED_S = 0.1  # how often to ask again while the server has not had the poll
# The call runs the deployment's own workflow on the server: in the suite's load it outran the
# client's default deadline ("Timeout expired") and the worker failed to start. It is asked
# again (the same version made current twice is once) while the worker polls.
SET_CURRENT_TIMEOUT = timedelta(seconds=30)


async def pinned_worker(
    client: Client, task_queue: str, workflow: type, build_id: str, *, current: bool = True
) -> Worker:
    """A worker of version `build_id` of the task queue's deployment, every run pinned; made
    the current version once it polls (`current=False`: only if there is none, as a deploy
    that forgot to make it current)."""
    config = WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(deployment_name=task_queue, build_id=build_id),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )
    worker_class = CurrentOnStart if current else CurrentIfNone
    return await order_worker(
        client, task_queue, workflow, worker_class=worker_class, deployment_config=config
    )
