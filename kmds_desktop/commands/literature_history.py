"""``kmds-desktop literature history | combine | check | overlap | report``: the strategy workbench, headless.

Every ``literature search`` is recorded as a numbered set; these commands list, rename, re-run and
delete sets, combine them (``combine "#1 AND (#2 OR #3) NOT #4"``), check known papers against them,
show how the rows of a search overlap, and write the search report. ``--json`` prints the same
information as JSON. The window's history panel drives the same :class:`SearchWorkbench`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from kmds_desktop.commands.common import DSN_HELP as _DSN_HELP
from kmds_desktop.commands.common import guarded, literature_database
from kmds_desktop.commands.common import print_json as _dump

#: Documents ``history show`` lists (the set's count is printed above them, the rest said below).
SHOWN_MEMBERS = 10


def register_history(lit_sub: argparse._SubParsersAction) -> None:
    """Add ``history``, ``combine``, ``check``, ``overlap`` and ``report`` under ``literature``."""
    hist = lit_sub.add_parser(
        "history", help="the numbered sets of past searches: list, show, rename, rerun, delete",
        description="List the search history (every 'literature search' and 'combine' is a numbered set), "
                    "or show, rename, re-run or delete one set.")
    hist.add_argument("--json", action="store_true", help="print the history as JSON")
    hist.set_defaults(func=_wrap(_history_list))
    hsub = hist.add_subparsers(dest="history_command", metavar="ACTION")
    show = hsub.add_parser("show", help="one set: its rows as run and its first documents")
    show.add_argument("number", type=_set_number, metavar="N")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_wrap(_history_show))
    rename = hsub.add_parser("rename", help="give set N a name")
    rename.add_argument("number", type=_set_number, metavar="N")
    rename.add_argument("name", metavar="NAME")
    rename.add_argument("--json", action="store_true")
    rename.set_defaults(func=_wrap(_history_rename))
    rerun = hsub.add_parser("rerun", help="run search N's rows again on today's database (a new set) and "
                                          "show the documents added and removed")
    rerun.add_argument("number", type=_set_number, metavar="N")
    rerun.add_argument("--dsn", help=_DSN_HELP)
    rerun.add_argument("--json", action="store_true")
    rerun.set_defaults(func=_wrap(_history_rerun, needs_db=True))
    delete = hsub.add_parser("delete", help="delete set N (combinations made from it keep their documents)")
    delete.add_argument("number", type=_set_number, metavar="N")
    delete.add_argument("--json", action="store_true")
    delete.set_defaults(func=_wrap(_history_delete))

    combine = lit_sub.add_parser(
        "combine", help="combine sets: \"#1 AND (#2 OR #3) NOT #4\" (saved as a new set)",
        description="Evaluate a set expression over the history and save the result as a new set. #N is set "
                    "N, #N.K row K of search N; AND and NOT bind tighter than OR; NOT means 'in the left "
                    "set, not in the right one'. --count only counts.")
    combine.add_argument("expression", metavar="EXPRESSION")
    combine.add_argument("--count", action="store_true", help="only print how many documents it gives")
    combine.add_argument("--name", default="", help="a name for the new set")
    combine.add_argument("--json", action="store_true")
    combine.set_defaults(func=_wrap(_combine))

    check = lit_sub.add_parser(
        "check", help="check known papers (PMIDs, DOIs, source ids, RIS or BibTeX) against sets",
        description="Which known papers are in the database, which sets and rows find them, the recall, "
                    "and for each paper the strategy misses, the words of each row it lacks. Papers that are "
                    "not in the database are listed as such, not as misses.")
    source = check.add_mutually_exclusive_group(required=True)
    source.add_argument("--known", metavar="FILE", help="a .ris, .bib or text file of PMIDs/DOIs/source ids")
    source.add_argument("--ids", metavar="TEXT",
                        help="identifiers as text, e.g. 'PMID 123, 10.1000/x, cf:139'")
    check.add_argument("--set", type=_set_number, action="append", dest="sets", metavar="N",
                       help="a set to check (repeatable; the last one is the strategy; default: the latest)")
    check.add_argument("--dsn", help=_DSN_HELP)
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=_wrap(_check, needs_db=True))

    over = lit_sub.add_parser("overlap", help="documents shared by the rows of searches (counts, Jaccard, "
                                              "unique per row and per model)")
    over.add_argument("numbers", type=_set_number, nargs="+", metavar="N",
                      help="searches or combinations (a combination stands for the searches it was made "
                           "from, as in the window's Row overlap)")
    over.add_argument("--json", action="store_true")
    over.set_defaults(func=_wrap(_overlap))

    report = lit_sub.add_parser(
        "report", help="the search report of set N (Markdown or JSON) and its documents (RIS/BibTeX/CSV)",
        description="Write the report of set N for a methods section: database, date, counts, every row as "
                    "run with its provenance, the set algebra, de-duplication and (with --known) the recall.")
    report.add_argument("number", type=_set_number, metavar="N")
    report.add_argument("--known", metavar="FILE", help="known papers to report the recall on")
    report.add_argument("--out", metavar="FILE",
                        help="write the report here (.md or .json) instead of stdout")
    report.add_argument("--documents", metavar="FILE",
                        help="also export the set's documents (.ris, .bib, .csv)")
    report.add_argument("--dsn", help=_DSN_HELP)
    report.add_argument("--json", action="store_true", help="the report as JSON")
    report.set_defaults(func=_wrap(_report, needs_db=lambda a: bool(a.known or a.documents)))


def _set_number(text: str) -> int:
    value = text.strip().lstrip("#")
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a set number (like 3 or #3)")
    return int(value)


def _wrap(handler: Callable[..., int], needs_db: bool | Callable[[Any], bool] = False,
          ) -> Callable[[argparse.Namespace], int]:
    """Open the history (and the database when needed), run ``handler``; errors are
    :func:`~kmds_desktop.commands.common.guarded`'s one line."""

    @guarded
    def run(args: argparse.Namespace) -> int:
        # why: start-up time: the CLI imports this module at start, that one only when needed
        from kmds_desktop.literature.strategy.history import SearchHistory
        from kmds_desktop.literature.strategy.workbench import SearchWorkbench

        history = SearchHistory()
        try:
            wanted = needs_db(args) if callable(needs_db) else needs_db
            with literature_database(args) if wanted else nullcontext() as db:
                return handler(args, SearchWorkbench(history, db))
        finally:
            history.close()

    return run


def _short(text: str, width: int = 70) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 1] + "…"


def _history_list(args: argparse.Namespace, wb: Any) -> int:
    sets = wb.history.list_sets()
    if args.json:
        _dump({"history": str(wb.history.path), "sets": [s.to_dict() for s in sets]})
        return 0
    if not sets:
        print("the search history is empty: run 'kmds-desktop literature search QUESTION'")
        return 0
    for s in sets:
        count = "" if s.document_count is None else f"{s.document_count} documents"
        state = "" if s.complete else f" [{s.state}]"
        what = f"{len(s.rows)} rows" if s.kind != "combination" else "combination"
        print(f"#{s.number:<4} {(s.finished_at or s.started_at)[:16]}  {count:<15} {what:<12} "
              f"{_short(s.title)}{state}")
    return 0


def _history_show(args: argparse.Namespace, wb: Any) -> int:
    s = wb.history.get(args.number)
    if args.json:
        data = s.to_dict()
        data["members"] = [vars(m) for m in wb.history.members(s.number)] if s.complete else []
        _dump(data)
        return 0
    print(f"#{s.number} {s.kind} ({s.state}) {s.finished_at or s.started_at} on {s.database}")
    if s.name:
        print(f"name:       {s.name}")
    print(f"question:   {s.question}")
    if s.expression:
        print(f"expression: {s.expression}  (read as {s.details.get('canonical')})")
    print(f"documents:  {s.document_count}")
    for r in s.rows:
        count = f"error: {r.error}" if r.error else f"{r.matches} matches, {r.ids_returned} returned, " \
                                                   f"{r.unique_ids} unique"
        print(f"  #{s.number}.{r.position} {r.text}\n        {r.provenance_text()}; {count}")
    tiered = ((s.details or {}).get("retrieval") or {}).get("tier_ranked_rows")
    if tiered:
        # why: start-up time: the CLI imports this module at start, that one only when needed
        from kmds_desktop.app.literature import tier_sentence

        print(f"ranking:    {tier_sentence(tiered)}")
    if s.complete:
        members = wb.history.members(s.number)
        for m in members[:SHOWN_MEMBERS]:
            print(f"  {m.rank:>4}. {m.source} {m.external_id} (id {m.doc_id})")
        if len(members) > SHOWN_MEMBERS:  # a cap is said where it applies
            print(f"  showing {SHOWN_MEMBERS} of {len(members):,} documents: --json lists them all, "
                  f"'literature report {s.number} --documents FILE' exports them")
    return 0


def _history_rename(args: argparse.Namespace, wb: Any) -> int:
    s = wb.history.rename(args.number, args.name)
    if args.json:
        _dump(s.to_dict())
    else:
        print(f"#{s.number} is now named '{s.name}'")
    return 0


def _history_delete(args: argparse.Namespace, wb: Any) -> int:
    wb.history.delete(args.number)
    if args.json:
        _dump({"deleted": args.number})
    else:
        print(f"deleted #{args.number}")
    return 0


def _history_rerun(args: argparse.Namespace, wb: Any) -> int:
    result = wb.rerun(args.number)
    if args.json:
        _dump({"original": result.original.number, "new": result.new.to_dict(),
               "added": [vars(m) for m in result.added], "removed": [vars(m) for m in result.removed]})
        return 0
    print(f"#{result.new.number}: re-run of #{result.original.number} on {result.new.database}: "
          f"{result.new.document_count} documents (was {result.original.document_count}), "
          f"{len(result.added)} added, {len(result.removed)} removed")
    for sign, members in (("+", result.added), ("-", result.removed)):
        for m in members[:20]:
            print(f"  {sign} {m.source} {m.external_id}")
        if len(members) > 20:
            print(f"  {sign} ... and {len(members) - 20} more")
    return 0


def _combine(args: argparse.Namespace, wb: Any) -> int:
    if args.count:
        c = wb.count(args.expression)
        if args.json:
            _dump({"expression": c.expression, "canonical": c.canonical, "count": c.count,
                   "operands": c.operands})
        else:
            print(f"{c.count} documents  ({c.canonical})")
        return 0
    s = wb.combine(args.expression, name=args.name)
    if args.json:
        _dump(s.to_dict())
    else:
        print(f"#{s.number}: {s.document_count} documents  ({s.details.get('canonical')})")
    return 0


def _check(args: argparse.Namespace, wb: Any) -> int:
    from kmds_desktop.app.strategy import check_known_papers  # why: start-up time: it loads psycopg

    result = check_known_papers(wb, file=args.known, text=args.ids or "", sets=args.sets).check
    if args.json:
        _dump(result.to_dict())
        return 0
    from kmds_desktop.app.presentation import known_check_text  # why: start-up time: it loads psycopg

    print(known_check_text(result), end="")
    return 0


def _overlap(args: argparse.Namespace, wb: Any) -> int:
    from kmds_desktop.app.strategy import searches_overlap  # why: start-up time: it loads psycopg

    result = searches_overlap(wb.history, list(args.numbers))
    if args.json:
        _dump(result.to_dict())
    else:
        print(result.text(), end="")
    return 0


def _report(args: argparse.Namespace, wb: Any) -> int:
    # why: start-up time: it loads psycopg
    from kmds_desktop.app.presentation import report_markdown, write_report
    from kmds_desktop.app.strategy import check_known_papers, set_report

    known = check_known_papers(wb, file=args.known, sets=[args.number]).check if args.known else None
    report = set_report(wb, args.number, known, documents=args.documents)
    if args.documents:
        written = report["documents_file"]
        print(f"wrote {written['documents']} documents to {written['path']}", file=sys.stderr)
    if args.out:
        out = write_report(report, args.out, "json" if args.json else None)
        print(f"wrote the report of #{args.number} to {out}", file=sys.stderr)
    elif args.json:
        _dump(report)
    else:
        print(report_markdown(report), end="")
    return 0
