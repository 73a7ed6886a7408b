"""Semantic index of KMDS knowledge bases (sentence embeddings in ChromaDB).

``from kmds_desktop.index import SemanticIndex, DEFAULT_MODEL``. The heavy parts (ChromaDB, torch,
sentence-transformers) load on first use, so importing this package keeps app start-up fast.
"""

from __future__ import annotations

from typing import Any

from kmds_desktop.index.embeddings import DEFAULT_MODEL
from kmds_desktop.index.errors import (
    ChromaServerUnreachable,
    IndexCorruptedError,
    IndexProcessStopped,
    IndexStoreError,
    InvalidQueryError,
    KnowledgeBaseReadError,
    ModelLoadError,
    SemanticIndexError,
)

_LAZY = {
    "SemanticIndex": "kmds_desktop.index.semantic_index",
    "BuildReport": "kmds_desktop.index.semantic_index",
    "ALL_KBS": "kmds_desktop.index.semantic_index",
    "open_index": "kmds_desktop.index.factory",
    "rebuild_index": "kmds_desktop.index.factory",
}

__all__ = [
    "DEFAULT_MODEL",
    "ChromaServerUnreachable",
    "IndexCorruptedError",
    "IndexProcessStopped",
    "IndexStoreError",
    "InvalidQueryError",
    "KnowledgeBaseReadError",
    "ModelLoadError",
    "SemanticIndexError",
    *sorted(_LAZY),
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kmds_desktop.index' has no attribute {name!r}")
    import importlib  # why: a lazy attribute: the package loads it on first use

    return getattr(importlib.import_module(module), name)
