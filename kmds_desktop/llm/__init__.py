"""llm area."""
