"""Each Temporal shape crashtest must see through, as a small workflow with one effect or two:
parallel activities, a local activity, a child workflow, an approval sent by a message, a
continue-as-new loop, a reset. Every module has a keyed worker factory (crashtest finds nothing)
and an unkeyed or naively keyed one (crashtest fails exactly the effect boundaries). Their effects
are rows in one Postgres table (`examples.shapes.ledger`), observed with `ledger:effects_of`.
"""
