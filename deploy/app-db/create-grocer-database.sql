-- Runs once, when the app Postgres starts on an empty volume: the grocer (someone else's service
-- in real life) keeps its tables in a database of its own. The agent's tables (orders, emails,
-- model_calls, the journal's agent_runs/agent_steps) are created in `grocery` by the worker.
CREATE DATABASE grocer;
