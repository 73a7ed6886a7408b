"""``kmds-desktop literature evaluate``: recall@100 and nDCG@10 of a search strategy on judged questions."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kmds_desktop.commands.common import (
    DSN_HELP,
    end_progress,
    fail,
    generation_settings,
    guarded,
    literature_database,
    print_json,
    progress_line,
)


def register_evaluate(lit_sub: argparse._SubParsersAction) -> None:
    """Add the ``evaluate`` subcommand under ``literature``."""
    ev = lit_sub.add_parser(
        "evaluate",
        help="measure recall@100 and nDCG@10 of the search rows on judged questions",
        description="Run every question of --queries through the same rows a search uses (generated "
                    "full-text queries, the semantic row, a hypothetical abstract), fused as the settings "
                    "say, and print recall@100 and nDCG@10 (ir-measures) per row type and fused. Judged "
                    "document ids are external ids (PMIDs for PubMed).",
    )
    ev.add_argument("--queries", required=True, metavar="Q.jsonl",
                    help="questions, one JSON object per line with 'id' and 'text'")
    ev.add_argument("--qrels", required=True, metavar="Q.tsv",
                    help="judgements: TSV with query_id, doc_id, score columns, or TREC 'qid 0 docid rel'")
    ev.add_argument("--rows", default="fulltext,semantic",
                    help="comma-separated row types: fulltext, semantic, hypothetical (default: %(default)s)")
    ev.add_argument("--split", help="only questions whose 'split' field has this value (e.g. train)")
    ev.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N questions")
    ev.add_argument("--models", help="comma-separated query generators (default: query_generation.models)")
    ev.add_argument("--queries-per-model", type=int, choices=(1, 2, 3), metavar="N",
                    help="full-text queries per model, 1-3")
    ev.add_argument("--max-rows", type=int, default=100, metavar="N", help="documents per row (default 100)")
    ev.add_argument("--ranking", choices=("bm25", "idf", "ts_rank_cd"), default=None,
                    help="how full-text rows rank their matches: bm25 (the top-k index; idf until it is "
                         "built), idf (term rarity, like BM25) or ts_rank_cd (every word alike) "
                         "(default: retrieval.fulltext_ranking)")
    ev.add_argument("--rerank", action=argparse.BooleanOptionalAction, default=None,
                    help="re-rank fused candidates by similarity to the question (default: retrieval.rerank)")
    ev.add_argument("--dsn", help=DSN_HELP)
    ev.add_argument("--json", action="store_true", help="print the table as JSON")
    ev.set_defaults(func=_evaluate)


@guarded
def _evaluate(args: argparse.Namespace) -> int:
    # why: start-up time: the CLI and the window import this module at start, these only when needed
    from kmds_desktop.config import load_settings
    from kmds_desktop.literature.errors import LiteratureError
    from kmds_desktop.literature.queries.agent import QueryAgent
    from kmds_desktop.literature.retrieval.evaluation import (
        evaluate_runs,
        format_table,
        load_qrels,
        load_questions,
        run_questions,
    )

    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    if args.max_rows < 1 or (args.limit is not None and args.limit < 1):
        return fail("--max-rows and --limit must be at least 1", 2)
    settings = load_settings()
    qg, retrieval = generation_settings(args, settings)
    try:
        questions = load_questions(args.queries, args.split)[: args.limit]
        qrels = load_qrels(args.qrels)
    except LiteratureError as err:  # the files named: the command's input, as its options
        return fail(str(err), 2)
    questions = [q for q in questions if q.id in qrels]
    if not questions:
        return fail("none of the questions has a judgement in --qrels", 2)

    with literature_database(args, settings.literature) as db:
        agent = QueryAgent(db, qg, retrieval=retrieval, embedding_model=settings.index.embedding_model)
        runs = run_questions(agent, questions, rows, max_rows=args.max_rows,
                             progress=progress_line(args.json, width=60))
        table = evaluate_runs(db, runs, qrels, [*rows, "fused"])
    end_progress()
    errors = [e for r in runs for e in r.errors]
    if args.json:
        payload: dict[str, Any] = {"questions": len(questions), "rows": rows, "measures": table,
                                   "errors": errors[:50], "error_count": len(errors)}
        print_json(payload)
        return 0
    print(format_table(table, len(questions)))
    if errors:
        print(f"{len(errors)} row(s) failed, e.g.: {errors[0]}", file=sys.stderr)
    return 0
