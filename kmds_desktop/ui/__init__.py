"""ui area."""
