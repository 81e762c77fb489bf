"""Workflows of other shapes than the grocery agent, crash-tested by the same `crashtest` tool."""
