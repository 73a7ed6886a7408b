"""The literature database and files as the app uses them: which files can be imported, opening the
database, its status, imports and export writers (the search itself is :mod:`kmds_desktop.app.literature`).

Each function takes ``progress=`` and ``cancel=``, so the window runs it on a worker and only wires
signals; a script calls it directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kmds_desktop.tasks import CancelToken, ProgressFn, report

#: File names the literature import accepts (drop or dialog).
IMPORT_SUFFIXES = (".xml", ".xml.gz", ".jsonl", ".jsonl.gz", ".json", ".json.gz", ".ndjson")


def importable(path: str) -> bool:
    """Whether ``path`` is named like a file the literature import reads."""
    return path.lower().endswith(IMPORT_SUFFIXES)


def open_literature_database(
    settings: Any, dsn: str | None = None, *, progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> Any:
    """Open (and for the embedded default, start) the literature database."""
    from kmds_desktop.literature.database import open_database

    report(progress, 0, None, "opening the literature database")
    return open_database(dsn, settings=settings)


def database_status(
    db: Any, *, progress: ProgressFn | None = None, cancel: CancelToken | None = None
) -> dict[str, Any]:
    return db.status()


def import_literature(
    db: Any, paths: Sequence[str], *, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
) -> Any:
    return db.import_files(list(paths), progress=progress, cancel=cancel)


def embed_literature(
    db: Any, model_name: str, encoder: Any, *, progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> Any:
    """Embed the documents that need a vector (``literature embed``'s code, batch by batch)."""
    from kmds_desktop.literature.vectors import embed_documents

    return embed_documents(db, model_name=model_name, encoder=encoder, progress=progress, cancel=cancel)


def write_export(
    writer: Callable[..., Any], *args: Any, progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> Any:
    """Run an export writer from :mod:`kmds_desktop.literature.export` on a worker."""
    return writer(*args)
