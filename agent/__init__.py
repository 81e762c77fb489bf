"""The grocery agent without an engine: its six steps, their data types, the model, the effects.

The Temporal activities (`activities/`) and the hand-rolled journal (`journal/`) both call the
step functions in `agent.steps`, so the side effects are written once and every comparison
between the two engines is like for like. Nothing here knows which engine runs it.
"""
