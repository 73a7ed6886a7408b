"""The names of the KMDS search module, in one place.

``from kmds_desktop.search import SemanticIndex, SearchOrchestrator, OrchestratorResult,
OrchestratorRoute, SearchFilters`` works like KMDS's own search module. Imports are lazy so that
importing this package does not load torch or ChromaDB.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "SemanticIndex": "kmds_desktop.index",
    "DEFAULT_MODEL": "kmds_desktop.index",
    "SearchFilters": "kmds_desktop.kb",
    "SearchOrchestrator": "kmds_desktop.ask",
    "OrchestratorResult": "kmds_desktop.ask",
    "OrchestratorRoute": "kmds_desktop.ask",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kmds_desktop.search' has no attribute {name!r}")
    import importlib  # why: a lazy attribute: the package loads it on first use

    return getattr(importlib.import_module(module), name)
