"""CLI subcommands for the kb area (placeholder until the area lands)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add this area's subcommands to the main parser."""
