"""Small programs the tests run in processes of their own, as files that ruff and mypy check."""
