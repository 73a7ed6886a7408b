"""The search report: what a reviewer pastes into a methods section (PRISMA-S items), as JSON and Markdown.

For a set of the history: the database and its size, the date, every search behind the set with every
row exactly as it ran (its kind: full-text, semantic: the question, semantic: hand-written or
hypothetical abstract; text, provenance, matches, documents returned, unique), the embedding model and
how many documents the semantic rows could search (those with a vector), the fusion and the
re-ranking, the models' generated and unique query counts, the set algebra used,
how rows were de-duplicated into documents, the overlap of the rows and, when known papers were given,
the strategy's recall on them. Documents themselves are exported with
:mod:`kmds_desktop.literature.strategy.reference_files`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kmds_desktop import __version__
from kmds_desktop.literature.retrieval.semantic import (
    KIND_FULL_TEXT,
    KIND_SEMANTIC_HAND,
    KIND_SEMANTIC_QUESTION,
    ROW_KIND_LABELS,
    VectorCoverage,
    describe_fusion,
    describe_rerank,
)
from kmds_desktop.literature.store.topk_tiers import tier_sentence
from kmds_desktop.literature.strategy.history import SavedSet, SearchHistory, describe_provenance
from kmds_desktop.literature.strategy.overlap import overlap
from kmds_desktop.literature.strategy.workbench import KnownCheck
from kmds_desktop.text import human_datetime, plural


def _when(stamp: str | None) -> str:
    """A date a person reads, then the exact stamp the history keeps: ``3 Dec 2026 14:05
    (2026-12-03T14:05:11+00:00)``."""
    if not stamp:
        return ""
    readable = human_datetime(stamp)
    return f"{readable} ({stamp})" if readable != stamp else stamp

_MAX_LISTED = 20

REPORT_FORMAT = "kmds-desktop-search-report/1"


def searches_behind(history: SearchHistory, saved: SavedSet) -> tuple[list[SavedSet], list[str]]:
    """The searches a set was built from (itself for a search), followed iteratively; and notes for
    operands deleted since."""
    out: list[SavedSet] = []
    notes: list[str] = []
    todo, seen = [saved.number], set()
    while todo:
        number = todo.pop(0)
        if number in seen:
            continue
        seen.add(number)
        if number == saved.number:
            current = saved
        else:
            try:
                current = history.get(number)
            except Exception:  # noqa: BLE001 - a deleted operand is reported, not fatal
                notes.append(f"set #{number} was deleted from the history after it was combined")
                continue
        if current.kind == "combination":
            todo.extend(int(n) for n in current.details.get("operands", []))
        else:
            out.append(current)
    return sorted(out, key=lambda s: s.number), notes


def build_report(history: SearchHistory, number: int, known: KnownCheck | None = None) -> dict[str, Any]:
    """The report of set ``number`` as a JSON-ready dict."""
    saved = history.complete_set(number)
    searches, notes = searches_behind(history, saved)
    combos: list[dict[str, Any]] = []
    todo, seen = [saved.number], set()
    while todo:  # every combination in the chain, so the whole algebra is on record
        n = todo.pop(0)
        if n in seen:
            continue
        seen.add(n)
        try:
            current = saved if n == saved.number else history.get(n)
        except Exception:  # noqa: BLE001, S112 - a set that cannot be read is left out of the chain on record
            continue
        if current.kind == "combination":
            combos.append({"set": current.number, "expression": current.expression,
                           "canonical": current.details.get("canonical"),
                           "documents": current.document_count, "date": current.finished_at})
            todo.extend(int(x) for x in current.details.get("operands", []))
    search_entries = []
    for s in searches:
        search_entries.append({
            "set": s.number, "name": s.name, "kind": s.kind, "question": s.question,
            "database": s.database, "database_documents": s.details.get("database_documents"),
            "date": s.finished_at, "started_at": s.started_at, "documents": s.document_count,
            "max_rows": s.details.get("max_rows"), "rerun_of": s.details.get("rerun_of"),
            "generation": {k: s.details.get(k) for k in ("models", "queries_per_model", "temperature",
                                                        "deduplicate_queries", "queries_generated",
                                                        "queries_unique", "queries_run") if k in s.details},
            # Only the rows that ran: an invalid row (its text rejected) is listed, "not run", and
            # counted nowhere, so a methods section never claims a search it did not make.
            "row_kinds": _kind_counts(r.row_kind for r in s.rows if not r.invalid),
            "rows_not_run": sum(1 for r in s.rows if r.invalid),
            "retrieval": s.details.get("retrieval"),
            "deduplication": s.details.get("deduplication"),
            "rows": [{**r.to_dict(), "provenance_text": describe_provenance(r.provenance),
                      "run": not r.invalid, "outcome": r.outcome} for r in s.rows],
        })
    complete_searches = [s.number for s in searches if s.complete]
    report: dict[str, Any] = {
        "format": REPORT_FORMAT,
        "generated_by": f"kmds-desktop {__version__}",
        "set": saved.number, "name": saved.name, "kind": saved.kind, "title": saved.title,
        "database": saved.database,
        "database_documents": next((s.details.get("database_documents") for s in searches
                                    if s.details.get("database_documents") is not None), None),
        "date": saved.finished_at,
        "document_count": saved.document_count,
        "searches": search_entries,
        "set_algebra": combos,
        "overlap": overlap(history, complete_searches).to_dict() if complete_searches else None,
        "notes": notes,
        "known_papers": None,
    }
    if known is not None:
        this = next((r for r in known.sets if r.label == saved.label), None)
        report["known_papers"] = {
            "given": len(known.papers), "in_database": len(known.in_database),
            "not_in_database": [p.paper.label for p in known.not_in_database],
            "found": this.found if this else None, "recall": this.recall if this else None,
            "rows": [r.to_dict() for r in known.rows],
            "missed": [m.to_dict() for m in known.missed if m.set_number == saved.number],
        }
    return report


def _cell(text: Any) -> str:
    return " ".join(str(text if text is not None else "").split()).replace("|", "\\|")


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def report_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown a reviewer can read and paste."""
    lines: list[str] = []
    title = report.get("name") or report.get("title") or f"set #{report['set']}"
    lines.append(f"# Search report: {title}")
    lines.append("")
    db_docs = report.get("database_documents")
    size = f" ({db_docs:,} documents at search time)" if isinstance(db_docs, int) else ""
    lines += [
        f"- **Set**: #{report['set']} ({report['kind']})",
        f"- **Database**: {report['database']}{size}",
        f"- **Date**: {_when(report['date'])}",
        f"- **Documents in the set**: {report['document_count']}",
        f"- **Written by**: {report['generated_by']}",
        "",
    ]
    searches = report["searches"]
    lines += ["## Methods summary", "", methods_summary(report, size), ""]
    for s in searches:
        lines.append(f"## Search #{s['set']}" + (f" — {s['name']}" if s["name"] else ""))
        lines.append("")
        lines.append(f"- Question: {s['question']}")
        lines.append(f"- Run: {_when(s['date'])} on {s['database']}"
                     + (f" (re-run of #{s['rerun_of']})" if s.get("rerun_of") else ""))
        lines.append(f"- Documents kept per row: {s['max_rows']}; documents found: {s['documents']}")
        gen = s.get("generation") or {}
        if gen.get("models"):
            lines.append(f"- Query generation: models {', '.join(gen['models'])}, "
                         f"{gen.get('queries_per_model', '?')} per model, "
                         f"temperature {gen.get('temperature', '?')}; "
                         f"{gen.get('queries_generated', '?')} generated, {gen.get('queries_unique', '?')} "
                         f"after de-duplication of the query text")
        if s.get("row_kinds") or s.get("rows_not_run"):
            lines.append(f"- Rows run: {_kinds_text(s.get('row_kinds') or {}, methods=False)}"
                         + _not_run_text(s.get("rows_not_run")))
        lines += [f"- {line}" for line in _retrieval_lines(s)]
        lines.append("")
        lines.append("| row | kind | query as run | provenance | matches | returned | unique |")
        lines.append("|---|---|---|---|---:|---:|---:|")
        for r in s["rows"]:
            matches = _cell(r.get("outcome") or f"error: {r['error']}") if r["error"] else (
                ("~" if r["matches_estimated"] else "") + str(r["matches"]))
            lines.append(f"| #{s['set']}.{r['position']} | {_cell(r['row_kind'])} | `{_cell(r['text'])}` | "
                         f"{_cell(r['provenance_text'])} | {matches} | {r['ids_returned']} | "
                         f"{r['unique_ids']} |")
        dedup = s.get("deduplication") or {}
        if dedup:
            lines += ["", f"De-duplication: {dedup.get('row_hits')} documents returned by the rows "
                          f"merged into {dedup.get('documents')} distinct documents "
                          f"({dedup.get('found_by_several_rows')} found by more than one row); documents "
                          "are the same when their internal id is."]
        lines.append("")
    if report["set_algebra"]:
        lines += ["## Set algebra", "", "| set | expression | grouping | documents | date |",
                  "|---|---|---|---:|---|"]
        for c in report["set_algebra"]:
            lines.append(f"| #{c['set']} | `{_cell(c['expression'])}` | `{_cell(c['canonical'])}` | "
                         f"{c['documents']} | {human_datetime(c['date'] or '')} |")
        lines += ["", "AND and NOT bind tighter than OR; NOT is \"in the left set but not the right "
                      "one\".", ""]
    ov = report.get("overlap")
    if ov and len(ov["rows"]) > 1:
        lines += ["## Overlap of the rows", "", "| row | kind | documents | unique | "
                  + " | ".join(r["row"] for r in ov["rows"]) + " |",
                  "|---|---|---:|---:|" + "---:|" * len(ov["rows"])]
        for i, r in enumerate(ov["rows"]):
            cells = ["—" if i == j else f"{ov['shared'][i][j]} ({ov['jaccard'][i][j]:.2f})"
                     for j in range(len(ov["rows"]))]
            lines.append(f"| {r['row']} | {_cell(r.get('kind', KIND_FULL_TEXT))} | {r['documents']} | "
                         f"{r['unique']} | " + " | ".join(cells) + " |")
        lines += ["", "Cells: documents two rows share (Jaccard index). Semantic and hypothetical rows "
                      "count by their kind, not with the hand-written queries.", "",
                  "| model (or row kind) | rows | documents | found by no other model |",
                  "|---|---:|---:|---:|"]
        for origin, info in ov["models"].items():
            lines.append(f"| {_cell(origin)} | {info['rows']} | {info['documents']} | {info['unique']} |")
        lines.append("")
    kp = report.get("known_papers")
    if kp:
        lines += ["## Known papers", "",
                  f"{kp['given']} known papers given; {kp['in_database']} are in the database. "
                  f"This set finds {kp['found']} of them: recall {_pct(kp['recall'])}.", ""]
        if kp["not_in_database"]:
            shown = ", ".join(kp["not_in_database"][:50])
            more = f" and {len(kp['not_in_database']) - 50} more" if len(kp["not_in_database"]) > 50 else ""
            lines += [f"Not in the database (not counted as misses): {shown}{more}.", ""]
        if kp["rows"]:
            lines += ["| row | found | recall |", "|---|---:|---:|"]
            for r in kp["rows"]:
                lines.append(f"| {r['label']} | {r['found']} / {r['in_database']} | {_pct(r['recall'])} |")
            lines.append("")
        if kp["missed"]:
            lines += ["### Missed papers", ""]
            for m in kp["missed"]:
                ident = f"{m['source']} {m['external_id']}"
                given = "" if m["label"] == m["external_id"] else f"{m['label']}; "
                lines.append(f"- **{_cell(m['title'])}** ({given}{ident})")
                for reason in m["rows"]:
                    if reason.get("semantic"):
                        why = f"searched by meaning: not among its {reason['max_rows']} nearest documents"
                    elif reason["matches_query"]:
                        why = (f"matches the query but ranked below the row's {reason['max_rows']} "
                               "kept documents")
                    elif reason["missing_words"]:
                        why = "lacks " + ", ".join(f"`{w}`" for w in reason["missing_words"])
                    elif reason.get("written_otherwise"):
                        why = "writes " + ", ".join(reason["written_otherwise"]) + ", a form the row lacks"
                    else:
                        why = "does not match (word order or phrase)"
                    lines.append(f"  - {reason['row']}: {why}")
            lines.append("")
    exported = report.get("documents_file")
    if exported:
        lines += ["## Documents", "", f"The {exported['documents']} documents of the set were exported as "
                  f"{exported['format'].upper()} to `{Path(exported['path']).name}`.", ""]
    for note in report.get("notes") or []:
        lines.append(f"Note: {note}")
    return "\n".join(lines).rstrip() + "\n"


def _kind_counts(kinds: Any) -> dict[str, int]:
    listed = list(kinds)
    return {label: listed.count(label) for label in ROW_KIND_LABELS if label in listed}


def _not_run_text(not_run: int | None) -> str:
    """"; 1 more row was not run (its query was invalid)" ("" when every row ran)."""
    if not not_run:
        return ""
    return (f"; {not_run} more row{'s were' if not_run != 1 else ' was'} not run "
            f"(invalid: see the table)")


def _kinds_text(counts: dict[str, int], *, methods: bool) -> str:
    """"2 full-text queries (PostgreSQL to_tsquery, English configuration), 1 semantic row (the
    question) and 1 hypothetical abstract"; ``methods`` adds how full-text queries were parsed."""
    parts = []
    for kind, n in counts.items():
        if kind == KIND_FULL_TEXT:
            how = " (PostgreSQL to_tsquery, English configuration)" if methods else ""
            parts.append(f"{n} full-text quer{'ies' if n != 1 else 'y'}{how}")
        elif kind == KIND_SEMANTIC_QUESTION:
            parts.append(f"{n} semantic row{'s' if n != 1 else ''} (the question)")
        elif kind == KIND_SEMANTIC_HAND:
            parts.append(f"{n} semantic row{'s' if n != 1 else ''} (a hand-written sentence)")
        else:
            parts.append(f"{n} hypothetical abstract{'s' if n != 1 else ''} (written by an LLM, searched "
                         "by meaning)")
    if len(parts) <= 1:
        return "".join(parts) or "no rows"
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _coverage_text(facts: dict[str, Any]) -> str:
    coverage = VectorCoverage.from_dict(facts.get("vector_coverage"))
    if coverage is None:
        return ""
    return coverage.sentence(int(facts.get("semantic_rows") or 1))


def _retrieval_lines(search: dict[str, Any]) -> list[str]:
    """The per-search lines on how rows were searched by meaning and merged (empty for a search
    recorded without these facts, e.g. before they were kept)."""
    facts = search.get("retrieval") or {}
    if not facts:
        return []
    lines = []
    if facts.get("embedding_model"):
        coverage = _coverage_text(facts)
        lines.append(f"Semantic rows: embedded with {facts['embedding_model']}, nearest documents by cosine "
                     "similarity (pgvector)" + (f"; {coverage}" if coverage else ""))
    if facts.get("tier_ranked_rows"):
        lines.append(f"Full-text ranking: {tier_sentence(facts['tier_ranked_rows'])}")
    lines.append(f"Merge: {describe_fusion(facts)}")
    lines.append(f"Re-ranking: {describe_rerank(facts)}")
    return lines


def methods_summary(report: dict[str, Any], size: str = "") -> str:
    """The paragraph for a methods section: what was searched, with which kinds of rows, how rows
    searched by meaning were embedded and how much of the database they could see, how the rows'
    lists were merged and re-ranked, the set algebra and the final count."""
    searches = report["searches"]
    counts: dict[str, int] = {}
    for s in searches:
        kinds = s["row_kinds"] if "row_kinds" in s else _kind_counts(r["row_kind"] for r in s["rows"]
                                                                      if r.get("run", True))
        for kind, n in kinds.items():
            counts[kind] = counts.get(kind, 0) + n
    counts = {k: counts[k] for k in ROW_KIND_LABELS if k in counts}
    total = sum(counts.values())
    not_run = sum(int(s.get("rows_not_run") or 0) for s in searches)
    text = (f"The literature database {report['database']}{size} was searched on "
            f"{(report['date'] or '')[:10]} with {len(searches)} search{'es' if len(searches) != 1 else ''} "
            f"of {total} row{'s' if total != 1 else ''}, listed below exactly as run: "
            f"{_kinds_text(counts, methods=True)}{_not_run_text(not_run)}.")
    several = len(searches) > 1
    facts = [(s["set"], s.get("retrieval") or {}) for s in searches]
    models = sorted({f["embedding_model"] for _, f in facts if f.get("embedding_model")})
    if models:
        text += (f" Semantic and hypothetical rows were embedded with {', '.join(models)} and searched by "
                 "cosine similarity over the document vectors (pgvector)")
        coverages = [(n, _coverage_text(f)) for n, f in facts if _coverage_text(f)]
        if coverages:
            text += "; " + "; ".join((f"in #{n} " if several else "") + c for n, c in coverages)
        text += "."
    merges = sorted({f"{describe_fusion(f)}; {describe_rerank(f)}" for _, f in facts if f})
    if len(merges) == 1 and total > 1:
        fusion, rerank = merges[0].split("; ", 1)
        text += f" The rows' ranked lists were merged by {fusion}; {rerank}."
    elif len(merges) > 1:
        text += " The rows' ranked lists were merged as each search below says."
    tiered = [(n, f["tier_ranked_rows"]) for n, f in facts if f.get("tier_ranked_rows")]
    if tiered:  # a methods section must not claim an exact ranking it did not have
        text += " " + "; ".join((f"In #{n}: " if several else "") + tier_sentence(rows)
                                for n, rows in tiered) + "."
    if report["set_algebra"]:
        text += f" The searches were combined as {report['set_algebra'][0]['expression']}."
    return text + f" The final set holds {report['document_count']} documents."


def write_report(report: dict[str, Any], path: str | Path, fmt: str | None = None) -> Path:
    """Write the report as ``md`` or ``json`` (from the suffix when ``fmt`` is None)."""
    path = Path(path)
    kind = (fmt or path.suffix.lstrip(".") or "md").lower()
    if kind in ("md", "markdown"):
        path.write_text(report_markdown(report), encoding="utf-8")
    elif kind == "json":
        text = json.dumps(report, indent=2, ensure_ascii=False, default=str)
        path.write_text(text + "\n", encoding="utf-8")
    else:
        raise ValueError(f"unknown report format {kind!r}: use md or json")
    return path


def _clip(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 1] + "…"


def known_check_text(check: KnownCheck, *, whole: bool = False) -> str:
    """The known-papers check as plain text (the CLI prints it, the window shows it).

    The CLI's lines fit a terminal (set and row texts cut at 50 characters, titles at 90);
    ``whole`` keeps every text whole, for the window's view, which wraps them."""
    lines: list[str] = []

    def _short(text: str, width: int) -> str:
        return " ".join(str(text).split()) if whole else _clip(text, width)

    missing = check.not_in_database
    lines.append(f"{plural(len(check.papers), 'known paper')}: {len(check.in_database)} in the database, "
                 f"{len(missing)} not in the database (not counted as misses)")
    for p in missing[:_MAX_LISTED]:
        lines.append(f"  not in the database: {p.paper.label} ({p.paper.origin})")
    if len(missing) > _MAX_LISTED:
        lines.append(f"  ... and {len(missing) - _MAX_LISTED} more")
    for r in check.sets:
        lines.append(f"{r.label} {_short(r.text, 50)!r}: finds {r.found} of {r.in_database}, recall "
                     f"{_pct(r.recall)}")
    if check.rows:
        lines.append("rows behind these sets:")
    for row in check.rows:
        lines.append(f"    {row.label} {_short(row.text, 50)!r}: {row.found} of {row.in_database} "
                     f"({_pct(row.recall)})")
    if check.missed:
        lines.append(f"missed by #{check.missed[0].set_number}:")
    for m in check.missed:
        doc = m.status.document
        lines.append(f"  - {_short(doc.title if doc else m.status.paper.label, 90)} "
                     f"({doc.label() if doc else ''})")
        for reason in m.rows:
            if reason.get("semantic"):
                why = f"searched by meaning, not among its {reason['max_rows']} nearest documents"
            elif reason["matches_query"]:
                why = f"matches, ranked below the {reason['max_rows']} documents kept"
            elif reason["missing_words"]:
                why = "lacks " + ", ".join(reason["missing_words"])
            elif reason.get("written_otherwise"):
                why = "writes " + ", ".join(reason["written_otherwise"]) + ", a form the row lacks"
            else:
                why = "does not match"
            lines.append(f"      {reason['row']}: {why}")
    return "\n".join(lines) + "\n"
