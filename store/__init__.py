"""Postgres access, configuration, and the embedded local services (Postgres, Temporal)."""
