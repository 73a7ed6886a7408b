"""The literature side: PostgreSQL database, corpus import, query generation and the query agent.

Imports are lazy so that ``import kmds_desktop.literature`` stays cheap.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "open_database": "kmds_desktop.literature.store.database",
    "LiteratureDatabase": "kmds_desktop.literature.store.database",
    "LiteratureError": "kmds_desktop.literature.errors",
    "QueryAgent": "kmds_desktop.literature.queries.agent",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kmds_desktop.literature' has no attribute {name!r}")
    import importlib  # why: a lazy attribute: the package loads it on first use

    return getattr(importlib.import_module(module), name)
