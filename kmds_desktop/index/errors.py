"""Errors of the semantic index, each with a message that says what to do next.

Every failure the user can act on is a :class:`SemanticIndexError` so the CLI and the GUI can show
one clear line instead of a traceback. Bad input (an empty question, ``n_results < 1``) is also a
``ValueError`` so callers that validate arguments the usual way catch it too.
"""

from __future__ import annotations


class SemanticIndexError(Exception):
    """Base class: the semantic index cannot do what was asked; the message says why and what to do."""


class InvalidQueryError(SemanticIndexError, ValueError):
    """A search argument is unusable (empty question, ``n_results`` below 1, unknown filter)."""


class ModelLoadError(SemanticIndexError):
    """The embedding model cannot be loaded from disk (the index never downloads anything)."""


class IndexStoreError(SemanticIndexError):
    """The index folder cannot be created or written (not a folder, read-only, disk full...)."""


class IndexProcessStopped(IndexStoreError):  # noqa: N818 - reads as the condition it reports
    """The app's index process went away during a call; the next call starts a new one."""


class IndexCorruptedError(IndexStoreError):
    """The index folder exists but its files cannot be read; rebuild moves it aside and starts over."""

    def __init__(self, message: str, persist_dir: str | None = None) -> None:
        super().__init__(message)
        self.persist_dir = persist_dir


class ChromaServerUnreachable(SemanticIndexError):  # noqa: N818 - reads as the condition it reports
    """Server mode is configured but the Chroma server does not answer."""


class KnowledgeBaseReadError(SemanticIndexError):
    """The knowledge-base file given to ``build`` cannot be read."""
