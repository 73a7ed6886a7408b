"""``kmds-desktop literature search`` (placeholder until the query agent lands)."""

from __future__ import annotations

import argparse


def register_search(lit_sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add the ``search`` subcommand under ``literature``."""
