"""The literature database and files as the app uses them: which files can be imported, opening the
database (on first need: :class:`DatabaseOnDemand`), its status, imports and export writers (the search
itself is :mod:`kmds_desktop.app.literature`).

Each function takes ``progress=`` and ``cancel=``, so the window runs it on a worker and only wires
signals; a script calls it directly.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kmds_desktop.literature.errors import VectorsUnavailable
from kmds_desktop.literature.store.facade import LiteratureStore
from kmds_desktop.tasks import CancelToken, ProgressFn, report

log = logging.getLogger(__name__)

#: The Preferences > Retrieval check box that lets the app add vectors to a database it does not manage.
EXTERNAL_OPT_IN = "Allow a vector table in an external database"

#: File names the literature import accepts (drop or dialog).
IMPORT_SUFFIXES = (".xml", ".xml.gz", ".jsonl", ".jsonl.gz", ".json", ".json.gz", ".ndjson")


def importable(path: str) -> bool:
    """Whether ``path`` is named like a file the literature import reads, or is a folder (the PubMed
    baseline's ~1,200 ``.xml.gz``: imported file by file, resumable, one progress line)."""
    return path.lower().endswith(IMPORT_SUFFIXES) or os.path.isdir(path)


def open_literature_database(
    settings: Any, dsn: str | None = None, *, progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> Any:
    """Open (and for the embedded default, start) the literature database."""
    report(progress, 0, None, "opening the literature database")
    return LiteratureStore.open(dsn, settings=settings).database


Waiter = tuple[Callable[[Any], None], Callable[[BaseException], None] | None]


class DatabaseOnDemand:
    """The literature database of one window or script, opened when something first needs it.

    Starting the embedded server takes seconds, and the KB browser and the ask panel never need it:
    nothing opens it before a status, a check, a generation or a run asks. Two ways to wait for it:

    - a script (or a worker) calls :meth:`get`, which opens it once under a lock;
    - the window, whose GUI thread must not wait, calls :meth:`when_open` with what to do once it
      is open: the first caller is told to start opening it (on a worker, with
      :func:`open_literature_database`), later ones queue; :meth:`opened` / :meth:`failed` give back
      the queued actions to call.

    A database handed in (``database=``) belongs to the caller: :meth:`close` leaves it open.
    """

    def __init__(self, settings: Any, dsn: str | None = None, database: Any | None = None) -> None:
        self.settings = settings  # LiteratureSettings, read when opening (Preferences may change it)
        self.dsn = dsn
        self.database = database
        self._owns = database is None
        self._waiters: list[Waiter] = []
        self._opening = False
        self._lock = threading.Lock()

    @property
    def opening(self) -> bool:
        return self._opening

    def get(self, progress: ProgressFn | None = None) -> Any:
        """The database, opened now if no one has yet (blocks: for a script or a worker)."""
        with self._lock:
            if self.database is None:
                self.database = open_literature_database(self.settings, self.dsn, progress=progress)
            return self.database

    def when_open(self, then: Callable[[Any], None],
                  failed: Callable[[BaseException], None] | None = None) -> bool:
        """Call ``then(db)`` now if the database is open; else queue it. True: the caller must start
        opening it (nobody is yet) and report with :meth:`opened` or :meth:`failed`."""
        if self.database is not None:
            then(self.database)
            return False
        self._waiters.append((then, failed))
        if self._opening:
            return False
        self._opening = True
        return True

    def opened(self, db: Any) -> list[Callable[[Any], None]]:
        """It opened: the queued actions, to call with ``db``."""
        self.database, self._opening = db, False
        waiters, self._waiters = self._waiters, []
        return [then for then, _failed in waiters]

    def failed(self, exc: BaseException) -> list[Callable[[BaseException], None]]:
        """It could not be opened: the queued failure actions, to call with ``exc`` (the next need
        tries again)."""
        self._opening = False
        waiters, self._waiters = self._waiters, []
        return [failed for _then, failed in waiters if failed is not None]

    def close(self) -> None:
        """Close the database if this object opened it."""
        if self.database is not None and self._owns:
            db, self.database = self.database, None
            db.close()


def database_status(
    db: Any, model_name: str | None = None, *, use_database_vectors: bool = True,
    progress: ProgressFn | None = None, cancel: CancelToken | None = None,
) -> dict[str, Any]:
    """``db.status()``, with ``"vectors"`` (``literature status``'s count of documents with a vector)
    when ``model_name`` is given, and ``"database_vectors"`` (the vectors a BMLibrarian database holds
    itself, which semantic rows search: :meth:`LiteratureStore.own_vectors`, None when there are none); a
    failure there is reported in it, never raised."""
    store = LiteratureStore(db)
    status = store.status()
    try:
        status["database_vectors"] = store.own_vectors(use_database_vectors=use_database_vectors,
                                                       cancel=cancel)
    except Exception as err:  # noqa: BLE001 - the document count still stands
        log.warning("the database's own vectors could not be read: %s", err)
        status["database_vectors"] = None
    try:
        status["topk"] = topk_status(db)
    except Exception as err:  # noqa: BLE001 - the document count still stands
        status["topk"] = {"state": "none", "documents": 0, "error": str(err)}
    if model_name is not None:
        try:
            status["vectors"] = store.vector_status(model_name)
        except Exception as err:  # noqa: BLE001 - the document count still stands
            status["vectors"] = {"available": False, "with_vectors": 0, "needing": None, "error": str(err)}
    return status


def everything_embedded(vectors: dict[str, Any] | None) -> bool:
    """Whether every document has its vector (``vector_status``: the table exists, some have one, none
    needs one): then Embed documents has nothing to do, and the window says so instead of offering it.
    Unknown (no status yet, or a failed read) is not "everything": the user may still embed."""
    if not vectors or not vectors.get("available") or vectors.get("error"):
        return False
    needing = vectors.get("needing")
    return needing is not None and int(needing) == 0 and int(vectors.get("with_vectors") or 0) > 0


def semantic_searchable(vectors: dict[str, Any] | None,
                        database_vectors: dict[str, Any] | None = None) -> tuple[int | None, bool]:
    """``(documents a semantic row searches, exact?)`` by the status: the database's own vectors when
    semantic rows search those (an estimate on a large table), else the documents with the app's vector
    (0 when there is no vector table yet); None when the status has not said."""
    if database_vectors and database_vectors.get("with_vectors"):
        return int(database_vectors["with_vectors"]), not database_vectors.get("estimated")
    if not vectors or vectors.get("error"):
        return None, True
    return (int(vectors.get("with_vectors") or 0) if vectors.get("available") else 0), True


#: The Embed button's tooltip while every document has a vector (it is disabled then).
EVERYTHING_EMBEDDED = ("Every document has a vector for semantic rows: nothing to embed. Importing documents "
                       "enables this again.")


def describe_vectors(vectors: dict[str, Any] | None, database_vectors: dict[str, Any] | None = None) -> str:
    """A few words for the window's status: "8,000 with vectors", "316 to embed", "no vectors"; on a
    database with its own vectors, those first ("≈36,000,000 with the database's own … vectors")."""
    if database_vectors and database_vectors.get("with_vectors"):
        approx = "≈" if database_vectors.get("estimated") else ""
        own = f"{approx}{int(database_vectors['with_vectors']):,} with {database_vectors['described']}"
        if vectors and vectors.get("available") and vectors.get("with_vectors"):
            return f"{own}, {int(vectors['with_vectors']):,} with the app's"
        return own
    if not vectors:
        return ""
    if not vectors.get("available"):
        return "no vectors"
    text = f"{int(vectors.get('with_vectors') or 0):,} with vectors"
    needing = vectors.get("needing")
    return text + (f", {int(needing):,} to embed" if needing else "")


def topk_status(db: Any) -> dict[str, Any]:
    """Where the top-k index of ``db`` stands: ``{"state": "ready"|"unfinished"|"none", "documents"}``."""
    return LiteratureStore(db).topk_state()


def describe_topk(status: dict[str, Any] | None, documents: int = 0) -> str:
    """A few words for the window's status, only where the user has something to do: an unfinished
    index, or a database too large for the import to index by itself that has none (a ready index,
    or a small database, just works and says nothing)."""
    known = status or {}
    state = known.get("state", "none")
    if state == "unfinished":
        return (f"fast search index unfinished ({int(known.get('documents') or 0):,} documents; "
                "File > Build fast search index goes on)")
    if state == "none" and documents > LiteratureStore.topk_built_by_import_up_to():
        return "no fast search index (File > Build fast search index)"
    return ""


def build_topk_index(db: Any, *, progress: ProgressFn | None = None,
                     cancel: CancelToken | None = None) -> Any:
    """Build (or go on building) the top-k index of ``db`` (``literature topk build``'s code): read-only
    on the database, committed batch by batch, so Cancel keeps what is done and the next build goes on;
    the database uses the index as soon as it is finished."""
    return LiteratureStore(db).build_topk(progress=progress, cancel=cancel)


def import_literature(
    db: Any, paths: Sequence[str], *, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
) -> Any:
    return LiteratureStore(db).import_files(paths, progress=progress, cancel=cancel)


def embed_literature(
    db: Any, model_name: str, encoder: Any, retrieval: Any = None, *, progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> Any:
    """Embed the documents that need a vector (``literature embed``'s code, batch by batch), with the
    batch size and the external-database opt-in of ``retrieval`` (:class:`RetrievalSettings`).

    On a database the app does not manage, without the opt-in, nothing is created and the error says
    where the window's opt-in is (the core's message names the CLI's flag and the setting).
    """
    batch = getattr(retrieval, "embed_batch_size", None)
    allow = bool(getattr(retrieval, "allow_vectors_in_external_database", False))
    try:
        return LiteratureStore(db).embed(model_name, encoder, allow_external=allow,
                                         batch_size=None if batch is None else int(batch), progress=progress,
                                         cancel=cancel)
    except VectorsUnavailable as err:
        if allow or getattr(db, "schema_owner", "app") == "app":
            raise
        raise VectorsUnavailable(
            "this database is not managed by KMDS Desktop (e.g. a BMLibrarian database), so the app created "
            "nothing in it; to let it add the extension 'vector' and one table of document vectors (its own "
            f"tables stay as they are), tick '{EXTERNAL_OPT_IN}' in Preferences > Retrieval") from err


def write_export(
    writer: Callable[..., Any], *args: Any, progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> Any:
    """Run an export writer from :mod:`kmds_desktop.literature.strategy.reference_files` on a worker."""
    return writer(*args)


def import_summary(report: Any) -> str:
    """The message after an import: what :class:`~kmds_desktop.literature.store.loading.ImportReport`'s
    summary says was imported (any other answer as it is)."""
    summary = getattr(report, "summary", None)
    return f"Imported {summary()}" if callable(summary) else f"Import finished: {report}"


@dataclass(frozen=True)
class DatabaseStatus:
    """What a status read (:func:`database_status`) said about the literature database: the session
    keeps the newest one (:meth:`~kmds_desktop.app.literature.LiteratureSession.apply_database_status`),
    so the window's views and the run's coverage question read the same counts.

    ``vectors`` is ``literature status``'s count of documents with the app's vector, ``database_vectors``
    the vectors a BMLibrarian database holds itself (semantic rows search those), ``topk`` where the
    top-k index stands; each None when the read did not say.
    """

    documents: int
    where: str = ""
    vectors: dict[str, Any] | None = None
    database_vectors: dict[str, Any] | None = None
    topk: dict[str, Any] | None = None

    @classmethod
    def from_status(cls, status: dict[str, Any]) -> DatabaseStatus:
        """The dictionary :func:`database_status` returns, as one value."""
        return cls(int(status.get("documents") or 0), str(status.get("database") or ""),
                   status.get("vectors"), status.get("database_vectors"), status.get("topk"))

    def line(self) -> str:
        """The status bar's words: "Literature: 8,316 documents, 8,000 with vectors (where)"."""
        vectors = describe_vectors(self.vectors, self.database_vectors)
        fast = describe_topk(self.topk, self.documents)
        return (f"Literature: {self.documents:,} documents" + (f", {vectors}" if vectors else "")
                + (f", {fast}" if fast else "") + (f" ({self.where})" if self.where else ""))

    @property
    def everything_embedded(self) -> bool:
        """Every document has the app's vector: Embed documents has nothing to do."""
        return everything_embedded(self.vectors)

    def semantic_searchable(self) -> tuple[int | None, bool]:
        """(documents a semantic row searches, exact?): see :func:`semantic_searchable`."""
        return semantic_searchable(self.vectors, self.database_vectors)

    def embed_tooltip(self) -> str:
        """What Embed documents would do on this database (or why it has nothing to do)."""
        return embed_tooltip(self)


def embed_tooltip(status: DatabaseStatus | None) -> str:
    """The Embed button's tooltip for ``status`` (None: not read yet)."""
    vectors = status.vectors if status is not None else None
    if everything_embedded(vectors):
        return EVERYTHING_EMBEDDED
    own = status.database_vectors if status is not None else None
    if own and own.get("with_vectors"):
        return (f"Semantic rows search {own['described']} (nothing to embed while its model is on the "
                "Ollama server). This embeds with the app's model into a table of its own, which needs "
                f"'{EXTERNAL_OPT_IN}' in Preferences > Retrieval")
    described = describe_vectors(vectors)
    return ("Embed the documents that have no vector yet, in the background, for semantic rows"
            + (f" (now: {described})" if described else ""))
