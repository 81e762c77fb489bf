"""Agents built on the agent frameworks' Temporal integrations, crash-tested by crashtest through
the frameworks' own client plugins (`--plugin`): pydantic-ai, the OpenAI Agents SDK, LangGraph,
Strands, Google ADK and deepagents (a module each, `*_agent.py`), each agent placing an order and
sending a message through tools, keyed and unkeyed (`effects.py`).
The frameworks are optional: `pip install -e '.[frameworks]'` (make setup does)."""
