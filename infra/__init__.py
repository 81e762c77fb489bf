"""What every command stands on: configuration from the environment (and Temporal's envconfig),
Postgres connections and the schema, the local servers started when none is configured
(embedded Postgres, the tuned Temporal dev server, the grocer), connecting with retry, one-line
errors and clean exits, redaction, logs, metrics and health."""
