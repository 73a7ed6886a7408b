"""The literature database as the application layer sees it: one object, whichever engine holds what.

Why: a literature database is several engines. PostgreSQL holds the documents, their counts and the
ranked full-text row (:mod:`~kmds_desktop.literature.store.database`); the app's document vectors live
in pgvector or its sidecar (:mod:`~kmds_desktop.literature.store.vectors`); a BMLibrarian database may
hold chunk vectors of its own (:mod:`~kmds_desktop.literature.store.bmlibrarian_vectors`); the fast
search index is a tantivy folder beside the data (:mod:`~kmds_desktop.literature.store.topk_build`,
:mod:`~kmds_desktop.literature.store.topk_index`). The application layer asked each of them by name,
so moving a table from one engine to another meant editing the window's and the CLI's use-cases.
:class:`LiteratureStore` offers the operations they need by what they do (open, status, count, import,
vectors for ids, embed, the fast index's state and build) and keeps which engine answers to itself.

It changes nothing about how each engine is used: every method calls the engine module that did the
work before, with the same arguments. The engine modules are imported on first use, because they
load psycopg, numpy or tantivy, which the window does not need before the database is opened.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kmds_desktop.tasks import CancelToken, ProgressFn


class LiteratureStore:
    """One open literature database (``database``: what :meth:`open` returned, or one handed in).

    Cheap to make around a database the caller already holds (``LiteratureStore(db)``): it keeps no
    state of its own, so the session, the agent and a worker may each wrap the same database.
    """

    def __init__(self, database: Any) -> None:
        self.database = database

    @classmethod
    def open(cls, dsn: str | None = None, *, settings: Any | None = None) -> LiteratureStore:
        """Open (for the embedded default, start) the database ``settings`` (``LiteratureSettings``)
        name, or ``dsn``. Raises ``DatabaseUnavailable`` or ``SchemaError`` naming the server."""
        # why: start-up time: it loads fasteners, psycopg
        from kmds_desktop.literature.store.database import open_database

        return cls(open_database(dsn, settings=settings))

    # --- documents (PostgreSQL) ---------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """The database's own status: documents, sources, where it is, its schema's owner."""
        return dict(self.database.status())

    def documents(self) -> int:
        """How many documents the database holds."""
        return int(self.database.status()["documents"])

    def import_files(self, paths: Sequence[str], *, progress: ProgressFn | None = None,
                     cancel: CancelToken | None = None) -> Any:
        """Import MEDLINE XML / JSONL files or folders; the import's report."""
        return self.database.import_files(list(paths), progress=progress, cancel=cancel)

    # --- document vectors (pgvector, the sidecar, or the database's own) ------------------------------
    def vector_status(self, model_name: str) -> dict[str, Any]:
        """How far the app's vectors of ``model_name`` are: available, with vectors, needing one."""
        # why: start-up time: it loads psycopg
        from kmds_desktop.literature.store.vectors import vector_status

        return vector_status(self.database, model_name)

    def documents_with_vectors(self, *, cancel: CancelToken | None = None) -> int:
        """How many documents a semantic row on the app's vectors searches. Raises
        ``VectorsUnavailable`` when this database has no vectors the app can use."""
        # why: start-up time: it loads psycopg
        from kmds_desktop.literature.store.vectors import count_with_vectors

        return int(count_with_vectors(self.database, cancel=cancel))

    def own_vectors(self, *, use_database_vectors: bool = True,
                    cancel: CancelToken | None = None) -> dict[str, Any] | None:
        """The vectors a BMLibrarian database holds itself, as semantic rows would search them
        (None: the app's own database, the setting off, or none there)."""
        # why: start-up time: it loads psycopg
        from kmds_desktop.literature.store.bmlibrarian_vectors import database_vector_status

        return database_vector_status(self.database, use_database_vectors=use_database_vectors, cancel=cancel)

    def vectors_for(self, ids: Iterable[int], *, cancel: CancelToken | None = None) -> dict[int, Any]:
        """The app's stored vectors of ``ids`` (those that have one)."""
        # why: start-up time: it loads psycopg
        from kmds_desktop.literature.store.vectors import stored_vectors

        return dict(stored_vectors(self.database, ids, cancel=cancel))

    def embed(self, model_name: str, encoder: Any, *, batch_size: int | None = None,
              allow_external: bool = False, progress: ProgressFn | None = None,
              cancel: CancelToken | None = None) -> Any:
        """Embed the documents that need a vector, batch by batch (the engine's batch size when
        ``batch_size`` is None). Raises ``VectorsUnavailable`` where vectors cannot be stored."""
        # why: start-up time: it loads psycopg
        from kmds_desktop.literature.store.vectors import EMBED_BATCH_SIZE, embed_documents

        return embed_documents(self.database, model_name=model_name, encoder=encoder,
                               batch_size=EMBED_BATCH_SIZE if batch_size is None else batch_size,
                               allow_external=allow_external, progress=progress, cancel=cancel)

    # --- the fast search index (tantivy) ------------------------------------------------------------
    def topk_state(self) -> dict[str, Any]:
        """Where the fast search index stands: ``{"state": "ready"|"unfinished"|"none", "documents"}``."""
        # why: start-up time: the window imports the app's modules at start, the index only when needed
        from kmds_desktop.literature.store.topk_build import index_folder
        from kmds_desktop.literature.store.topk_index import BuildState

        state = BuildState.load(index_folder(self.database) / "state.json")
        if state is None:
            return {"state": "none", "documents": 0}
        return {"state": "ready" if state.complete else "unfinished", "documents": state.documents}

    @staticmethod
    def topk_built_by_import_up_to() -> int:
        """The largest database an import indexes by itself; a larger one needs File > Build fast
        search index (or ``literature topk build``)."""
        # why: start-up time: the window imports the app's modules at start, the index only when needed
        from kmds_desktop.literature.store.topk_build import AUTO_TOPK_UP_TO

        return AUTO_TOPK_UP_TO

    def build_topk(self, *, progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> Any:
        """Build (or go on building) the fast search index, read-only on the database and committed
        batch by batch; the database uses it as soon as it is finished. The build's state."""
        # why: start-up time: the window imports the app's modules at start, the index only when needed
        from kmds_desktop.literature.store.topk_build import build_index, index_folder
        from kmds_desktop.literature.store.topk_index import TopKIndex

        index = TopKIndex(index_folder(self.database))
        state = build_index(self.database, index, progress=progress, cancel=cancel)
        self.database.attach_topk_index(index)
        return state
