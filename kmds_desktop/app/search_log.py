"""The search log: everything needed to repeat a literature search, on any copy of the literature.

Written by the window's *Export search log* and printed by ``kmds-desktop literature search
--json``; for the same reviewed queries on the same literature both are the same document apart
from the timing fields in :data:`VOLATILE_KEYS`. Why identifiers besides row numbers: a row number
(``id``) only means something in the database that assigned it; the source and its own identifier
(PMID, DOI, SciFact id) find the same paper in another database, so each document is listed with
``ref`` = ``"<source>:<external id>"``, its PMID and DOI, and every query lists the refs it found.

Format ``kmds-desktop-search-log/2``::

    question, models, queries_per_model, temperature, system_prompt, settings{...} (of the last round)
    rounds[]     each generation round since New search that began before the run: round, question,
                 generated_at, models, queries_per_model, stopped, attempts (how many)
    attempts[]   every attempt of those rounds: round, model, attempt, temperature, query, error,
                 generation_time,
                 server (where the model ran: "ollama <host>", "openai <base URL>"; "" built-in),
                 reply_format ("schema": constrained to {"queries": [...]}, "text": free text
                 cleaned because the server cannot enforce a schema; "" built-in)
    generation   {queries_generated, queries_unique}: the models' successful proposals and how many
                 distinct texts they were (hand-written and semantic rows count in neither)
    queries[]    each query that ran: query, kind (the row type: "tsquery", "semantic" or
                 "hypothetical"), row_kind ("full-text", "semantic: the question", "semantic:
                 hand-written" or "hypothetical abstract"), model (the Model column),
                 provenance{kind ("generated", "hand-written", "edited" or "question": the semantic
                 row the retrieval settings added), model, attempt, temperature, generation_time,
                 server and reply_format (generated rows of an LLM: as in attempts[]),
                 edited_from, row_type and row_kind (semantic rows)}, matches (for a semantic row:
                 the documents with vectors it searched), coverage{searched, documents, partial}
                 (semantic rows: what it searched of every document under the same filters), ids,
                 refs, unique_ids, unique_refs, error, time_s
    row_kinds    how many rows of each row_kind ran
    retrieval_run  the retrieval as it ran: embedding_model (when a semantic row ran), semantic_rows,
                 vector_coverage{searched, documents, partial}, fusion{method, k, weights per row
                 kind}, rerank{applied, enabled, weight, candidates}, fulltext_ranking, merged
    documents[]  merged, best rank first: rank, id, ref, source, external_id, pmid, doi, title, year,
                 found_by (indices into queries)
    merged_ids, document_count, database, app_version, generated_at, run_started_at, run_finished_at
                 (ISO-8601 UTC, seconds: :func:`utc_now`, the search history's clock)
    incomplete   true when a valid query could not run (lost connection, timeout): the documents are
                 only part of what the queries find
    failed_queries[]  every query that did not run: query, error, kind ("invalid": its text was
                 rejected; "failed": it could not run)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from kmds_desktop.app.run_facts import generation_counts, kind_counts
from kmds_desktop.config import LiteratureSettings, QueryGenerationSettings, RetrievalSettings
from kmds_desktop.literature.retrieval.semantic import SEMANTIC_KINDS, VectorCoverage
from kmds_desktop.literature.strategy.history import row_kind, utc_now
from kmds_desktop.user_files import file_limit, read_user_text

__all__ = ["FORMAT", "VOLATILE_KEYS", "build_search_log", "document_ref", "load_search_log",
           "search_log_json", "utc_now", "without_volatile", "write_search_log"]

FORMAT = "kmds-desktop-search-log/2"

#: Fields that record when or how long something took: they differ between two runs of one search.
VOLATILE_KEYS = frozenset({"generated_at", "run_started_at", "run_finished_at", "time_s", "generation_time",
                           "total_time_s"})

#: The largest log file :func:`load_search_log` reads (a log of 100,000 documents is ~30 MB).
MAX_LOG_BYTES = 64 * 1024 * 1024


class LoggedSession(Protocol):
    """What the log reads of a search session
    (:class:`~kmds_desktop.app.literature.LiteratureSession` is one).

    Why a protocol and not the session's class: the session writes its log with this module, so
    importing the session here made ``app.literature <-> app.search_log`` a cycle, hidden until then
    by an import inside the session's method.
    """

    round: Any
    rounds: list[Any]
    settings: QueryGenerationSettings
    literature: LiteratureSettings
    retrieval: RetrievalSettings
    question: str
    database_name: str
    last_run: Any


def document_ref(doc: Mapping[str, Any]) -> str:
    """``"<source>:<external id>"``: the document's identity outside this database."""
    source = str(doc.get("source_name") or doc.get("source") or "").strip()
    external = str(doc.get("external_id") or "").strip()
    if source and external:
        return f"{source}:{external}"
    if doc.get("doi"):
        return f"doi:{doc['doi']}"
    return f"id:{doc.get('id')}"


def build_search_log(session: LoggedSession, *, app_version: str = "") -> dict[str, Any]:
    """The log of ``session``'s last run (the generation rounds and settings that led to it).

    Every round since New search that began before the run is logged, with every attempt (each
    with its ``round``): a round stopped before it proposed anything leaves the rows of the earlier
    round in the table, and those are what ran."""
    run_started = getattr(session.last_run, "started_at", None) or None
    rounds = [r for r in (getattr(session, "rounds", None) or ([session.round] if session.round else []))
              if run_started is None or not r.generated_at or r.generated_at <= run_started]
    rnd = rounds[-1] if rounds else None
    attempts = [(r.number, a) for r in rounds for a in r.attempts]
    qg = session.settings
    log: dict[str, Any] = {
        "format": FORMAT,
        "question": rnd.question if rnd else session.question,
        "models": list(rnd.models) if rnd else [],
        "queries_per_model": rnd.queries_per_model if rnd else None,
        "temperature": rnd.temperature if rnd else qg.temperature,
        "system_prompt": rnd.system_prompt if rnd else "",
        "settings": {
            "multi_model_enabled": qg.multi_model_enabled,
            "deduplicate_results": qg.deduplicate_results,
            "show_all_queries_to_user": qg.show_all_queries_to_user,
            "allow_query_selection": qg.allow_query_selection,
            "max_rows": session.literature.max_rows,
            "retrieval": session.retrieval.model_dump(mode="json"),
        },
        "generated_at": rnd.generated_at if rnd else None,
        "rounds": [{"round": r.number, "question": r.question, "generated_at": r.generated_at,
                    "models": list(r.models), "queries_per_model": r.queries_per_model,
                    "stopped": bool(r.cancelled), "attempts": len(r.attempts)} for r in rounds],
        "generation": generation_counts([a for _, a in attempts]),
        "attempts": [
            {"round": number, "model": a.model, "attempt": a.attempt_number, "temperature": a.temperature,
             "query": a.query, "error": a.error, "generation_time": a.generation_time,
             "server": getattr(a, "server", ""), "reply_format": getattr(a, "reply_format", ""),
             "note": getattr(a, "note", "")}
            for number, a in attempts
        ],
        "queries": [],
        "documents": [],
        "merged_ids": [],
        "document_count": 0,
        "database": session.database_name,
        "app_version": app_version,
        "run_started_at": None,
        "run_finished_at": None,
        "incomplete": False,
        "failed_queries": [],
    }
    run = session.last_run
    if run is None:
        return log
    result = run.result
    refs = {int(d["id"]): document_ref(d) for d in result.documents if d.get("id") is not None}
    for stat, provenance, label in zip(result.queries, run.provenance, run.labels, strict=False):
        unique = [i for i in stat.ids if result.found_by.get(i) == [stat.index]]
        entry: dict[str, Any] = {
            "query": stat.query,
            "kind": stat.kind,
            "row_kind": row_kind(provenance),
            "model": label,
            "provenance": provenance,
            "matches": stat.matches,
            "ids": list(stat.ids),
            "refs": [refs.get(i, f"id:{i}") for i in stat.ids],
            "unique_ids": unique,
            "unique_refs": [refs.get(i, f"id:{i}") for i in unique],
            "error": stat.error,
            "time_s": stat.time_s,
        }
        if stat.kind in SEMANTIC_KINDS and stat.ok and stat.searchable is not None:
            entry["coverage"] = VectorCoverage(int(stat.matches or 0), int(stat.searchable)).to_dict()
        log["queries"].append(entry)
    for rank, doc in enumerate(result.documents, start=1):
        doc_id = int(doc["id"])
        log["documents"].append({
            "rank": rank,
            "id": doc_id,
            "ref": refs[doc_id],
            "source": doc.get("source_name") or doc.get("source"),
            "external_id": doc.get("external_id"),
            "pmid": doc.get("pmid"),
            "doi": doc.get("doi"),
            "title": doc.get("title"),
            "year": doc.get("year"),
            "found_by": list(result.found_by.get(doc_id, [])),
        })
    log["merged_ids"] = list(result.ids)
    log["fusion"] = result.fusion
    log["retrieval_run"] = dict(run.facts)
    # rows that ran: an invalid row (its text rejected) is listed in queries[] but never ran
    ran = zip(log["queries"], result.queries, strict=False)
    log["row_kinds"] = kind_counts(q["row_kind"] for q, stat in ran if stat.error_kind != "invalid")
    log["document_count"] = len(result.documents)
    log["incomplete"] = bool(result.incomplete)
    log["failed_queries"] = [{"query": q.query, "error": q.error, "kind": q.error_kind}
                             for q in result.failed_queries]
    log["run_started_at"], log["run_finished_at"] = run.started_at, run.finished_at
    return log


def without_volatile(value: Any) -> Any:
    """``value`` with every timing field (:data:`VOLATILE_KEYS`) removed, at any depth."""
    if isinstance(value, Mapping):
        return {k: without_volatile(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [without_volatile(v) for v in value]
    return value


def search_log_json(log: Mapping[str, Any]) -> str:
    return json.dumps(log, indent=2, ensure_ascii=False, default=str)


def write_search_log(log: Mapping[str, Any], path: str | Path) -> Path:
    """Write the log as UTF-8 JSON (private to the user: 0600); returns the path."""
    path = Path(path)
    data = (search_log_json(log) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


def load_search_log(path: str | Path) -> dict[str, Any]:
    """Read a log written by :func:`write_search_log` (bounded size); ``ValueError`` when it is not one."""
    path = Path(path)
    text = read_user_text(path, file_limit(MAX_LOG_BYTES), "search log")  # bounded; never /dev/zero
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(f"{path}: nested too deeply to be a search log") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a KMDS Desktop search log ({FORMAT})")
    return data
