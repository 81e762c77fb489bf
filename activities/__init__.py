"""The Temporal activities of the grocery agent (`activities.grocery.GroceryActivities`)."""
