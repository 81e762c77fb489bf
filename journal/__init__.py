"""The hand-rolled baseline: a journal of finished steps in Postgres, and the agent on top of it."""
