"""``kmds-desktop literature ...``: ``status``, ``import``, ``embed`` (``search`` is in ``commands``;
``history``, ``combine``, ``check``, ``overlap`` and ``report`` come from ``history_cli``).

Imports of the database layer happen inside the handlers so ``kmds-desktop --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

_MAX_SKIPPED_SHOWN = 20


def register(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:  # noqa: SLF001
    """Add ``literature`` with ``status`` and ``import``; returns its subparsers (``search`` is added
    by :mod:`kmds_desktop.commands.literature_search`, which drives the application layer)."""
    lit = sub.add_parser(
        "literature",
        help="the literature database: status, import, search, and the search history",
        description="Manage and search the literature database (embedded by default, or --dsn).",
    )
    lit_sub = lit.add_subparsers(dest="literature_command", metavar="SUBCOMMAND")
    lit.set_defaults(func=lambda args: (lit.print_help(), 2)[1])

    dsn_help = ("connect to this PostgreSQL instead of the embedded server, e.g. "
                "'host=127.0.0.1 port=5432 dbname=bmlibrarian user=postgres' "
                "(password from KMDS_DESKTOP_DB_PASSWORD / PGPASSWORD or the OS keyring)")

    status = lit_sub.add_parser("status", help="server, schema version and document counts per source")
    status.add_argument("--dsn", help=dsn_help)
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(func=_status)

    imp = lit_sub.add_parser(
        "import",
        help="import JSONL, MEDLINE/PubMed XML (.xml, .xml.gz) or PubMedQA JSON files",
        description="Import corpus files. Each file is one transaction: an unreadable file leaves "
                    "nothing behind, malformed records are skipped and listed, re-importing changes nothing.",
    )
    imp.add_argument("files", nargs="+", metavar="FILE")
    imp.add_argument("--dsn", help=dsn_help)
    imp.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    imp.set_defaults(func=_import)

    emb = lit_sub.add_parser(
        "embed",
        help="embed documents (title + abstract) for semantic rows: only new or changed ones",
        description="Store a vector for every document that has none, whose title or abstract changed, or "
                    "that another model embedded (pgvector table kmds_document_vector, HNSW index). Each "
                    "batch is committed: Ctrl+C stops after the batch in progress and the next run resumes. "
                    "On a database the app does not own (BMLibrarian) nothing is created without "
                    "--allow-schema-changes.",
    )
    emb.add_argument("--dsn", help=dsn_help)
    emb.add_argument("--limit", type=int, default=None, metavar="N", help="embed at most N documents")
    emb.add_argument("--batch-size", type=int, default=None, metavar="N",
                     help="documents per batch (default: retrieval.embed_batch_size)")
    emb.add_argument("--allow-schema-changes", action="store_true",
                     help="on a database the app does not own, create the vector extension and table")
    emb.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    emb.set_defaults(func=_embed)

    from kmds_desktop.literature.evaluate_cli import register_evaluate
    from kmds_desktop.literature.history_cli import register_history

    register_history(lit_sub)
    register_evaluate(lit_sub)
    return lit_sub


def _open(args: argparse.Namespace) -> Any:
    from kmds_desktop.literature.database import open_database

    return open_database(dsn=getattr(args, "dsn", None))


def _status(args: argparse.Namespace) -> int:
    from kmds_desktop.config import load_settings
    from kmds_desktop.literature.errors import LiteratureError
    from kmds_desktop.literature.vectors import vector_status

    try:
        db = _open(args)
        try:
            info = db.status()
            info["vectors"] = vector_status(db, load_settings().index.embedding_model)
        finally:
            db.close()
    except LiteratureError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    version = info["schema_version"]
    schema = f"version {version}" if info["schema_owner"] == "app" else "not managed by this app (used as is)"
    print(f"server:    {info['server']} (PostgreSQL {info['server_version']}, {info['mode']})")
    print(f"database:  {info['database']}")
    print(f"schema:    {schema}")
    print(f"documents: {info['documents']} ({info['withdrawn']} withdrawn)")
    for name, count in info["sources"].items():
        print(f"  {name:<20} {count}")
    print(f"vectors:   {_describe_vectors(info['vectors'], info['schema_owner'])}")
    return 0


def _describe_vectors(vec: dict[str, Any], owner: str) -> str:
    if vec["available"]:
        todo = f", {vec['needing']} to embed ('kmds-desktop literature embed')" if vec["needing"] else ""
        return f"{vec['with_vectors']} documents have vectors ({vec['model']}){todo}"
    if not vec["extension"]:
        return "none: the server lacks the pgvector extension (semantic rows unavailable)"
    if owner != "app":
        return "none: not created in a database the app does not own ('embed --allow-schema-changes')"
    return "none yet ('kmds-desktop literature embed')"


def _embed(args: argparse.Namespace) -> int:
    from kmds_desktop.config import load_settings
    from kmds_desktop.literature.errors import LiteratureError
    from kmds_desktop.literature.vectors import embed_documents
    from kmds_desktop.tasks import CancelToken

    settings = load_settings()
    batch = args.batch_size if args.batch_size is not None else settings.retrieval.embed_batch_size
    if batch < 1 or (args.limit is not None and args.limit < 0):
        print("error: --batch-size must be at least 1 and --limit not negative", file=sys.stderr)
        return 2

    def progress(done: int, total: int | None, message: str) -> None:
        if not args.quiet:
            print(f"\r{message:<78}", end="", file=sys.stderr, flush=True)

    cancel = CancelToken()
    allow = args.allow_schema_changes or settings.retrieval.allow_vectors_in_external_database
    try:
        db = _open(args)
    except LiteratureError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    try:
        try:
            rep = embed_documents(
                db, model_name=settings.index.embedding_model, batch_size=batch, limit=args.limit,
                allow_external=allow, progress=progress, cancel=cancel)
        except KeyboardInterrupt:  # the batch in flight is rolled back; committed ones stay
            cancel.cancel()
            print("\nembedding interrupted; the next run resumes", file=sys.stderr)
            return 130
        except LiteratureError as err:
            if not args.quiet:
                print(file=sys.stderr)
            print(f"error: {err}", file=sys.stderr)
            return 1
    finally:
        db.close()
    if not args.quiet:
        print(file=sys.stderr)
    print(f"embedded {rep.embedded} documents in {rep.seconds:.1f} s ({rep.per_second:.1f}/s, model "
          f"{rep.model}); {rep.remaining} still need a vector")
    return 0


def _import(args: argparse.Namespace) -> int:
    from kmds_desktop.literature.errors import LiteratureError
    from kmds_desktop.tasks import Cancelled

    def progress(done: int, total: int | None, message: str) -> None:
        if not args.quiet:
            print(f"\r{message:<78}", end="", file=sys.stderr, flush=True)

    try:
        db = _open(args)
    except LiteratureError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    code = 0
    try:
        for path in args.files:  # one call per file so earlier files' reports survive a later failure
            try:
                result = db.import_files([path], progress=progress)
            except LiteratureError as err:
                if not args.quiet:
                    print(file=sys.stderr)
                print(f"error: {err}", file=sys.stderr)
                code = 1
                continue
            if not args.quiet:
                print(file=sys.stderr)
            for rep in result.files:
                print(f"{rep.path}: {rep.records} records, {rep.inserted} new, {rep.updated} updated, "
                      f"{rep.unchanged} unchanged, {len(rep.skipped)} skipped ({rep.seconds:.1f} s)")
                for note in rep.notes:
                    print(f"  note: {note}")
                for skipped in rep.skipped[:_MAX_SKIPPED_SHOWN]:
                    print(f"  skipped {skipped.position}: {skipped.message}")
                if len(rep.skipped) > _MAX_SKIPPED_SHOWN:
                    print(f"  ... and {len(rep.skipped) - _MAX_SKIPPED_SHOWN} more skipped")
    except (KeyboardInterrupt, Cancelled):
        print("\nimport interrupted; the file in progress was rolled back", file=sys.stderr)
        return 130
    finally:
        db.close()
    return code
