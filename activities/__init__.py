"""The agent's six steps and its side effects, written once.

The Temporal activities (`activities.temporal`) and the journal baseline (`journal/`) both call
the functions in `activities.steps`, so every comparison between them is like for like.
"""
