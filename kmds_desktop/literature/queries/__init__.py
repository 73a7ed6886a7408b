"""Writing full-text queries: the built-in generator, LLM generation, cleaning, and the query agent."""
