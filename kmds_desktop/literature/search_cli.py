"""``kmds-desktop literature search QUESTION``: the query agent, headless.

Generates queries with the configured models (or ``--models``), runs the unique ones as ID-only
queries, merges the ID sets and fetches the documents once. ``--json`` prints everything the GUI's
review and documents tables show: each generated query (model, attempt, time, error), per-query
statistics, the merged ids (best rank first), which queries found each document, and the documents.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register_search(lit_sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add the ``search`` subcommand under ``literature``."""
    search = lit_sub.add_parser(
        "search",
        help="generate full-text queries for a question with one or more models and run them",
        description="Generate PostgreSQL full-text queries for QUESTION (models from the settings' "
                    "query_generation section, or --models), run them ID-only, merge the results and "
                    "fetch the documents once. 'builtin:keywords' needs no LLM.",
    )
    search.add_argument("question", metavar="QUESTION")
    search.add_argument("--models", help="comma-separated models, e.g. 'llama3.1:8b,builtin:keywords' "
                                         "(enables multi-model generation)")
    search.add_argument("--queries-per-model", type=int, choices=(1, 2, 3), metavar="N",
                        help="queries each model proposes, 1-3 (enables multi-model generation)")
    search.add_argument("--max-rows", type=int, default=None, metavar="N",
                        help="documents per query (default: literature.max_rows)")
    search.add_argument("--dsn", help="connect to this PostgreSQL instead of the embedded server")
    search.add_argument("--json", action="store_true",
                        help="print queries, statistics, ids and documents as JSON")
    search.set_defaults(func=_search)


def _settings(args: argparse.Namespace) -> tuple[Any, Any]:
    from pydantic import ValidationError

    from kmds_desktop.config import SettingsError, describe_validation_error, load_settings

    settings = load_settings()
    qg = settings.query_generation.model_copy()
    try:
        if args.models:
            qg.models = [m for m in args.models.split(",") if m.strip()]
            qg.multi_model_enabled = True
        if args.queries_per_model:
            qg.queries_per_model = args.queries_per_model
            qg.multi_model_enabled = True
    except ValidationError as err:  # pydantic validates assignments
        detail = describe_validation_error(err, "query_generation.")
        raise SettingsError(f"invalid option: {detail}") from None
    return settings, qg


def _search(args: argparse.Namespace) -> int:
    from kmds_desktop.config import SettingsError
    from kmds_desktop.literature.agent import QueryAgent, QueryAgentError
    from kmds_desktop.literature.database import open_database
    from kmds_desktop.literature.errors import LiteratureError

    try:
        settings, qg = _settings(args)
    except SettingsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    max_rows = args.max_rows if args.max_rows is not None else settings.literature.max_rows
    if max_rows < 1:
        print("error: --max-rows must be at least 1", file=sys.stderr)
        return 2
    quiet = args.json

    def on_result(row: Any) -> None:
        if not quiet:
            shown = row.query if row.ok else f"(failed: {row.error})"
            print(f"  [{row.model} #{row.attempt_number}, {row.generation_time:.2f} s] {shown}",
                  file=sys.stderr)

    def on_query(stat: Any) -> None:
        if not quiet:
            if stat.ok:
                print(f"  ran '{stat.query}': {stat.matches} matches, {stat.ids_returned} returned "
                      f"({stat.time_s:.2f} s)", file=sys.stderr)
            else:
                print(f"  skipped '{stat.query}': {stat.error}", file=sys.stderr)

    try:
        db = open_database(dsn=args.dsn, settings=settings.literature)
    except LiteratureError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    try:
        agent = QueryAgent(db, qg, fetch_batch_size=settings.literature.fetch_batch_size)
        if not quiet:
            used = qg.models if qg.multi_model_enabled else qg.models[:1]
            print(f"generating queries with {', '.join(used)}", file=sys.stderr)
        generated = agent.convert_question_multi_model(args.question, on_result=on_result)
        if not generated.unique_queries:
            errors = "; ".join(f"{r.model}: {r.error}" for r in generated.failed)
            raise QueryAgentError(f"no query could be generated ({errors})")
        result = agent.run_reviewed_queries(generated.unique_queries, max_rows=max_rows, on_query=on_query)
    except (QueryAgentError, LiteratureError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("cancelled", file=sys.stderr)
        return 130
    finally:
        db.close()

    if args.json:
        payload = {"generation": generated.to_dict(), **result.to_dict()}
        print(json.dumps(payload, indent=2, ensure_ascii=False, default=str))
        return 0
    print(f"{len(result.ids)} documents from {len(result.ok_queries)} of {len(result.queries)} queries")
    for doc in result.documents:
        year = doc.get("year") or ""
        print(f"- [{doc['id']}] {doc.get('title') or '(no title)'} {f'({year})' if year else ''}".rstrip())
    return 0
