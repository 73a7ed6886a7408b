"""Export a review's included records (or all of them, with decision, reason, note and score).

Why reuse :mod:`kmds_desktop.literature.strategy.reference_files`: a screened set goes to the same reference
managers as a
search's documents, so it is written by the same writers (RIS fields, BibTeX keys and escaping, CSV
columns); this module only adds the screening fields. RIS carries the decision and reason as ``KW``
(``screening: include``, ``exclusion reason: …``) and an ``N1`` note (what Zotero shows as a note);
BibTeX carries them in ``keywords``; CSV gets ``decision``, ``reason``, ``note``, ``score`` columns.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from kmds_desktop.literature.screening.decisions import INCLUDE, Decision
from kmds_desktop.literature.screening.records import ScreeningRecord
from kmds_desktop.literature.strategy.reference_files import (
    CSV_COLUMNS,
    FoundDocument,
    documents_to_bibtex,
    documents_to_csv,
    documents_to_ris,
    format_for_path,
)

SCREENING_COLUMNS = ("decision", "reason", "note", "score")
Key = tuple[str, str]


def _document(rec: ScreeningRecord, decision: Decision | None) -> FoundDocument:
    """The record's Document as the writers take it: its row id and rows as the search found it, and
    the decision (and reason) as keywords the export adds; the Document itself is written as it is."""
    extra = []
    if decision is not None:
        extra.append(f"screening: {decision.decision}")
        if decision.reason:
            extra.append(f"exclusion reason: {decision.reason}")
    # The record's DOI and PMID in the one spelling the screening matches by, as exports always wrote them.
    document = rec.document
    if (document.doi, document.pmid) != (rec.doi, rec.pmid):
        document = replace(document, doi=rec.doi, pmid=rec.pmid)
    return FoundDocument(document, id=str(rec.doc_id or ""), found_by=list(rec.found_by),
                         extra_keywords=extra)


def select(
    records: Sequence[ScreeningRecord],
    decisions: Mapping[Key, Decision],
    which: str = "included",
) -> list[ScreeningRecord]:
    """``included`` (the default), ``decided`` or ``all`` records, in the review's order."""
    if which == "all":
        return list(records)
    if which == "decided":
        return [r for r in records if r.key in decisions]
    if which == "included":
        return [r for r in records if r.key in decisions and decisions[r.key].decision == INCLUDE]
    raise ValueError(f"unknown selection {which!r}: use included, decided or all")


def screened_to_csv(
    records: Sequence[ScreeningRecord],
    decisions: Mapping[Key, Decision],
    scores: Mapping[Key, float] | None = None,
) -> str:
    """The documents CSV with the screening columns after its own."""
    # read as CSV, not as lines: a field's own line breaks (\r\n, \u2028) stay as they are (splitting the
    # text into lines first turned every one of them into \n)
    text = documents_to_csv([_document(r, decisions.get(r.key)) for r in records])
    rows = list(csv.reader(io.StringIO(text, newline="")))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(list(CSV_COLUMNS) + list(SCREENING_COLUMNS))
    for rec, row in zip(records, rows[1:], strict=True):
        d = decisions.get(rec.key)
        score = (scores or {}).get(rec.key)
        writer.writerow(
            row
            + [
                d.decision if d else "",
                d.reason if d else "",
                d.note if d else "",
                "" if score is None else f"{score:.4f}",
            ]
        )
    return buf.getvalue()


def screened_to_ris(records: Sequence[ScreeningRecord], decisions: Mapping[Key, Decision]) -> str:
    out = []
    for rec in records:
        text = documents_to_ris([_document(rec, decisions.get(rec.key))])
        d = decisions.get(rec.key)
        if d is not None:
            note = (  # one line: a line break in the reason or note would end the N1 field (or the record)
                f"screening: {d.decision}"
                + (f"; reason: {' '.join(d.reason.split())}" if d.reason else "")
                + (f"; note: {' '.join(d.note.split())}" if d.note else "")
            )
            text = text.replace("\nER  - ", f"\nN1  - {note}\nER  - ", 1)
        out.append(text)
    return "".join(out)


def screened_to_bibtex(records: Sequence[ScreeningRecord], decisions: Mapping[Key, Decision]) -> str:
    return documents_to_bibtex([_document(r, decisions.get(r.key)) for r in records])


def export_screened(
    records: Sequence[ScreeningRecord],
    decisions: Mapping[Key, Decision],
    path: str | Path,
    fmt: str | None = None,
    *,
    scores: Mapping[Key, float] | None = None,
) -> Path:
    """Write ``records`` (already selected) to ``path`` as CSV, RIS or BibTeX (by ``fmt`` or suffix)."""
    path = Path(path)
    key = (fmt or format_for_path(path)).lower().lstrip(".")
    key = {"bib": "bibtex"}.get(key, key)
    if key == "csv":
        text = screened_to_csv(records, decisions, scores)
    elif key == "ris":
        text = screened_to_ris(records, decisions)
    elif key == "bibtex":
        text = screened_to_bibtex(records, decisions)
    else:
        raise ValueError(f"unknown export format {fmt!r}: use csv, ris or bibtex")
    path.write_text(text, encoding="utf-8", newline="")
    return path
