"""A loop of payments plus a notification: charge each of a customer's invoices, then send one
receipt. Written as a user of crashtest would write it (dataclasses, the default data converter,
its own tables); only the database connection comes from this project's `infra.db`.

Two workers for the same workflow: `keyed_worker` gives every charge the idempotency key
`{workflow_id}:{activity_id}`; `unkeyed_worker` charges without one, which crashtest must catch at
exactly the charges' after-effect boundaries.
"""
