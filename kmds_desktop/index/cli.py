"""``kmds-desktop index KB_FILE [--query TEXT] [--json]``: build, update or search a KB's index.

Building is incremental (only new or changed findings are embedded), so ``--query`` first brings
the index up to date and then searches it. Nothing heavy is imported until a command runs, so
``kmds-desktop --help`` stays fast. Errors print one line on stderr and exit with status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from kmds_desktop.index.entries import WORKFLOW_CATEGORY
from kmds_desktop.index.errors import SemanticIndexError
from kmds_desktop.kb.vocabulary import CATEGORIES
from kmds_desktop.tasks import Cancelled


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``index`` to the main parser."""
    p = sub.add_parser(
        "index",
        help="build or update a KB's semantic index, or search it (--query)",
        description=(
            "Build or update the semantic index of a KMDS knowledge base (only new or changed "
            "observations are embedded), or search it by meaning with --query. The index lives in "
            "the data folder's index/ (or on a Chroma server when the setting index.mode is 'server')."
        ),
    )
    p.add_argument("kb_file", metavar="KB_FILE", help="KMDS knowledge base (RDF/XML)")
    p.add_argument("--query", "-q", metavar="TEXT", help="search the index for TEXT instead of only building")
    p.add_argument("--json", action="store_true", help="print search results as JSON")
    p.add_argument("-n", "--n-results", type=int, default=None, help="number of results (default: setting)")
    p.add_argument(
        "--category",
        choices=(*CATEGORIES, WORKFLOW_CATEGORY),
        help="only this category ('workflow': the workflow descriptions)",
    )
    p.add_argument("--obs-type", help="only observation types containing this text")
    p.add_argument("--workflow", help="only observations of this workflow")
    p.add_argument(
        "--rebuild",
        action="store_true",
        help="embed everything again; a damaged index folder is moved aside (never deleted) first",
    )
    p.add_argument("--persist-dir", metavar="DIR", help="index folder (default: DATA_DIR/index)")
    p.add_argument("--model", metavar="NAME", help="embedding model name or folder (default: setting)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


class ProgressBar:
    """A one-line text progress bar on stderr, driven by the core's ``progress`` callback."""

    def __init__(self, stream: TextIO, width: int = 30) -> None:
        self.stream = stream
        self.width = width
        self._shown = False

    def __call__(self, done: int, total: int | None, message: str) -> None:
        if total:
            filled = int(self.width * min(done, total) / total)
            bar = "#" * filled + "-" * (self.width - filled)
            line = f"[{bar}] {done}/{total} {message}"
        else:
            line = message
        self.stream.write("\r\x1b[K" + line if self.stream.isatty() else line + "\n")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown and self.stream.isatty():
            self.stream.write("\n")
            self.stream.flush()


def run(args: argparse.Namespace) -> int:
    # why: start-up time: the CLI imports this module at start, that one only when needed
    from kmds_desktop.config import SettingsError, load_settings

    bar = ProgressBar(sys.stderr)
    progress = None if args.quiet else bar
    try:
        settings = load_settings()
        if args.n_results is not None and args.n_results < 1:
            raise SemanticIndexError(f"-n must be at least 1, not {args.n_results}")
        n_results = args.n_results or settings.index.n_results
        if args.query is not None and not args.query.strip():
            raise SemanticIndexError("the question is empty: type a few words to search for")
        if args.rebuild:
            # why: start-up time: the window imports this module at start, that one only when needed
            from kmds_desktop.index.factory import rebuild_index

            result, moved = rebuild_index(
                args.kb_file,
                settings,
                persist_dir=args.persist_dir,
                model_name=args.model,
                progress=progress,
            )
            bar.close()
            if moved is not None:
                print(f"the damaged index was moved to {moved}", file=sys.stderr)
            index = None
        else:
            # why: start-up time: the window imports this module at start, that one only when needed
            from kmds_desktop.index.factory import open_index

            index = open_index(settings, persist_dir=args.persist_dir, model_name=args.model)
            result = index.build(args.kb_file, progress=progress)
            bar.close()
        if args.query is None:
            print(f"index of {args.kb_file} is up to date: {result.summary()}")
            return 0
        if index is None:
            # why: start-up time: the window imports this module at start, that one only when needed
            from kmds_desktop.index.factory import open_index

            index = open_index(settings, persist_dir=args.persist_dir, model_name=args.model)
            index.attach(result.kb_id)
        hits = index.search(
            args.query,
            n_results,
            category=args.category,
            obs_type=args.obs_type,
            workflow=args.workflow,
        )
    except (SemanticIndexError, SettingsError) as err:
        bar.close()
        print(f"error: {err}", file=sys.stderr)
        return 1
    except (Cancelled, KeyboardInterrupt):
        bar.close()
        print(
            "error: cancelled; what was indexed so far is kept, run the command again to finish",
            file=sys.stderr,
        )
        return 1
    if args.json:
        json.dump(hits, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        _print_hits(hits, sys.stdout)
    return 0


def _print_hits(hits: list[dict[str, Any]], out: TextIO) -> None:
    if not hits:
        out.write("no results\n")
        return
    for i, hit in enumerate(hits, 1):
        where = hit["workflow_name"] or "no workflow"
        seq = "" if hit["finding_seq"] in (None, -1) else f", #{hit['finding_seq']}"
        intent = f", {hit['intent']}" if "intent" in hit else ""
        head = f"{hit['category']} / {hit['obs_type']} ({where}{seq}{intent})"
        out.write(f"{i}. [{hit['distance']:.3f}] {head}\n")
        text = " ".join(str(hit["finding"]).split())
        out.write(f"   {text[:300]}{'...' if len(text) > 300 else ''}\n")
