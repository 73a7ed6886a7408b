"""index area."""
