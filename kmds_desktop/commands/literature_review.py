"""``kmds-desktop literature review ...``: a review as one thing, headless.

``new``, ``list``, ``show``, ``rename``, ``delete``, ``strategy`` (save the searches of history sets as the
review's strategy; an edit is logged), ``update`` (re-run the strategy on the database as it is now: only
new records join), ``export`` / ``import`` (one versioned review file) and ``merge`` (a second screener's
returned review file). A review is the named screening review of ``literature screen ... REVIEW``: the
same name works in both. Every subcommand goes through :class:`~kmds_desktop.app.reviews.ReviewBook`, the
code the window drives; imports happen inside the handlers so ``kmds-desktop --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kmds_desktop.commands.common import DSN_HELP, guarded, literature_database, print_json

_STORE_HELP = "the screening file (default: screening/screening.sqlite3 in the data folder)"


def register_review(lit_sub: argparse._SubParsersAction) -> None:
    """Add ``review`` and its subcommands under ``literature``."""
    review = lit_sub.add_parser(
        "review",
        help="reviews as a whole: new, list, show, rename, delete, strategy, update, export, import, merge",
        description="A review keeps its questions, strategy, rounds, screening decisions and PRISMA flow in "
        "the data folder ('literature screen ... NAME' screens it).",
    )
    sub = review.add_subparsers(dest="review_command", metavar="SUBCOMMAND")
    review.set_defaults(func=lambda args: (review.print_help(), 2)[1])

    def parser(name: str, help_text: str, *, named: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        if named:
            p.add_argument("name", metavar="NAME", help="the review's name")
        p.add_argument("--store", type=Path, help=_STORE_HELP)
        return p

    new = parser("new", "make a review; --from-set N takes a history set's search as its strategy and its "
                 "documents as its first records")
    new.add_argument("--question", action="append", default=[], help="a review question (repeatable)")
    new.add_argument("--from-set", type=int, action="append", default=[], metavar="N",
                     help="a search-history set whose search is the strategy (repeatable)")
    new.add_argument("--dsn", help=DSN_HELP)
    new.set_defaults(func=_new)

    lst = parser("list", "the reviews of the data folder", named=False)
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=_list)

    show = parser("show", "questions, strategy, log of rounds, progress and the PRISMA flow per round")
    show.add_argument("--json", action="store_true")
    show.add_argument("--svg", type=Path, metavar="FILE",
                      help="also write the PRISMA 2020 diagram for updated reviews (previous studies, "
                      "the latest update, the total) as SVG")
    show.set_defaults(func=_show)

    ren = parser("rename", "give a review a new name (also the name 'literature screen' takes)")
    ren.add_argument("new_name", metavar="NEW_NAME")
    ren.set_defaults(func=_rename)

    dele = parser("delete", "delete a review with its records, decisions and log")
    dele.add_argument("--yes", action="store_true", help="delete a review that holds decisions")
    dele.set_defaults(func=_delete)

    strat = parser("strategy", "save the searches of history sets as the review's strategy (a new version, "
                   "logged)")
    strat.add_argument("--from-set", type=int, action="append", required=True, metavar="N")
    strat.add_argument("--note", default="", help="why the strategy changed (kept in the log)")
    strat.set_defaults(func=_strategy)

    upd = parser("update", "re-run the strategy on the database as it is now; only new records join")
    upd.add_argument("--dsn", help=DSN_HELP)
    upd.add_argument("--json", action="store_true")
    upd.set_defaults(func=_update)

    exp = parser("export", "write the review as one versioned file (to archive it or for a second screener)")
    exp.add_argument("output", type=Path)
    exp.add_argument("--reviewer", default="", help="who screened it (a second screener's name)")
    exp.set_defaults(func=_export)

    imp = parser("import", "import a review file as a new review (a name in use gets a free one)",
                 named=False)
    imp.add_argument("file", type=Path)
    imp.add_argument("--name", default=None, help="the new review's name (default: the file's)")
    imp.set_defaults(func=_import)

    mrg = parser("merge", "merge a second screener's returned review file: their decisions beside yours, "
                 "conflicts listed")
    mrg.add_argument("file", type=Path)
    mrg.add_argument("--reviewer", default=None, help="their name (default: the file's reviewer)")
    mrg.add_argument("--json", action="store_true")
    mrg.set_defaults(func=_merge)


def _book(args: argparse.Namespace) -> Any:
    from kmds_desktop.app.reviews import ReviewBook  # why: start-up time: it loads numpy, psycopg

    return ReviewBook(args.store)


def _history() -> Any:
    # why: start-up time: the CLI imports this module at start, that one only when needed
    from kmds_desktop.literature.strategy.history import SearchHistory

    return SearchHistory()


@guarded
def _new(args: argparse.Namespace) -> int:
    with _book(args) as book:
        if args.from_set:
            with _history() as history, literature_database(args) as db:
                name = book.new(args.name, args.question, history=history, database=db,
                                from_sets=args.from_set)
        else:
            name = book.new(args.name, args.question)
        print(f"review {name} made; {book.summaries()[-1].line() if book.summaries() else ''}".rstrip("; "))
    return 0


@guarded
def _list(args: argparse.Namespace) -> int:
    with _book(args) as book:
        rows = book.summaries()
        if args.json:
            print_json([r.to_dict() for r in rows])
            return 0
        if not rows:
            print("no reviews yet: make one with 'kmds-desktop literature review new NAME --question ...'")
        for r in rows:
            print(r.line())
    return 0


@guarded
def _show(args: argparse.Namespace) -> int:
    with _book(args) as book, _history() as history:
        if args.json:
            print_json(book.report(args.name, history))
            return 0
        for line in book.report_lines(args.name, history):
            print(line)
        if args.svg is not None:
            args.svg.write_text(book.flow_svg(args.name), encoding="utf-8")
            print(f"wrote {args.svg}")
    return 0


@guarded
def _rename(args: argparse.Namespace) -> int:
    with _book(args) as book:
        print(f"review {args.name} is now {book.rename(args.name, args.new_name)}")
    return 0


@guarded
def _delete(args: argparse.Namespace) -> int:
    from kmds_desktop.app.reviews import ReviewError  # why: start-up time: it loads numpy, psycopg

    with _book(args) as book:
        review = book.store.find(args.name)
        decided = len(book.store.decisions(review.id))
        if decided and not args.yes:
            raise ReviewError(f"review {review.id} holds {decided:,} decisions: export it first "
                              f"('literature review export {review.id} FILE') and add --yes to delete it")
        book.delete(review.id)
        print(f"deleted review {review.id} ({decided:,} decisions)")
    return 0


@guarded
def _strategy(args: argparse.Namespace) -> int:
    with _book(args) as book, _history() as history:
        saved = book.set_strategy(args.name, history, args.from_set, note=args.note)
        print(f"strategy version {saved.version} of {book.store.find(args.name).id}:")
        for line in saved.text.splitlines():
            print(f"  {line}")
    return 0


@guarded
def _update(args: argparse.Namespace) -> int:
    with _book(args) as book, _history() as history, literature_database(args) as db:
        outcome = book.update(args.name, history=history, database=db)
        if args.json:
            print_json({**outcome.to_dict(), "flow": book.flow(outcome.review).to_dict()})
            return 0
        print(outcome.line())
        print(f"  strategy version {outcome.strategy_version}, recorded as {', '.join(outcome.origins)} "
              "in the search history")
        for key, date in outcome.withdrawn.items():
            print(f"  withdrawn since: {key[0]}:{key[1]} on {date}")
        if outcome.new:
            print(f"  screen them with 'kmds-desktop literature screen order {outcome.review}' or in the "
                  "window")
    return 0


@guarded
def _export(args: argparse.Namespace) -> int:
    with _book(args) as book:
        print(f"wrote {book.export(args.name, args.output, reviewer=args.reviewer)}")
    return 0


@guarded
def _import(args: argparse.Namespace) -> int:
    with _book(args) as book:
        print(book.import_file(args.file, name=args.name).line())
    return 0


@guarded
def _merge(args: argparse.Namespace) -> int:
    with _book(args) as book:
        report = book.merge(args.name, args.file, reviewer=args.reviewer)
        if args.json:
            print_json(report.to_dict())
            return 0
        print(report.line())
        for key, mine, theirs in report.conflicts[:20]:
            print(f"  conflict: {key[0]}:{key[1]} yours {mine}, theirs {theirs}")
    return 0


def print_new_records(db: Any, quiet: bool = False) -> None:
    """After an import: say which reviews' strategies now find records they do not have ("2 reviews have
    14 new records"). Never fails the import: a problem is one note line."""
    from kmds_desktop.app.reviews import ReviewBook  # why: start-up time: it loads numpy, psycopg

    try:
        with ReviewBook() as book, _history() as history:
            if not book.store.reviews():
                return
            notice = book.new_records(db, history=history)
    except Exception as err:  # noqa: BLE001 - the import succeeded; the check is a courtesy
        print(f"note: the reviews could not be checked for new records: {err}", file=sys.stderr)
        return
    if notice.line():
        print(notice.line())
    for name, problem in notice.problems.items():
        if not quiet:
            print(f"note: review {name}'s strategy could not run: {problem}", file=sys.stderr)
