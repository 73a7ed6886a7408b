"""``kmds-desktop literature search QUESTION``: the query agent, headless.

Drives the same :class:`~kmds_desktop.app.literature.LiteratureSession` as the window: one
generation round with the configured models (or ``--models``), every query the round offered run as
an ID-only query, the ID sets merged (best rank first) and the documents fetched once. ``--json``
prints the search log (:mod:`kmds_desktop.app.search_log`): the same document the window's *Export
search log* writes for the same reviewed queries, apart from timings. Each run is recorded in the
search history as a numbered set (:mod:`kmds_desktop.app.strategy`); its number goes to stderr.

Semantic rows (``--semantic``, ``--semantic-text``, ``--hypothetical``) run beside the generated
full-text rows. Without those options the generation round adds the rows the ``retrieval`` settings
ask for, as in the window: when the database has document vectors (``literature embed``), the
question as a semantic row first and, with an LLM among the models, its hypothetical abstract last
(:func:`~kmds_desktop.app.literature.plan_retrieval_rows`). The rows are merged by reciprocal
rank fusion (``--fusion``) and, when a semantic row ran, re-ranked by similarity to the question
(``--rerank``).

When a valid query could not run (lost connection, timeout) the documents of the others are printed,
the log says ``"incomplete": true`` and lists ``failed_queries`` with their errors, and the command
exits 1 with a one-line error naming them: a systematic search is never silently partial.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kmds_desktop import __version__
from kmds_desktop.commands.common import DSN_HELP, fail, generation_settings, guarded, literature_database


def register_search(lit_sub: argparse._SubParsersAction) -> None:
    """Add the ``search`` subcommand under ``literature``."""
    search = lit_sub.add_parser(
        "search",
        help="generate full-text queries for a question with one or more models and run them, beside "
             "semantic rows",
        description="Generate PostgreSQL full-text queries for QUESTION (models from the settings' "
                    "query_generation section, or --models), run them ID-only beside semantic rows "
                    "(--semantic, on by default when the database has vectors), merge the results by "
                    "reciprocal rank fusion and fetch the documents once. 'builtin:keywords' needs no LLM.",
    )
    search.add_argument("question", metavar="QUESTION")
    search.add_argument("--models", help="comma-separated models, e.g. 'llama3.1:8b,builtin:keywords' "
                                         "(enables multi-model generation); 'openai:NAME' is a model on the "
                                         "OpenAI-compatible server (--openai-url), 'ollama:NAME' or a bare "
                                         "name one on Ollama")
    search.add_argument("--verbatim-models", metavar="MODELS",
                        help="comma-separated models that write their own tsquery (default: "
                             "query_generation.verbatim_query_models); every other model names the "
                             "question's concepts and the app writes the queries")
    search.add_argument("--openai-url", metavar="URL", dest="openai_base_url",
                        help="the OpenAI-compatible server of 'openai:' models, e.g. http://127.0.0.1:8080/v1"
                             " (default: query_generation.openai_base_url)")
    search.add_argument("--queries-per-model", type=int, choices=(1, 2, 3), metavar="N",
                        help="queries each model proposes, 1-3 (enables multi-model generation)")
    search.add_argument("--max-rows", type=int, default=None, metavar="N",
                        help="documents per query, 1-100000 (default: literature.max_rows)")
    search.add_argument("--semantic", action=argparse.BooleanOptionalAction, default=None,
                        help="add the question as a semantic (nearest-neighbour) row; default: when "
                             "retrieval.semantic_row is on and the database has document vectors")
    search.add_argument("--semantic-text", action="append", default=[], metavar="SENTENCE",
                        help="add a semantic row with this sentence (repeatable)")
    search.add_argument("--hypothetical", action=argparse.BooleanOptionalAction, default=None,
                        help="add a row searching by an abstract the first LLM model writes for the "
                             "question (default: retrieval.hypothetical_row, with a semantic row and an "
                             "LLM model configured)")
    search.add_argument("--no-generate", action="store_true",
                        help="run only the semantic rows (no full-text queries are generated)")
    search.add_argument("--fusion", choices=("rrf", "best_rank"), default=None,
                        help="how the rows' ranked lists are merged (default: retrieval.fusion)")
    search.add_argument("--ranking", choices=("bm25", "idf", "ts_rank_cd"), default=None,
                        help="how full-text rows rank their matches: bm25 (the top-k index of 'literature "
                             "topk build'; idf until it is built), idf (term rarity, like BM25) or "
                             "ts_rank_cd (every word alike) (default: retrieval.fulltext_ranking)")
    search.add_argument("--rerank", action=argparse.BooleanOptionalAction, default=None,
                        help="re-rank the merged candidates by similarity to the question when a semantic "
                             "row ran (default: retrieval.rerank)")
    search.add_argument("--dsn", help=DSN_HELP)
    search.add_argument("--json", action="store_true",
                        help="print the search log as JSON (attempts, queries with provenance and "
                             "statistics, documents in rank order with source, PMID/DOI), as the window "
                             "exports it")
    search.set_defaults(func=_search)


@guarded
def _search(args: argparse.Namespace) -> int:
    """The same session the window drives: generate a round, run every query it offered, print."""
    # why: start-up time: they load psycopg
    from kmds_desktop.app.literature import (
        HypotheticalAttempt,
        LiteratureSession,
        RetrievalRows,
        cap_note,
        generate_round,
        tier_sentence,
    )
    from kmds_desktop.app.literature_data import DatabaseStatus, database_status
    from kmds_desktop.app.literature_run import run_search
    from kmds_desktop.app.search_log import search_log_json, utc_now
    from kmds_desktop.config import load_settings
    from kmds_desktop.literature.errors import QueryAgentError

    settings = load_settings()
    qg, settings.retrieval = generation_settings(args, settings)
    literature = settings.literature.model_copy()
    if args.max_rows is not None:
        cap = _max_rows_cap()
        if not 1 <= args.max_rows <= cap:
            return fail(f"--max-rows must be between 1 and {cap:,} (the same limit as the "
                        f"literature.max_rows setting), not {args.max_rows:,}", 2)
        literature.max_rows = args.max_rows
    quiet = args.json
    session = LiteratureSession(qg, literature, settings.retrieval, settings.index.embedding_model)

    # Without explicit semantic options the round adds the retrieval settings' rows as the window's
    # does (the question's semantic row first, an LLM's hypothetical abstract last), so both faces
    # give the same table and the same search log.
    by_settings = args.semantic is None and args.hypothetical is None and not args.no_generate

    def on_attempt(item: Any) -> None:
        session.accept_attempt(item)
        if quiet:
            return
        if isinstance(item, RetrievalRows):
            if item.semantic:
                print(f"  [semantic row] {item.semantic}", file=sys.stderr)
            if item.hypothetical_model:
                print(f"  {item.hypothetical_model} will write a hypothetical abstract", file=sys.stderr)
        elif isinstance(item, HypotheticalAttempt):
            shown = item.abstract[:70] + "…" if item.ok else f"(no hypothetical-abstract row: {item.error})"
            print(f"  [{item.model} hypothetical abstract, {item.seconds:.2f} s] {shown}", file=sys.stderr)
        else:
            shown = item.query if item.ok else f"(failed: {item.error})"
            print(f"  [{item.model} #{item.attempt_number}, {item.generation_time:.2f} s] {shown}",
                  file=sys.stderr)

    with literature_database(args, literature) as db:
        session.attach_database(db)
        agent = session.agent(db)
        rnd, _ = session.start_round(args.question, utc_now())
        if args.no_generate:
            session.finish_round()
        else:
            if not quiet:
                print(f"generating queries with {', '.join(rnd.models)}", file=sys.stderr)
            generate_round(agent, args.question, on_attempt=on_attempt, retrieval_rows=by_settings)
            session.finish_round()
        _add_semantic_rows(args, session, agent, db, quiet, by_settings)
        if not session.included_rows():
            if args.no_generate:
                raise QueryAgentError("--no-generate needs a semantic row (--semantic or --semantic-text)")
            raise QueryAgentError(f"no query could be generated ({rnd.summary()})")
        # The window's sequence (app.literature_run): numbered before the rows run, completed after; the
        # coverage question the window asks before semantic rows search a partly embedded database is a note.
        if any(row.semantic for row in session.included_rows()):
            session.apply_database_status(DatabaseStatus.from_status(database_status(
                db, session.embedding_model, use_database_vectors=settings.retrieval.use_database_vectors)))
        try:
            outcome = run_search(session, agent, max_rows=literature.max_rows,
                                 warn=lambda text: print(f"note: {text}", file=sys.stderr))
        finally:
            session.close_history()
        result, saved = outcome.result, outcome.saved
        if saved is None:  # cannot happen: the session's search history numbers every run
            raise QueryAgentError("the search history gave the run no number; nothing was recorded")

    print(f"recorded as #{saved.number} in the search history", file=sys.stderr)

    if args.json:
        print(search_log_json(session.search_log(app_version=_app_version())))
        return _incomplete_exit(result)
    for stat in result.queries:
        if stat.ok and stat.kind != "tsquery":
            sims = (f", similarity {stat.best_similarity:.3f}..{stat.last_similarity:.3f}"
                    if stat.best_similarity is not None else "")
            of_all = f" (of {stat.searchable} in all)" if stat.searchable is not None else ""
            print(f"  ran #{stat.index + 1} {stat.kind} '{stat.query[:70]}': {stat.ids_returned} returned of "
                  f"{stat.matches} documents with vectors{of_all}{sims} ({stat.time_s:.2f} s)",
                  file=sys.stderr)
        elif stat.ok:
            tier = ", ranked within the fast index's impact tier" if stat.ranked_in_tier else ""
            cut = f"; {cap_note(stat.ids_returned, stat.matches)}" if stat.capped else ""
            print(f"  ran #{stat.index + 1} '{stat.query}': {stat.matches} matches, {stat.ids_returned} "
                  f"returned{tier} ({stat.time_s:.2f} s){cut}", file=sys.stderr)
        else:
            print(f"  skipped #{stat.index + 1} '{stat.query[:70]}': {stat.error}", file=sys.stderr)
    print(session.run_summary())
    tiered = tier_sentence([s.index + 1 for s in result.queries if s.ok and s.ranked_in_tier])
    if tiered:
        print(f"  {tiered}.", file=sys.stderr)
    for doc in session.documents:
        year = doc.get("year") or ""
        found = ", ".join(f"#{i + 1}" for i in result.found_by.get(doc["id"], []))
        print(f"{doc['rank']:>4}. [{doc['id']}] {doc.get('title') or '(no title)'} "
              f"{f'({year})' if year else ''}".rstrip() + f"  [found by {found}]")
    return _incomplete_exit(result)


def _add_semantic_rows(args: argparse.Namespace, session: Any, agent: Any, db: Any, quiet: bool,
                       by_settings: bool = False) -> None:
    """Add the semantic and hypothetical rows this search runs (defaults in the module docstring);
    with ``by_settings`` the round has added the settings' rows already, so only ``--semantic-text``."""
    if by_settings:
        for text in args.semantic_text:
            if text.strip():
                session.add_semantic(text)
        return
    # why: start-up time: the CLI imports this module at start, that one only when needed
    from kmds_desktop.app.literature import plan_retrieval_rows, write_hypothetical
    from kmds_desktop.literature.errors import QueryAgentError

    want_semantic = args.semantic
    if want_semantic is None:  # the window's rule: vectors to search (the app's, or the database's own)
        want_semantic = session.retrieval.semantic_row and (
            bool(args.semantic_text) or plan_retrieval_rows(agent, session.question).with_vectors > 0)
    added = []
    if want_semantic:
        added.append(session.add_question_row())  # the rule the window's generation round applies
    added += [session.add_semantic(t) for t in args.semantic_text if t.strip()]
    want_hypothetical = args.hypothetical
    if want_hypothetical is None:
        has_llm = agent.llm_model() is not None
        want_hypothetical = bool(added) and session.retrieval.hypothetical_row and has_llm
    if want_hypothetical:
        model = agent.llm_model()
        if not quiet:
            print(f"writing a hypothetical abstract with {model}", file=sys.stderr)
        attempt = write_hypothetical(agent, session.question)  # the window's code, on its worker
        if not attempt.ok:
            if args.hypothetical:  # asked for: its failure is the command's
                raise QueryAgentError(attempt.error or "no hypothetical abstract")
            print(f"note: no hypothetical-abstract row: {attempt.error}", file=sys.stderr)
            return
        session.add_hypothetical(attempt.abstract, attempt.model, attempt.seconds)


def _incomplete_exit(result: Any) -> int:
    """1 with a one-line error when valid queries could not run (what ran was printed), else 0."""
    return fail(result.incomplete_message()) if result.incomplete else 0


def _max_rows_cap() -> int:
    """The settings' upper bound for ``literature.max_rows`` (one limit for the CLI and the window)."""
    # why: start-up time: the CLI imports this module at start, that one only when needed
    from kmds_desktop.config import LiteratureSettings

    for meta in LiteratureSettings.model_fields["max_rows"].metadata:
        if getattr(meta, "le", None) is not None:
            return int(meta.le)
    return 100_000


def _app_version() -> str:
    return __version__
