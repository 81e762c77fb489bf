"""Agents built on the agent frameworks' Temporal integrations, crash-tested by crashtest through
the frameworks' own client plugins (`--plugin`): a pydantic-ai agent and an OpenAI Agents SDK
agent, each placing an order and sending a message through tools, with keyed and unkeyed tools.
The frameworks are optional: `pip install -e '.[frameworks]'` (make setup does)."""
