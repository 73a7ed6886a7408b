"""What every headless command does the same way: open the literature database it names, print
``--json``, report progress on one line, turn errors into one line and an exit code.

Why one module: each command wrote these again (and they drifted: some errors were worded by
:func:`~kmds_desktop.app.messages.describe_error`, others printed raw; some closed the database on
Ctrl+C, others did not). Exit codes: 0 done, 1 the work failed (one line ``error: ...`` on stderr),
2 the command's options or settings are invalid, 130 interrupted.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kmds_desktop.tasks import Cancelled

DSN_HELP = ("connect to this PostgreSQL instead of the embedded server, e.g. "
            "'host=127.0.0.1 port=5432 dbname=bmlibrarian user=postgres' "
            "(password from KMDS_DESKTOP_DB_PASSWORD / PGPASSWORD or the OS keyring)")

_progress_open = False  # a progress line is on stderr without its newline yet


def fail(message: str, code: int = 1) -> int:
    """Write ``error: <message>`` as one line on stderr (below a progress line); return ``code``."""
    end_progress()
    print(f"error: {message}", file=sys.stderr)
    return code


def print_json(data: Any) -> None:
    """The command's result as indented UTF-8 JSON on stdout (dates and paths as text)."""
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def progress_line(quiet: bool = False, width: int = 78) -> Callable[[int, int | None, str], None]:
    """A ``progress(done, total, message)`` that rewrites one line on stderr (nothing when ``quiet``)."""

    def progress(done: int, total: int | None, message: str) -> None:
        global _progress_open
        if not quiet:
            print(f"\r{message:<{width}}", end="", file=sys.stderr, flush=True)
            _progress_open = True

    return progress


def end_progress() -> None:
    """End the progress line, if one is open, so the next message starts on a line of its own."""
    global _progress_open
    if _progress_open:
        print(file=sys.stderr)
        _progress_open = False


@contextmanager
def literature_database(args: argparse.Namespace, settings: Any = None) -> Iterator[Any]:
    """The literature database the command names (``--dsn``, else the settings' own), closed when the
    command ends, whatever happens. Opening it raises
    :class:`~kmds_desktop.literature.errors.LiteratureError`."""
    # why: start-up time: they load fasteners, psycopg
    from kmds_desktop.app.doctor import server_notes
    from kmds_desktop.literature.store.database import open_database

    db = open_database(dsn=getattr(args, "dsn", None), settings=settings)
    for note in server_notes(db):  # what the embedded server's start found and did, in one sentence
        end_progress()
        print(f"note: {note}", file=sys.stderr)
    try:
        yield db
    finally:
        db.close()


def guarded(
    handler: Callable[[argparse.Namespace], int] | None = None, *, interrupted: str = "cancelled"
) -> Any:
    """Decorate a command's handler: the app's own failures become one line (exit 1; invalid settings
    or options exit 2), Ctrl+C prints ``interrupted`` (exit 130). Unexpected errors still raise, so
    they show their traceback (a bug to report, not a user's mistake)."""

    def wrap(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        @functools.wraps(fn)
        def run(args: argparse.Namespace) -> int:
            # why: start-up time: they load httpx, ollama
            from kmds_desktop.app.messages import describe_error
            from kmds_desktop.config import SettingsError
            from kmds_desktop.literature.errors import LiteratureError

            try:
                return int(fn(args) or 0)
            except SettingsError as err:
                return fail(describe_error(err), 2)
            except (LiteratureError, ValueError) as err:
                return fail(describe_error(err))
            except (KeyboardInterrupt, Cancelled):
                end_progress()
                print(interrupted, file=sys.stderr)
                return 130
            except BaseException:
                end_progress()  # a traceback starts on a line of its own too
                raise

        return run

    return wrap(handler) if handler is not None else wrap


def generation_settings(args: argparse.Namespace, settings: Any) -> tuple[Any, Any]:
    """Copies of the ``query_generation`` and ``retrieval`` sections with the command's options
    (``--models``, ``--queries-per-model``, ``--openai-url``, ``--fusion``, ``--rerank``, ``--ranking``)
    applied and
    validated as the settings are; :class:`~kmds_desktop.config.SettingsError` names a bad value."""
    from pydantic import ValidationError  # why: start-up time: the CLI loads pydantic only with the settings

    # why: start-up time: the CLI imports this module at start, that one only when needed
    from kmds_desktop.config import SettingsError, describe_validation_error

    qg = settings.query_generation.model_copy()
    retrieval = settings.retrieval.model_copy()
    try:
        if getattr(args, "models", None):
            qg.models = [m for m in args.models.split(",") if m.strip()]
            qg.multi_model_enabled = True
        if getattr(args, "queries_per_model", None):
            qg.queries_per_model = args.queries_per_model
            qg.multi_model_enabled = True
        if getattr(args, "openai_base_url", None):
            qg.openai_base_url = args.openai_base_url
        if getattr(args, "verbatim_models", None):
            qg.verbatim_query_models = [m for m in args.verbatim_models.split(",") if m.strip()]
    except ValidationError as err:  # pydantic validates assignments
        detail = describe_validation_error(err, "query_generation.")
        raise SettingsError(f"invalid option: {detail}") from None
    try:
        if getattr(args, "fusion", None):
            retrieval.fusion = args.fusion
        if getattr(args, "rerank", None) is not None:
            retrieval.rerank = args.rerank
        if getattr(args, "ranking", None):
            retrieval.fulltext_ranking = args.ranking
    except ValidationError as err:
        raise SettingsError(f"invalid option: {describe_validation_error(err, 'retrieval.')}") from None
    return qg, retrieval
