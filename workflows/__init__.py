"""GroceryAgentWorkflow: the six steps as Temporal activities."""
