"""``kmds-desktop literature ...``: ``status``, ``import``, ``embed`` (``search`` is in
:mod:`~kmds_desktop.commands.literature_search`; ``history``, ``combine``, ``check``, ``overlap`` and
``report`` in :mod:`~kmds_desktop.commands.literature_history`; ``evaluate`` in
:mod:`~kmds_desktop.commands.literature_evaluate`). Opening the database, ``--json``, progress and
error exits are :mod:`kmds_desktop.commands.common`'s.

Imports of the database layer happen inside the handlers so ``kmds-desktop --help`` stays fast.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from kmds_desktop.commands.common import (
    DSN_HELP,
    end_progress,
    fail,
    guarded,
    literature_database,
    print_json,
    progress_line,
)
from kmds_desktop.commands.literature_evaluate import register_evaluate
from kmds_desktop.commands.literature_history import register_history
from kmds_desktop.commands.literature_review import print_new_records, register_review
from kmds_desktop.commands.literature_screen import register_screen
from kmds_desktop.text import plural

_MAX_SKIPPED_SHOWN = 20


def register(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """Add ``literature`` with its subcommands; returns its subparsers (``search`` is added by
    :mod:`kmds_desktop.commands.literature_search`, which drives the application layer)."""
    lit = sub.add_parser(
        "literature",
        help="the literature database: status, import, search, and the search history",
        description="Manage and search the literature database (embedded by default, or --dsn).",
    )
    lit_sub = lit.add_subparsers(dest="literature_command", metavar="SUBCOMMAND")
    lit.set_defaults(func=lambda args: (lit.print_help(), 2)[1])

    status = lit_sub.add_parser("status", help="server, schema version and document counts per source")
    status.add_argument("--dsn", help=DSN_HELP)
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(func=_status)

    imp = lit_sub.add_parser(
        "import",
        help="import JSONL, MEDLINE/PubMed XML (.xml, .xml.gz) or PubMedQA JSON files, or a folder of them",
        description="Import corpus files. Each file is one transaction: an unreadable file leaves "
                    "nothing behind, malformed records are skipped and listed, re-importing changes nothing. "
                    "A folder (e.g. the PubMed baseline) is imported file by file in name order and "
                    "resumably: the files it finished are recorded (in the app's data folder, per database) "
                    "and skipped by the next import of the folder unless their size or time changed, so an "
                    "interrupted import goes on with the file it was in.",
    )
    imp.add_argument("files", nargs="+", metavar="FILE_OR_FOLDER")
    imp.add_argument("--again", action="store_true",
                     help="import a folder's files again even when recorded as imported into this database")
    imp.add_argument("--dsn", help=DSN_HELP)
    imp.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    imp.add_argument("--embed", action="store_true",
                     help="embed the new documents right after the import (as 'literature embed' does; "
                          "the window does it in the background when retrieval.embed_after_import is on)")
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
    emb.add_argument("--dsn", help=DSN_HELP)
    emb.add_argument("--limit", type=int, default=None, metavar="N", help="embed at most N documents")
    emb.add_argument("--batch-size", type=int, default=None, metavar="N",
                     help="documents per batch (default: retrieval.embed_batch_size)")
    emb.add_argument("--allow-schema-changes", action="store_true",
                     help="on a database the app does not own, create the vector extension and table")
    emb.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    emb.set_defaults(func=_embed)

    topk = lit_sub.add_parser(
        "topk",
        help="the top-k index for fast full-text rows at any size: build, refresh, status",
        description="Build (or go on building) the top-k index beside the database: tantivy BM25 over "
                    "PostgreSQL's own lexemes, so a full-text row no longer ranks every match (an OR of "
                    "terms costs about the rows asked for, an AND about its rarest term's documents) and "
                    "counts are exact and fast. Read-only on the database (a BMLibrarian "
                    "one too); the index lives in the app's data folder. Each batch is committed: Ctrl+C "
                    "stops and the next 'build' goes on. 'refresh' follows new, changed, withdrawn and "
                    "deleted documents without a rebuild (imports through the app refresh it themselves).",
    )
    topk.add_argument("action", choices=("build", "refresh", "status"))
    topk.add_argument("--rebuild", action="store_true", help="build: start from nothing (else it goes on "
                      "from an unfinished build, or adds the documents new since a finished "
                      "one and re-indexes those changed since)")
    topk.add_argument("--dsn", help=DSN_HELP)
    topk.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    topk.set_defaults(func=_topk)

    register_history(lit_sub)
    register_evaluate(lit_sub)
    register_screen(lit_sub)
    register_review(lit_sub)
    return lit_sub


@guarded
def _status(args: argparse.Namespace) -> int:
    # why: start-up time: they load psycopg
    from kmds_desktop.config import load_settings
    from kmds_desktop.literature.store.bmlibrarian_vectors import database_vector_status
    from kmds_desktop.literature.store.vectors import vector_status

    settings = load_settings()
    with literature_database(args) as db:
        info = db.status()
        info["vectors"] = vector_status(db, settings.index.embedding_model)
        info["database_vectors"] = database_vector_status(
            db, use_database_vectors=settings.retrieval.use_database_vectors)
    if args.json:
        print_json(info)
        return 0
    version = info["schema_version"]
    schema = f"version {version}" if info["schema_owner"] == "app" else "not managed by this app (used as is)"
    print(f"server:    {info['server']} (PostgreSQL {info['server_version']}, {info['mode']})")
    print(f"database:  {info['database']}")
    print(f"schema:    {schema}")
    print(f"documents: {info['documents']} ({info['withdrawn']} withdrawn)")
    for name, count in info["sources"].items():
        print(f"  {name:<20} {count}")
    own = info["database_vectors"]
    if own:
        approx = "≈" if own["estimated"] else ""
        print(f"database vectors: {approx}{own['with_vectors']} of {approx}{own['documents']} documents have "
              f"{own['described']} ({own['table']}, {own['dimensions']} dimensions); semantic rows search "
              f"them when {own['model']} is on the Ollama server")
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


@guarded(interrupted="indexing interrupted; the next 'literature topk build' goes on from there")
def _topk(args: argparse.Namespace) -> int:
    # why: start-up time: the window and the CLI import this module at start, these only when needed
    from kmds_desktop.literature.store.topk_build import build_index, index_folder, refresh_index
    from kmds_desktop.literature.store.topk_index import BuildState, TopKIndex
    from kmds_desktop.literature.store.topk_tiers import Tiers, describe_tiers

    with literature_database(args) as db:
        folder = index_folder(db)
        state = BuildState.load(folder / "state.json")
        if args.action == "status":
            if state is None:
                print("top-k index: not built ('kmds-desktop literature topk build'); "
                      "rows rank in PostgreSQL")
            else:
                done = "ready" if state.complete else "unfinished (run 'build' to go on)"
                print(f"top-k index: {done}, {state.documents:,} documents, {folder}")
                print(f"impact tiers: {describe_tiers(state, Tiers.load(folder / 'tiers.json'))}")
            return 0
        index = TopKIndex(folder)
        started = time.perf_counter()
        if args.action == "refresh":
            rep = refresh_index(db, index)
            print(f"top-k index refreshed: {rep.indexed:,} indexed, {rep.removed:,} removed "
                  f"in {time.perf_counter() - started:.1f} s")
            return 0
        state = build_index(db, index, progress=progress_line(args.quiet), rebuild=args.rebuild)
    end_progress()
    seconds = time.perf_counter() - started
    print(f"top-k index built: {state.documents:,} documents in {seconds:.1f} s ({folder})")
    return 0


@guarded(interrupted="embedding interrupted; the next run resumes")
def _embed(args: argparse.Namespace) -> int:
    """The batch in flight when Ctrl+C comes is rolled back; committed ones stay."""
    # why: start-up time: they load psycopg
    from kmds_desktop.config import load_settings
    from kmds_desktop.literature.store.vectors import embed_documents

    settings = load_settings()
    batch = args.batch_size if args.batch_size is not None else settings.retrieval.embed_batch_size
    if batch < 1 or (args.limit is not None and args.limit < 0):
        return fail("--batch-size must be at least 1 and --limit not negative", 2)
    allow = args.allow_schema_changes or settings.retrieval.allow_vectors_in_external_database
    with literature_database(args) as db:
        rep = embed_documents(
            db, model_name=settings.index.embedding_model, batch_size=batch, limit=args.limit,
            allow_external=allow, progress=progress_line(args.quiet))
    end_progress()
    print(f"embedded {plural(rep.embedded, 'document')} in {rep.seconds:.1f} s "
          f"({rep.per_second:.1f}/s, model {rep.model}); {rep.remaining:,} still need a vector")
    return 0


@guarded(interrupted="import interrupted; the file in progress was rolled back (files finished before it "
                     "are kept, and a folder's next import skips them)")
def _import(args: argparse.Namespace) -> int:
    """One call per file or folder, so the reports of earlier ones survive a later one's failure."""
    # why: start-up time: the CLI imports this module at start, that one only when needed
    from kmds_desktop.literature.errors import DiskFull, LiteratureError

    progress = progress_line(args.quiet)
    code = 0
    with literature_database(args) as db:
        for path in args.files:
            folder = Path(path).is_dir()
            started = time.perf_counter()
            try:
                if folder and args.again:
                    _forget_folder(db, Path(path))
                result = db.import_files([path], progress=progress)
            except DiskFull as err:  # the file is fine: the disk is the thing to fix
                code = fail(str(err) + (" The same command goes on from there." if folder else ""))
                continue
            except LiteratureError as err:
                resume = (" Files finished before it are kept and recorded: the same command goes on from "
                          "there (fix or remove the file first).")
                code = fail(str(err) + (resume if folder else ""))
                continue
            end_progress()
            if folder:
                _print_folder(path, result, time.perf_counter() - started)
                continue
            for rep in result.files:
                print(f"{rep.path}: {plural(rep.records, 'record')}, {rep.inserted:,} new, "
                      f"{rep.updated:,} updated, "
                      f"{rep.unchanged:,} unchanged, {len(rep.skipped):,} skipped ({rep.seconds:.1f} s)")
                _print_details(rep)
        if code == 0:
            code = _after_import(args, db)
        if code == 0:
            print_new_records(db, args.quiet)  # "2 reviews have 14 new records"
    return code


def _forget_folder(db: Any, folder: Any) -> None:
    """``--again``: drop the folder's files from the ledger of ``db``, so they are read anew."""
    # why: start-up time: it loads psycopg
    from kmds_desktop.literature.store.loading import ImportLedger, folder_files, ledger_path

    ImportLedger(ledger_path(db)).forget([p.name for p in folder_files(folder)])


def _print_details(rep: Any, name: str = "") -> None:
    for note in rep.notes:
        print(f"  {name}note: {note}")
    for skipped in rep.skipped[:_MAX_SKIPPED_SHOWN]:
        print(f"  {name}skipped {skipped.position}: {skipped.message}")
    if len(rep.skipped) > _MAX_SKIPPED_SHOWN:
        print(f"  {name}... and {len(rep.skipped) - _MAX_SKIPPED_SHOWN} more skipped")


def _print_folder(path: str, result: Any, seconds: float) -> None:
    """A folder's import in a few lines: totals, notes and skipped records per file, and the files
    skipped as imported before (1,200 lines for the PubMed baseline would bury them)."""
    rate = f", {result.records / seconds:,.0f} records/s" if seconds > 0 and result.records else ""
    withdrawn = f", {result.withdrawn:,} withdrawn" if result.withdrawn else ""
    print(f"{path}: {plural(len(result.files), 'file')} imported, {plural(result.records, 'record')}, "
          f"{result.inserted:,} new, {result.updated:,} updated, {result.unchanged:,} unchanged{withdrawn}, "
          f"{len(result.skipped):,} skipped ({seconds:.1f} s{rate})")
    for rep in result.files:
        _print_details(rep, f"{Path(rep.path).name}: ")
    skipped = len(result.already_imported)
    print(f"{plural(skipped, 'file')} skipped as already imported into this database"
          + (" (same size and time as then; --again imports them anew)" if skipped else ""))


def _after_import(args: argparse.Namespace, db: Any) -> int:
    """Embed the new documents (``--embed``) or say how many semantic rows cannot find yet."""
    # why: start-up time: they load psycopg
    from kmds_desktop.config import load_settings
    from kmds_desktop.literature.errors import LiteratureError
    from kmds_desktop.literature.store.vectors import embed_documents, vector_status

    settings = load_settings()
    try:
        if args.embed:
            rep = embed_documents(
                db, model_name=settings.index.embedding_model, batch_size=settings.retrieval.embed_batch_size,
                allow_external=settings.retrieval.allow_vectors_in_external_database,
                progress=progress_line(args.quiet))
            end_progress()
            print(f"embedded {plural(rep.embedded, 'document')} in {rep.seconds:.1f} s "
                  f"({rep.per_second:.1f}/s); {rep.remaining:,} still need a vector")
            return 0
        status = vector_status(db, settings.index.embedding_model)
    except LiteratureError as err:
        return fail(str(err))
    missing = status["needing"] or 0
    if status["available"] and missing > 0:
        has = "has" if missing == 1 else "have"
        print(f"{plural(missing, 'document')} {has} no vector yet, so semantic rows cannot find them: run "
              "'kmds-desktop literature embed' (or import with --embed)")
    return 0
