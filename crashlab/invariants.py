"""What must hold after any amount of chaos, checked straight from Postgres: every run
completed, exactly the effects of a run that never crashed, and no effect that belongs to no run."""

from __future__ import annotations

import psycopg
from pydantic import BaseModel

from agent.outcome import ONE_RUN_COUNTS, plural, read_run_state

NO_RUN = "(no run)"
_ORPHANS = """
select 'model call', count(*) from model_calls
 where run_id like %(prefix)s and run_id <> all(%(runs)s)
union all
select 'order', count(*) from orders where run_id like %(prefix)s and run_id <> all(%(runs)s)
union all
select 'email', count(*) from emails where run_id like %(prefix)s and run_id <> all(%(runs)s)
"""


class Violation(BaseModel):
    run_id: str
    what: str


async def check_runs(
    conn: psycopg.AsyncConnection, run_ids: list[str], completed: set[str], prefix: str
) -> list[Violation]:
    """Every run in `run_ids` must be in `completed` and have left exactly one order, one email
    naming that order, the no-crash number of model calls and a summary; no row under `prefix`
    may belong to no run."""
    violations = []
    for run_id in run_ids:
        if run_id not in completed:
            violations.append(Violation(run_id=run_id, what="not completed"))
        state = await read_run_state(conn, run_id)
        if state.counts != ONE_RUN_COUNTS:
            violations.append(Violation(run_id=run_id, what=state.counts_text()))
        elif f"#{state.orders[0].id}" not in state.emails[0].body:
            violations.append(Violation(run_id=run_id, what="the email names another order"))
        if not state.summary:
            violations.append(Violation(run_id=run_id, what="no summary"))
    params = {"prefix": f"{prefix}%", "runs": run_ids}
    for noun, n in await (await conn.execute(_ORPHANS, params)).fetchall():
        if n:
            violations.append(Violation(run_id=NO_RUN, what=f"{plural(n, noun)} of no run"))
    return violations
