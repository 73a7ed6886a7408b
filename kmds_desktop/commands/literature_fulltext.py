"""``kmds-desktop literature fulltext import FOLDER`` / ``fulltext status``, ``literature evidence
QUESTION`` and ``literature answer QUESTION``: full texts and evidence, headless.

Each drives :class:`~kmds_desktop.app.evidence.EvidenceSession`, the code the window calls too. The
store is the data folder's own (``--data-dir`` moves it with everything else). Imports of the session
happen inside the handlers so ``kmds-desktop --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from kmds_desktop.commands.common import end_progress, guarded, print_json, progress_line


def register_fulltext(lit_sub: argparse._SubParsersAction) -> None:
    """Add ``fulltext`` (``import``, ``status``), ``evidence`` and ``answer`` under ``literature``."""
    fulltext = lit_sub.add_parser(
        "fulltext",
        help="full texts: import a folder of PDFs (pages, passages, full-text index, vectors), status",
        description="The app's own store of full texts (in the data folder): PDFs read page by page in a "
                    "bounded child process, split into passages with page ranges, indexed for full-text "
                    "search and embedded with the shipped model.",
    )
    ft_sub = fulltext.add_subparsers(dest="fulltext_command", metavar="SUBCOMMAND")
    fulltext.set_defaults(func=lambda args: (fulltext.print_help(), 2)[1])

    imp = ft_sub.add_parser(
        "import",
        help="import the PDFs under FOLDER (recursive; unchanged files skipped, moved ones re-linked, "
             "deleted ones removed)",
        description="Import the PDFs under FOLDER, incrementally by file content (SHA-256): an unchanged "
                    "file is skipped, a moved one keeps its passages, a file gone from the folder loses "
                    "them. A PDF that cannot be read (no text layer, encrypted, truncated, broken, too "
                    "slow) is listed with its reason and the rest imports.",
    )
    imp.add_argument("folder", metavar="FOLDER", nargs="?")
    imp.add_argument("--zotero", metavar="DATA_FOLDER",
                     help="import the PDF attachments of the Zotero library in DATA_FOLDER (read-only: a "
                          "copy of zotero.sqlite is read, Zotero's DOI and title are kept)")
    imp.add_argument("--match", action="store_true",
                     help="then match the PDFs to literature records (as 'fulltext match'); a PDF no record "
                          "matches gets a record made from its title, DOI, year and authors, in the app's "
                          "own database only (a BMLibrarian database is never written)")
    imp.add_argument("--dsn", help="with --match: a PostgreSQL database instead of the settings' own")
    imp.add_argument("--json", action="store_true",
                     help="print what happened to each file as JSON (with --match: each paper's record and "
                          "new_records, the records made from PDFs)")
    imp.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    imp.set_defaults(func=_import)

    status = ft_sub.add_parser("status", help="papers, pages and passages in the store; files that failed")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(func=_status)

    match = ft_sub.add_parser(
        "match",
        help="match each imported PDF to a literature record (DOI, then title, else one made from the "
             "PDF); corrections by hand kept",
        description="Match each imported PDF to a record of the literature database (--dsn, else the "
                    "settings' own): by its DOI, else by its title where one record has it, else a record "
                    "made from what the PDF says (title, DOI, year, authors; source 'From PDF'), once per "
                    "file and only in the app's own database: a BMLibrarian database is only read, and "
                    "its unmatched PDFs stay without a record. A paper set by hand ('fulltext record') "
                    "keeps its record.",
    )
    match.add_argument("--dsn", help="a PostgreSQL database instead of the settings' own")
    match.add_argument("--no-new-records", action="store_true",
                       help="make no record for a PDF no record matches (only read the database)")
    match.add_argument("--json", action="store_true", help="print each paper's match as JSON")
    match.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    match.set_defaults(func=_match)

    record = ft_sub.add_parser(
        "record",
        help="say which literature record an imported PDF is (kept across re-imports); --none, --clear",
        description="Correct a PDF's record by hand: PAPER (its id in 'fulltext status', its DOI or its "
                    "file) is record RECORD_ID of the literature database. The correction is kept by the "
                    "file's content: re-imports, moves and 'fulltext match' leave it. --none: the PDF is "
                    "none of the records; --clear: forget the correction (matched automatically again).",
    )
    record.add_argument("paper", metavar="PAPER")
    record.add_argument("record_id", metavar="RECORD_ID", nargs="?", type=int)
    record.add_argument("--none", action="store_true", help="the PDF is none of the literature records")
    record.add_argument("--clear", action="store_true", help="forget the correction made by hand")
    record.add_argument("--dsn", help="check RECORD_ID in this PostgreSQL database, not the settings' one")
    record.add_argument("--no-check", action="store_true",
                        help="do not open the literature database to check that RECORD_ID exists")
    record.add_argument("--json", action="store_true", help="print the paper's record as JSON")
    record.set_defaults(func=_record)

    evidence = lit_sub.add_parser(
        "evidence",
        help="the passages of the imported full texts that best answer QUESTION (hybrid search)",
        description="Rank the imported full texts' passages for QUESTION: full-text (bm25) and meaning "
                    "(the shipped embedding model), fused by reciprocal rank fusion.",
    )
    evidence.add_argument("question", metavar="QUESTION")
    evidence.add_argument("--top", type=int, default=10, metavar="N", help="passages to show (default 10)")
    evidence.add_argument("--option", action="append", default=[], metavar="TEXT",
                          help="a multiple-choice question's option (repeat for each): searched with the "
                               "question, as 'literature choose' does (the passage naming one ranks higher)")
    evidence.add_argument("--review", metavar="NAME",
                          help="only the PDFs of the records this review included ('fulltext match')")
    evidence.add_argument("--json", action="store_true",
                          help="print the passages as JSON (each with its DOI or file, pages and text)")
    evidence.set_defaults(func=_evidence)

    answer = lit_sub.add_parser(
        "answer",
        help="answer QUESTION from the imported full texts: quoted sentences cited with paper and page",
        description="An offline, extractive answer: the best sentences of the best passages, each cited "
                    "[n] with its paper and page, each quote checked verbatim on that page (dropped "
                    "otherwise, and counted in the notes). Weak evidence is answered 'These sources do not "
                    "answer it.'",
    )
    answer.add_argument("question", metavar="QUESTION")
    answer.add_argument("--json", action="store_true", help="print the answer as JSON")
    answer.add_argument("--markdown", metavar="FILE", help="also write the answer as Markdown to FILE")
    answer.add_argument("--review", metavar="NAME",
                        help="only the PDFs of the records this review included ('fulltext match')")
    answer.set_defaults(func=_answer)


def _session() -> Any:
    # why: start-up time: the CLI imports this module at start, that one only when needed
    from kmds_desktop.app.evidence import EvidenceSession

    return EvidenceSession()


@guarded
def _import(args: argparse.Namespace) -> int:
    if (args.folder is None) == (args.zotero is None):
        raise ValueError("give either FOLDER (a folder of PDFs) or --zotero DATA_FOLDER, not both or none")
    if args.dsn and not args.match:
        raise ValueError("--dsn names the database to match records in; add --match")
    quiet = args.quiet or args.json
    source = Path(args.zotero if args.zotero is not None else args.folder).expanduser()
    if args.zotero is None and not source.is_dir():
        raise ValueError(f"{source} is not a folder; give the folder that holds the PDFs")
    with contextlib.ExitStack() as stack:
        session = stack.enter_context(_session())
        db = stack.enter_context(_database(args)) if args.match else None
        run = session.import_zotero if args.zotero is not None else session.import_folder
        result = run(source, progress=progress_line(quiet), db=db)
    end_progress()
    if args.json:
        print_json(result.as_dict())
    else:
        print(f"{result.folder}: {result.summary()} "
              f"({result.pages_read} pages read in {result.seconds:.1f} s)")
        for outcome in result.failures:
            print(f"  {Path(outcome.path).name}: {outcome.reason}")
    return 0


def _database(args: argparse.Namespace) -> Any:
    from kmds_desktop.commands.common import literature_database  # why: start-up time: loads psycopg

    return literature_database(args)


@guarded
def _status(args: argparse.Namespace) -> int:
    with _session() as session:
        status = session.status()
    if args.json:
        print_json(status)
        return 0
    print(f"store: {status['store']}")
    print(f"{status['paper_count']} papers, {status['pages']} pages, {status['passages']} passages, "
          f"{status['failed']} failed")
    for paper in status["papers"]:
        if paper["status"] != "ok":
            print(f"  {Path(paper['file']).name}: {paper['reason']}")
    return 0


@guarded
def _match(args: argparse.Namespace) -> int:
    from kmds_desktop.commands.common import literature_database  # why: start-up time: loads psycopg

    with _session() as session, literature_database(args) as db:
        result = session.match_records(db, progress=progress_line(args.quiet or args.json),
                                       create=not args.no_new_records)
    end_progress()
    if args.json:
        print_json(result.as_dict())
        return 0
    print(result.summary())
    for found in result.matches:
        where = f"{found.record_label or found.record_id} ({found.how})" if found.record_id else found.note
        print(f"  {Path(found.file).name}: {where}")
    return 0


@guarded
def _record(args: argparse.Namespace) -> int:
    from kmds_desktop.commands.common import literature_database  # why: start-up time: loads psycopg

    chosen = sum([args.record_id is not None, args.none, args.clear])
    if chosen != 1:
        raise ValueError("give one of RECORD_ID, --none (the PDF is no record) or --clear (forget the "
                         "correction)")
    with _session() as session:
        paper = session.find_paper(args.paper)
        if args.clear:
            paper = session.clear_record(paper.id)
            data: dict[str, Any] = {"paper_id": paper.id, "file": paper.path, "record_id": None,
                                    "match": None, "note": "correction forgotten; run 'fulltext match'"}
        elif args.none or args.no_check:
            data = session.set_record(paper.id, None if args.none else args.record_id).as_dict()
        else:
            with literature_database(args) as db:
                data = session.set_record(paper.id, args.record_id, db).as_dict()
    if args.json:
        print_json(data)
        return 0
    target = ("no record" if data["record_id"] is None and data["match"] == "manual" else
              data.get("record") or data["record_id"] or data.get("note"))
    print(f"{Path(str(data['file'])).name}: {target}")
    return 0


@guarded
def _evidence(args: argparse.Namespace) -> int:
    with _session() as session:
        scope = session.review_scope(args.review) if args.review else None
        hits = session.evidence(args.question, top=args.top, paper_ids=scope.paper_ids if scope else None,
                                options=args.option)
    if scope is not None and not args.json:
        print(scope.line(), file=sys.stderr)
    if args.json:
        print_json({"question": args.question, "passages": [h.as_dict() for h in hits]})
        return 0
    if not hits:
        print("no passages: import PDFs first (kmds-desktop literature fulltext import FOLDER)",
              file=sys.stderr)
        return 0
    for hit in hits:
        print(f"{hit.rank}. {hit.label}, p. {hit.pages}")
        print(f"   {hit.text[:400]}{'...' if len(hit.text) > 400 else ''}")
    return 0


@guarded
def _answer(args: argparse.Namespace) -> int:
    with _session() as session:
        scope = session.review_scope(args.review) if args.review else None
        answer = session.answer(args.question, paper_ids=scope.paper_ids if scope else None)
    if args.markdown:
        target = Path(args.markdown).expanduser()
        try:
            target.write_text(answer.markdown(), encoding="utf-8")
        except OSError as err:
            raise ValueError(f"cannot write {target} ({err.strerror or err}); choose another file") from None
    if args.json:
        print_json(answer.as_dict())
        return 0
    print(answer.text)
    for source in answer.sources:
        print(f"[{source.number}] {source.label}, {source.page_text}")
    for note in answer.notes:
        print(f"note: {note}")
    return 0
