"""Record tests/histories/grocery_completed.json from a real run (not a test).

Run it again only when the workflow changes on purpose: `python -m tests.record_history`
with a worker running on the default task queue.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from agent.data import EXAMPLE_WEEK, GroceryRequest
from infra.config import task_queue
from infra.temporal_client import connect_temporal
from workflows.grocery import GroceryAgentWorkflow

HISTORY = Path(__file__).parent / "histories" / "grocery_completed.json"


async def main() -> None:
    client = await connect_temporal()
    handle = await client.start_workflow(
        GroceryAgentWorkflow.run,
        GroceryRequest(household="history", week=EXAMPLE_WEEK),
        id=f"history-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue(),
    )
    await handle.result()
    history = await handle.fetch_history()
    HISTORY.write_text(history.to_json())
    print(f"wrote {HISTORY}")


if __name__ == "__main__":
    asyncio.run(main())
