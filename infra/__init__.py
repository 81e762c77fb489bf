"""Configuration, the database and its schema, the local servers (embedded Postgres, the Temporal
dev server), and the one-line error handling of every command line."""
