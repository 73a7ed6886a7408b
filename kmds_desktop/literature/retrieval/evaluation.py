"""Retrieval quality of a search strategy on judged questions: recall@100 and nDCG@10 per row type.

For researchers who want to know how well a set of rows (generated full-text queries, the semantic
row, a hypothetical abstract) finds the papers that matter on their own judged questions, and for the
benchmark that compares the app's fused search with a BM25 reference. Every question runs through the
same :class:`~kmds_desktop.literature.queries.agent.QueryAgent` path as a search in the app (ID-only rows,
the settings' fusion and re-ranking), without fetching documents. The measures come from
``ir-measures`` (the TREC tools' definitions), not from hand-written formulas.

Inputs: questions as JSONL (``{"id": ..., "text": ...}``; an optional ``split`` field can be
filtered on) and judgements as TSV: either with a header naming ``query_id``, ``doc_id`` and
``score`` columns (the shared format), or TREC qrels lines ``qid 0 docid rel``. A judged ``doc_id``
is a document's external id in the database (a PMID for PubMed; ``scifact:...`` for SciFact); one
that is not in the database counts as a relevant document never found.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kmds_desktop.literature.errors import LiteratureError, QueryAgentError
from kmds_desktop.literature.retrieval.fusion import merge_ranked, reciprocal_rank_fusion
from kmds_desktop.literature.retrieval.semantic import (
    ROW_HYPOTHETICAL,
    ROW_SEMANTIC,
    ROW_TSQUERY,
    SearchRow,
)
from kmds_desktop.tasks import CancelToken, ProgressFn, check, report

log = logging.getLogger(__name__)

#: Row types a strategy can combine (``--rows``).
ROW_TYPES = ("fulltext", "semantic", "hypothetical")
MEASURE_NAMES = ("nDCG@10", "R@100")
MAX_QUESTION_CHARS = 2000
MAX_INPUT_BYTES = 50 * 1024 * 1024


@dataclass
class Question:
    id: str
    text: str


@dataclass
class QuestionRun:
    """What every channel returned for one question (database ids, best first)."""

    question: Question
    channels: dict[str, list[int]] = field(default_factory=dict)  # "fulltext", "semantic", ..., "fused"
    rows: list[tuple[str, list[int]]] = field(default_factory=list)  # (kind, ids) per row as it ran
    errors: list[str] = field(default_factory=list)


def _read_bounded(path: Path, what: str) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_INPUT_BYTES:
            raise LiteratureError(f"{what} file {path} is {size} bytes, more than {MAX_INPUT_BYTES}")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise LiteratureError(f"cannot read {what} file {path}: {err}") from None


def load_questions(path: str | Path, split: str | None = None) -> list[Question]:
    """Questions from JSONL (``id`` and ``text``, or ``query``/``question``); bad lines are errors."""
    out: list[Question] = []
    for number, line in enumerate(_read_bounded(Path(path), "questions").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as err:
            raise LiteratureError(f"{path} line {number}: not valid JSON ({err.msg})") from None
        if not isinstance(data, dict):
            raise LiteratureError(f"{path} line {number}: a question must be a JSON object")
        text = data.get("text") or data.get("query") or data.get("question")
        if data.get("id") is None or not isinstance(text, str) or not text.strip():
            raise LiteratureError(f"{path} line {number}: a question needs an 'id' and a 'text'")
        if split is not None and data.get("split") != split:
            continue
        out.append(Question(str(data["id"]), text.strip()[:MAX_QUESTION_CHARS]))
    if not out:
        raise LiteratureError(f"{path} holds no question" + (f" in split {split!r}" if split else ""))
    return out


def load_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Judgements ``{question id: {doc id: relevance}}`` from the shared TSV or TREC qrels."""
    lines = [ln for ln in _read_bounded(Path(path), "judgements").splitlines() if ln.strip()]
    if not lines:
        raise LiteratureError(f"{path} holds no judgement")
    qrels: dict[str, dict[str, int]] = {}
    header = lines[0].split("\t")
    if "query_id" in header and "doc_id" in header:
        qi, di = header.index("query_id"), header.index("doc_id")
        si = header.index("score") if "score" in header else None
        body = [(n, ln.split("\t")) for n, ln in enumerate(lines[1:], start=2)]
        parsed = [(n, p[qi] if len(p) > qi else None, p[di] if len(p) > di else None,
                   p[si] if si is not None and len(p) > si else "1") for n, p in body]
    else:
        parsed = []
        for n, ln in enumerate(lines, start=1):
            parts = ln.split()
            if len(parts) == 4:
                parsed.append((n, parts[0], parts[2], parts[3]))
            elif len(parts) == 3:
                parsed.append((n, parts[0], parts[1], parts[2]))
            else:
                raise LiteratureError(f"{path} line {n}: expected 'qid 0 docid rel' or a header row")
    for n, qid, doc, rel in parsed:
        try:
            value = int(float(rel))
        except (TypeError, ValueError):
            raise LiteratureError(f"{path} line {n}: relevance {rel!r} is not a number") from None
        if not qid or not doc:
            raise LiteratureError(f"{path} line {n}: missing question or document id")
        qrels.setdefault(qid, {})[doc] = value
    return qrels


def external_ids(db: Any, ids: Iterable[int]) -> dict[int, str]:
    """Database id -> external id, for reporting runs in the judgements' id space."""
    wanted = sorted({int(i) for i in ids})
    if not wanted:
        return {}
    rows = db.fetch_all("SELECT id, external_id FROM document WHERE id = ANY(%s)", (wanted,))
    return {int(r[0]): str(r[1]) for r in rows}


def measure(runs: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    """Mean nDCG@10 and recall@100 (ir-measures) of ranked external-id lists over the judged questions.

    A judged question missing from ``runs`` (or with an empty list) scores 0, as in trec_eval with
    ``-c``: a strategy is not rewarded for failing on hard questions.
    """
    # why: ir_measures loads on first use, not at start-up
    import ir_measures
    from ir_measures import R, nDCG

    judged = {q: docs for q, docs in qrels.items() if any(v > 0 for v in docs.values())}
    run = {q: {d: float(len(ids) - r) for r, d in enumerate(ids)} for q, ids in runs.items() if q in judged}
    measures = [nDCG @ 10, R @ 100]
    totals = dict.fromkeys(measures, 0.0)
    for metric in ir_measures.iter_calc(measures, judged, run):
        totals[metric.measure] += float(metric.value)
    n = len(judged) or 1
    return {"nDCG@10": totals[nDCG @ 10] / n, "R@100": totals[R @ 100] / n}


def run_questions(
    agent: Any,
    questions: Sequence[Question],
    rows: Sequence[str] = ("fulltext", "semantic"),
    *,
    max_rows: int = 100,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    on_question: Callable[[QuestionRun], None] | None = None,
) -> list[QuestionRun]:
    """Run each question through ``agent`` with the chosen row types; nothing is fetched.

    ``fulltext``: the agent's generated tsquery rows; ``semantic``: the question as a semantic row;
    ``hypothetical``: an abstract the agent's LLM writes. Channels per question: each row type alone
    (its rows fused the agent's way when there are several) and ``fused`` (all rows, as a search in
    the app merges and re-ranks them).
    """
    unknown = [r for r in rows if r not in ROW_TYPES]
    if unknown or not rows:
        named = ", ".join(unknown) or "(none)"
        raise LiteratureError(f"unknown row type(s) {named}: use {', '.join(ROW_TYPES)}")
    kind_of = {"fulltext": ROW_TSQUERY, "semantic": ROW_SEMANTIC, "hypothetical": ROW_HYPOTHETICAL}
    out: list[QuestionRun] = []
    for number, question in enumerate(questions):
        check(cancel)
        report(progress, number, len(questions), f"question {number + 1} of {len(questions)}")
        qrun = QuestionRun(question)
        search_rows: list[SearchRow] = []
        try:
            if "fulltext" in rows:
                generated = agent.convert_question_multi_model(question.text, cancel=cancel)
                search_rows += [SearchRow(q) for q in generated.unique_queries]
                qrun.errors += [f"{r.model}: {r.error}" for r in generated.failed]
            if "semantic" in rows:
                search_rows.append(SearchRow(question.text, ROW_SEMANTIC))
            if "hypothetical" in rows:
                search_rows.append(SearchRow(agent.hypothetical_abstract(question.text, cancel=cancel),
                                             ROW_HYPOTHETICAL))
        except QueryAgentError as err:
            qrun.errors.append(str(err))
        if search_rows:
            try:
                result = agent.run_reviewed_queries(search_rows, max_rows=max_rows, fetch=False,
                                                    question=question.text, cancel=cancel)
            except QueryAgentError as err:
                qrun.errors.append(str(err))
            else:
                qrun.rows = [(s.kind, list(s.ids)) for s in result.queries]
                qrun.errors += [f"{s.kind} row '{s.query[:60]}': {s.error}" for s in result.failed_queries]
                qrun.channels["fused"] = list(result.ids)
                for row_type in rows:
                    lists = [ids for kind, ids in qrun.rows if kind == kind_of[row_type]]
                    qrun.channels[row_type] = _fuse_alone(agent, lists)
        out.append(qrun)
        if on_question is not None:
            on_question(qrun)
    report(progress, len(questions), len(questions), f"{len(questions)} questions")
    return out


def _fuse_alone(agent: Any, lists: list[list[int]]) -> list[int]:
    """One row type's own ranking: its single row, or its rows fused (no re-ranking)."""
    if len(lists) <= 1:
        return list(lists[0]) if lists else []
    if agent.retrieval.fusion == "best_rank":
        return merge_ranked(lists)[0]
    return reciprocal_rank_fusion(lists, k=agent.retrieval.fusion_k)[0]


def evaluate_runs(db: Any, runs: Sequence[QuestionRun], qrels: dict[str, dict[str, int]],
                  channels: Sequence[str]) -> dict[str, dict[str, float]]:
    """``{channel: {"nDCG@10": ..., "R@100": ...}}`` over the judged questions that were run."""
    all_ids = {i for r in runs for ids in r.channels.values() for i in ids}
    names = external_ids(db, all_ids)
    asked = {r.question.id for r in runs}
    judged = {q: d for q, d in qrels.items() if q in asked}
    table: dict[str, dict[str, float]] = {}
    for channel in channels:
        ranked = {r.question.id: [names[i] for i in r.channels.get(channel, []) if i in names] for r in runs}
        table[channel] = measure(ranked, judged)
    return table


def format_table(table: dict[str, dict[str, float]], questions: int) -> str:
    """The evaluation as a small text table (one line per channel)."""
    lines = [f"{'channel':<14}{'nDCG@10':>10}{'R@100':>10}   ({questions} judged questions)"]
    for channel, values in table.items():
        lines.append(f"{channel:<14}{values['nDCG@10']:>10.3f}{values['R@100']:>10.3f}")
    return "\n".join(lines)
