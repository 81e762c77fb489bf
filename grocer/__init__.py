"""The grocer: a small external store service, as payment and commerce APIs behave.

`python -m grocer [--port P]` serves `POST /orders` (header `Idempotency-Key`, body
`{"reference", "lines"}`): a repeat within the key's time to live returns the first order (same
id, 201); after the TTL the key is forgotten and a repeat creates a new order, as Stripe does; the
same key with another body is refused (409). `GET /orders?reference=R` finds orders by the
client's reference. Every request carries an account's secret key (`Authorization: Bearer`), and
orders, keys and references belong to that account. In test mode faults can be injected for the
next requests (`POST /_faults`): a slow answer, a 500, a 429, a connection dropped after the
order was stored. Its tables live in a schema of their own (`grocer`); it knows nothing of the
agent.
"""
