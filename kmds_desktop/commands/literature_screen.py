"""``kmds-desktop literature screen ...``: a review's state, records in, the queue's order (and whether
the model scores feed it), exports, another reviewer's decisions, the PRISMA flow, and ``simulate`` (replay
known labels through an order).

Every subcommand but ``simulate`` goes through :class:`~kmds_desktop.app.screening.ScreeningSession`,
the code the window drives, so a figure here is the figure there. Imports happen inside the handlers so
``kmds-desktop --help`` stays fast.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

from kmds_desktop.commands.common import DSN_HELP, fail, guarded, literature_database, print_json

_STORE_HELP = "the screening file (default: screening/screening.sqlite3 in the data folder)"


def register_screen(lit_sub: argparse._SubParsersAction) -> None:
    """Add ``screen`` and its subcommands under ``literature``."""
    screen = lit_sub.add_parser(
        "screen",
        help="title/abstract screening: state, add records, export, decisions, flow, simulate",
        description="Screening reviews (decisions are kept in the data folder, never in the literature "
        "database). The window's screening view drives the same code.",
    )
    sub = screen.add_subparsers(dest="screen_command", metavar="SUBCOMMAND")
    screen.set_defaults(func=lambda args: (screen.print_help(), 2)[1])

    def review_parser(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("review", help="the review's name")
        p.add_argument("--store", type=Path, help=_STORE_HELP)
        return p

    state = review_parser("state", "progress, stopping figures and rules, other reviewers' agreement")
    state.add_argument("--json", action="store_true")
    state.set_defaults(func=_state)

    add = review_parser("add", "add records to a review (created when new): a history set or a RIS/CSV file")
    src = add.add_mutually_exclusive_group(required=True)
    src.add_argument("--set", type=int, metavar="N", help="the documents of search-history set #N")
    src.add_argument("--file", type=Path, help="a .ris or .csv file of records")
    add.add_argument("--question", default="", help="the review question (new reviews)")
    add.add_argument("--dsn", help=DSN_HELP)
    add.set_defaults(func=_add)

    order = review_parser(
        "order",
        "the next records in the queue and why; --scores-in-model on|off|auto: whether the model scores "
        "(LLM 1–5, or the embedding similarity) feed the active-learning model (kept with the review)",
    )
    order.add_argument("--mode", choices=("active", "rank", "random", "score"), default=None,
                       help="the order to list, kept with the review (default: the review's own, as the "
                       "window left it; active learning for a new review)")
    order.add_argument("--scores-in-model", choices=("on", "off", "auto"),
                       help="let the model scores feed the classifier, or stop it, or (auto, as before any "
                       "choice) let the scores that separate your includes from your excludes feed it; "
                       "a score only orders, it never decides a record")
    order.add_argument("--next", type=int, default=10, metavar="N",
                       help="list N records (default: %(default)s)")
    order.add_argument("--json", action="store_true")
    order.set_defaults(func=_order)

    exp = review_parser("export", "write the included (or all) records as RIS, BibTeX or CSV")
    exp.add_argument("output", type=Path, help="a .ris, .bib or .csv file")
    exp.add_argument("--which", choices=("included", "decided", "all"), default="included")
    exp.set_defaults(func=_export)

    exd = review_parser("export-decisions", "write this reviewer's decisions as CSV (for a second reviewer)")
    exd.add_argument("output", type=Path)
    exd.add_argument("--reviewer", default="me", help="the name written into the file (default: %(default)s)")
    exd.set_defaults(func=_export_decisions)

    imd = review_parser("import-decisions", "import another reviewer's decisions CSV; print agreement")
    imd.add_argument("file", type=Path)
    imd.add_argument("--reviewer", default=None, help="their name (default: the file's reviewer column)")
    imd.set_defaults(func=_import_decisions)

    flow = review_parser("flow", "the PRISMA 2020 flow numbers; --svg writes the diagram")
    flow.add_argument("--svg", type=Path, help="write the flow diagram here")
    flow.add_argument(
        "--enter",
        action="append",
        default=[],
        metavar="NAME=N",
        help="enter a number the records cannot give (removed_automation, removed_other, "
        "reports_not_retrieved, reports_excluded, studies_included); repeatable",
    )
    flow.add_argument("--json", action="store_true")
    flow.set_defaults(func=_flow)

    sim = sub.add_parser(
        "simulate",
        help="replay known labels through an order and print the recall figures",
        description="Replay labels (a CSV with title, abstract and label_included columns, or a question "
        "of a BEIR-style folder: corpus.jsonl, queries.jsonl, qrels.tsv) through the chosen "
        "order: one random include and one random exclude first, then the order. Prints WSS@95, "
        "recall after 10% and 25% screened, and records to 95% recall.",
    )
    data = sim.add_mutually_exclusive_group(required=True)
    data.add_argument("--csv", type=Path, help="records with a label_included column")
    data.add_argument("--collection", type=Path, metavar="DIR", help="folder with corpus/queries/qrels")
    sim.add_argument("--question", help="the question id in --collection (relevant = any qrels row)")
    sim.add_argument("--order", choices=("active", "rank", "random"), default="active")
    sim.add_argument("--no-question-prior", action="store_true", help="do not use the question as an include")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument(
        "--no-vectors",
        action="store_true",
        help="order by TF-IDF alone (default: with the records' embeddings, as the window's screening)",
    )
    sim.add_argument("--json", action="store_true")
    sim.set_defaults(func=_simulate)


def _session(args: argparse.Namespace, *, question: str = "", create: bool = False) -> Any:
    # why: start-up time: they load numpy, psycopg
    from kmds_desktop.app.screening import ScreeningSession
    from kmds_desktop.literature.screening.decisions import DecisionStore, ScreeningError

    store = DecisionStore(args.store)
    if create:
        store.create_review(args.review, question=question)
    elif args.review not in {r.id for r in store.reviews()}:
        store.close()
        raise ScreeningError(f"there is no review {args.review!r} (add records with 'literature screen add')")
    return ScreeningSession(store, args.review, background=False)


@guarded
def _state(args: argparse.Namespace) -> int:
    session = _session(args)
    try:
        progress, report = session.progress(), session.stopping_report()
        reviewers = session.store.other_reviewers(session.review.id)
        agreements = {r: session.agreement(r) for r in reviewers}
        if args.json:
            print_json(
                {
                    "review": session.review.id,
                    "question": session.review.question,
                    "progress": progress.__dict__,
                    "line": progress.line(),
                    "stopping": {
                        "figures": report.figures.__dict__,
                        "estimate": report.estimate_method,
                        "rules": [r.__dict__ for r in report.rules],
                    },
                    "reviewers": {
                        r: {
                            "both": a.both,
                            "agreed": a.agreed,
                            "kappa": a.kappa,
                            "disagreements": len(a.disagreements),
                        }
                        for r, a in agreements.items()
                    },
                }
            )
            return 0
        print(f"review {session.review.id}: {progress.line()}")
        for line in report.lines():
            print(f"  {line}")
        for r, a in agreements.items():
            print(f"  {r}: {a.summary(r)}")
        return 0
    finally:
        session.store.close()


@guarded
def _add(args: argparse.Namespace) -> int:
    session = _session(args, question=args.question, create=True)
    try:
        if args.file is not None:
            added = session.add_file(args.file)
            origin = f"file {args.file.name}"
        else:
            # why: start-up time: they load numpy, psycopg
            from kmds_desktop.app.screening import records_from_history
            from kmds_desktop.literature.strategy.history import SearchHistory

            with SearchHistory() as history, literature_database(args) as db:
                recs, per_row = records_from_history(history, db, args.set)
            origin = f"#{args.set}"
            added = session.add_records(recs, origin=origin, per_row=per_row)
        print(f"{added:,} new records from {origin}; {session.progress().line()}")
        return 0
    finally:
        session.store.close()


@guarded
def _order(args: argparse.Namespace) -> int:
    session = _session(args)
    try:
        if args.scores_in_model is not None:
            choice = None if args.scores_in_model == "auto" else args.scores_in_model == "on"
            session.set_scores_in_model(choice)
        if args.mode is not None:  # a chosen order is kept with the review, as the window keeps it
            session.set_order(args.mode)
        rows = []
        scores = session.scores_by_key()
        for i, how in session.queue(max(0, args.next)):
            rec = session.records[i]
            rows.append({
                "source": rec.source,
                "external_id": rec.external_id,
                "title": rec.title,
                "chosen_by": how,
                "model_score": scores.get(rec.key),
                "why": [t for t, _w in session.why(i)],
                "llm_scores": [s.text() for s in session.model_scores(rec.key)],
            })
        if args.json:
            print_json({
                "review": session.review.id,
                "order": session.order.value,
                "scores_in_model": session.scores_in_model,
                "scores_line": session.scores_in_model_line(),
                "next": rows,
            })
            return 0
        print(f"review {session.review.id}: order {session.order.value}; {session.scores_in_model_line()}")
        for n, row in enumerate(rows, start=1):
            score = "" if row["model_score"] is None else f" (model score {row['model_score']:.2f})"
            print(f"{n:3}. {row['source']}:{row['external_id']} {row['title'][:90]}{score}")
            if row["why"]:
                print(f"     why: {', '.join(row['why'])}")
        return 0
    finally:
        session.store.close()


@guarded
def _export(args: argparse.Namespace) -> int:
    session = _session(args)
    try:
        path = session.export(args.output, which=args.which)
        print(f"wrote {path}")
        return 0
    finally:
        session.store.close()


@guarded
def _export_decisions(args: argparse.Namespace) -> int:
    session = _session(args)
    try:
        print(f"wrote {session.export_decisions(args.output, args.reviewer)}")
        return 0
    finally:
        session.store.close()


@guarded
def _import_decisions(args: argparse.Namespace) -> int:
    session = _session(args)
    try:
        report = session.import_decisions(args.file, args.reviewer)
        print(report.summary())
        for line_no, why in report.broken:
            print(f"  line {line_no}: {why}")
        if report.imported:
            print(session.agreement(report.reviewer).summary(report.reviewer))
        return 0
    finally:
        session.store.close()


@guarded
def _flow(args: argparse.Namespace) -> int:
    session = _session(args)
    try:
        for item in args.enter:
            name, _, value = item.partition("=")
            if not value.strip().lstrip("-").isdigit():
                return fail(f"--enter wants NAME=NUMBER, not {item!r}", 2)
            session.store.set_flow_number(session.review.id, name.strip(), int(value))
        flow = session.flow()
        if args.svg:
            session.write_flow_svg(args.svg)
        if args.json:
            print_json(flow.to_dict())
        else:
            print("\n".join(flow.lines()))
            if args.svg:
                print(f"wrote {args.svg}")
        return 0
    finally:
        session.store.close()


def _embedded_text(title: object, abstract: object) -> str:
    """``title. abstract``: the text the literature database embeds for a document's vector."""
    return ". ".join(part for part in (str(title or "").strip(), str(abstract or "").strip()) if part)


@guarded
def _simulate(args: argparse.Namespace) -> int:
    import numpy as np  # why: numpy loads on first use, not at start-up

    # why: start-up time: they load numpy, scipy
    from kmds_desktop.app.screening import VECTOR_MODEL
    from kmds_desktop.literature.screening.ordering import DEFAULT_MODEL, ModelConfig
    from kmds_desktop.literature.screening.records import read_csv_records
    from kmds_desktop.literature.screening.simulation import (
        model_scorer,
        pick_priors,
        pool_features,
        simulate,
    )
    from kmds_desktop.literature.store.vectors import encoder_for

    question = ""
    if args.csv is not None:
        recs = read_csv_records(args.csv)
        recs = [r for r in recs if r.label is not None]
        texts, truth = [r.text for r in recs], np.array([bool(r.label) for r in recs])
        embedded = [_embedded_text(r.title, r.abstract) for r in recs]
        if not recs:
            return fail(f"{args.csv}: no records with a label_included value")
    else:
        if not args.question:
            return fail("--collection needs --question", 2)

        # why: start-up time: the CLI imports this module at start, that one only when needed
        from kmds_desktop.user_files import open_user_file

        def lines(name: str) -> io.TextIOWrapper:  # regular files only: never a link to /dev/zero
            return io.TextIOWrapper(open_user_file(folder / name, f"collection's {name}"), encoding="utf-8")

        folder: Path = args.collection
        with lines("corpus.jsonl") as fh:
            docs = [json.loads(line) for line in fh if line.strip()]
        with lines("queries.jsonl") as fh:
            for line in fh:
                if not line.strip():
                    continue
                q = json.loads(line)
                if str(q.get("id") if "id" in q else q.get("_id")) == args.question:
                    question = str(q.get("text") or "")
        relevant = set()
        with lines("qrels.tsv") as fh:
            for line in fh:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 2 and parts[0] == args.question:
                    relevant.add(parts[1])
        texts = [f"{d.get('title') or ''}\n{d.get('abstract') or d.get('text') or ''}" for d in docs]
        embedded = [_embedded_text(d.get("title"), d.get("abstract") or d.get("text")) for d in docs]
        truth = np.array([str(d.get("id") or d.get("_id")) in relevant for d in docs])
    if truth.sum() < 1 or truth.all():
        return fail("the labels need at least one include and one exclude")
    config = ModelConfig(**{**DEFAULT_MODEL.__dict__, "question_prior": not args.no_question_prior})
    vectors = not args.no_vectors and args.order == "active"
    # The window's screening joins the database's vectors (its model, "title. abstract"): the same here.
    encoder = encoder_for(VECTOR_MODEL) if vectors else None
    feats = pool_features(texts, question, config, encoder=encoder, embedded_texts=embedded)
    order = list(range(len(texts)))
    if args.order == "random":
        order = [int(i) for i in np.random.default_rng(args.seed).permutation(len(texts))]
    scorer = model_scorer(feats, config) if args.order == "active" else None
    result = simulate(
        truth, scorer=scorer, priors=pick_priors(truth, args.seed), fallback=order, stop_when_done=False
    )
    figures = result.figures()
    if args.json:
        print_json(
            {
                "records": len(texts),
                "relevant": int(truth.sum()),
                "order": args.order,
                "model": config.describe(),
                "vectors": VECTOR_MODEL if encoder is not None else None,
                **figures,
                "curve": result.curve(),
            }
        )
        return 0
    print(
        f"{len(texts):,} records, {int(truth.sum()):,} relevant; order: {args.order}"
        + (f" ({config.describe()})" if args.order == "active" else "")
        + (f"; with {VECTOR_MODEL} vectors, as the window's screening" if encoder is not None else "")
    )
    print(
        f"WSS@95 {figures['wss95']:.3f} · recall after 10% {figures['recall10']:.1%} · after 25% "
        f"{figures['recall25']:.1%} · records to 95% recall {int(figures['records95']):,}"
    )
    print("recall curve: " + ", ".join(f"{n:,}: {r:.0%}" for n, r in result.curve(10)))
    return 0
