"""kb area."""
