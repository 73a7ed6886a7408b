"""ask area."""
