"""The plain functions the literature panel runs on its QThread workers.

No Qt here: each function takes ``progress=`` and ``cancel=`` (and ``chunk=`` when it streams results
row by row), so the panel only wires signals, and the functions can be called directly in a script.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kmds_desktop.tasks import CancelToken, ProgressFn, check, report

#: File names the panel accepts for import (drop or dialog).
IMPORT_SUFFIXES = (".xml", ".xml.gz", ".jsonl", ".jsonl.gz", ".json", ".json.gz", ".ndjson")


def importable(path: str) -> bool:
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


@dataclass
class CheckItem:
    """One query to validate and count: the row's uid and revision travel with the answer."""

    uid: int
    revision: int
    text: str


@dataclass
class CheckResult:
    uid: int
    revision: int
    ok: bool | None  # None: the check itself failed (database down)
    message: str  # normalized query when ok, else the error
    matches: int | None = None
    exact: bool = True


def check_queries(
    db: Any, items: Sequence[CheckItem], *, chunk: Callable[[Any], None],
    progress: ProgressFn | None = None, cancel: CancelToken | None = None,
) -> int:
    """Validate each query on the server and count its matches; each answer goes out through ``chunk``.

    A database failure is reported per row (``ok=None``) instead of raising, so rows show why they
    could not be checked; the first failure stops the batch (the rest would fail the same way).
    """
    from kmds_desktop.tasks import Cancelled

    for i, item in enumerate(items):
        check(cancel)
        report(progress, i, len(items), "checking queries")
        try:
            ok, message = db.validate_tsquery(item.text)
            matches, exact = None, True
            if ok:
                count = db.count_matches(item.text, cancel=cancel)
                matches, exact = int(count), not getattr(count, "estimated", False)
            chunk(CheckResult(item.uid, item.revision, ok, message, matches, exact))
        except Cancelled:
            raise
        except Exception as err:
            if cancel is not None and cancel.cancelled:
                raise
            for rest in items[i:]:
                chunk(CheckResult(rest.uid, rest.revision, None, f"not checked: {err}"))
            raise
    report(progress, len(items), len(items), "queries checked")
    return len(items)


def effective_models(qg: Any) -> tuple[list[str], int]:
    """Models and queries per model that a generation round uses.

    With ``multi_model_enabled`` off only the first model is asked, once (as :class:`QueryAgent` does).
    """
    models = [str(m) for m in qg.models]
    if not getattr(qg, "multi_model_enabled", True):
        return models[:1], 1
    return models, int(qg.queries_per_model)


def generate_queries(
    question: str, qg: Any, db: Any | None, *, chunk: Callable[[Any], None],
    system_prompt: str | None = None, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
) -> Any:
    """Run every configured model in turn; each finished attempt goes out through ``chunk``."""
    from kmds_desktop.literature.query_generation import MultiModelQueryGenerator

    generator = MultiModelQueryGenerator(
        ollama_host=qg.ollama_host, timeout=qg.timeout_s, database=db, deduplicate=qg.deduplicate_results,
    )
    models, per_model = effective_models(qg)
    return generator.generate_queries(
        question, system_prompt, models, per_model, qg.temperature,
        progress=progress, cancel=cancel, on_result=chunk,
    )


def run_reviewed(
    db: Any, queries: list[str], qg: Any, *, max_rows: int, batch_size: int,
    progress: ProgressFn | None = None, cancel: CancelToken | None = None,
) -> Any:
    """Run exactly the reviewed queries with :class:`QueryAgent` (ID-only, merged, fetched once)."""
    from kmds_desktop.literature.agent import QueryAgent

    agent = QueryAgent(db, qg, fetch_batch_size=batch_size)
    return agent.run_reviewed_queries(queries, max_rows=max_rows, progress=progress, cancel=cancel)


def import_literature(
    db: Any, paths: Sequence[str], *, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
) -> Any:
    return db.import_files(list(paths), progress=progress, cancel=cancel)


def write_export(
    writer: Callable[..., Any], *args: Any, progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> Any:
    """Run an export writer from :mod:`kmds_desktop.literature.export` on a worker."""
    return writer(*args)
