"""A review as one versioned JSON file: to archive it, move it to another data folder, or hand it to a
second screener and merge their decisions back.

Why every review table, row by row: the file must give back the same review (records in their order,
decisions with their times and the undo log, other reviewers, entered PRISMA numbers, document vectors,
strategy versions, the update log, rounds and flags), so it holds each table's rows for the review as
SQLite holds them (``{"base64": ...}`` for a blob). Importing writes them under a name no review has
(``name (2)`` when taken): never a silent merge into an existing review. A file of a newer format is
refused with what to do; columns this version does not know are left out, tables it does not know too.

Reading is bounded (:func:`~kmds_desktop.user_files.read_user_text`: a regular file, at most
:data:`MAX_REVIEW_FILE_BYTES`), and the structure is checked before anything is written.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kmds_desktop.literature.document import Document
from kmds_desktop.literature.reviews.identity import RecordMatcher
from kmds_desktop.literature.reviews.store import ReviewError, ReviewStore
from kmds_desktop.literature.screening import agreement
from kmds_desktop.literature.screening.decisions import DECISIONS, Decision, Key
from kmds_desktop.literature.screening.records import ScreeningRecord
from kmds_desktop.literature.strategy.history import utc_now
from kmds_desktop.user_files import file_limit, read_user_text, write_user_text

FORMAT = "kmds-desktop review"
#: The file format's version: a reader refuses a larger one (written by a newer app).
FORMAT_VERSION = 1
#: The largest review file read (a review of 100,000 records with vectors is about 400 MB).
MAX_REVIEW_FILE_BYTES = 512 << 20
#: Cached model scores travel with the review (they are kept per question, across reviews).
_SCORES = "model_score"


def _encode(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) != {"base64"} or not isinstance(value["base64"], str):
            raise ReviewError("the review file has a value that is neither text, a number nor a blob")
        return base64.b64decode(value["base64"].encode("ascii"), validate=True)
    if isinstance(value, list):
        raise ReviewError("the review file has a list where a single value belongs")
    return value


def review_document(store: ReviewStore, review_id: str, *, reviewer: str = "", app_version: str = "") -> dict:
    """The review file's content (see the module docstring)."""
    review = store.find(review_id)
    tables: dict[str, dict[str, Any]] = {}
    for table in store.review_tables():
        columns, rows = store.table_rows(table, review.id)
        if rows:
            tables[table] = {"columns": columns, "rows": [[_encode(v) for v in row] for row in rows]}
    keys = {r.key for r in store.records(review.id)}
    scores = []
    for question in store.questions(review.id):
        for (model, key), (score, reason, note) in store.model_scores(question).items():
            if key in keys:
                scores.append([model, question, key[0], key[1], score, reason, note])
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "app_version": app_version,
        "exported_at": utc_now(),
        "review": {"id": review.id, "name": review.name},
        "reviewer": reviewer,
        "tables": tables,
        _SCORES: scores,
    }


def write_review_file(store: ReviewStore, review_id: str, path: str | Path, *, reviewer: str = "",
                      app_version: str = "") -> Path:
    """Write the review file (UTF-8 JSON) and return its path."""
    path = Path(path)
    doc = review_document(store, review_id, reviewer=reviewer, app_version=app_version)
    return write_user_text(path, json.dumps(doc, ensure_ascii=False))  # an earlier export survives


def read_review_file(path: str | Path) -> dict[str, Any]:
    """A review file, read bounded and checked (format, version, tables shaped as rows of columns)."""
    text = read_user_text(path, file_limit(MAX_REVIEW_FILE_BYTES), "review file")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise ReviewError(f"{path} is not a review file (not JSON: {str(err)[:80]}); choose a file "
                          "'literature review export' wrote") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ReviewError(f"{path} is not a review file (no \"format\": \"{FORMAT}\"); choose a file "
                          "'literature review export' wrote")
    version = doc.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise ReviewError(f"{path} has no valid format_version; export the review again")
    if version > FORMAT_VERSION:
        raise ReviewError(f"{path} is review format {version}, newer than this app reads ({FORMAT_VERSION}); "
                          "update the app to import it")
    tables = doc.get("tables")
    if not isinstance(tables, dict) or not isinstance(tables.get("review"), dict):
        raise ReviewError(f"{path} holds no review (its \"tables\" lack \"review\"); export the review again")
    for name, table in tables.items():
        columns = table.get("columns") if isinstance(table, dict) else None
        rows = table.get("rows") if isinstance(table, dict) else None
        if (not isinstance(columns, list) or not all(isinstance(c, str) for c in columns)
                or not isinstance(rows, list)
                or not all(isinstance(r, list) and len(r) == len(columns) for r in rows)):
            raise ReviewError(f"{path}: table {str(name)[:40]!r} is not rows of its columns; export the "
                              "review again")
    if not isinstance(doc.get(_SCORES, []), list):
        raise ReviewError(f"{path}: {_SCORES} is not a list; export the review again")
    return doc


@dataclass
class ImportedReview:
    """What importing a review file did."""

    review_id: str
    original_name: str
    rows: dict[str, int] = field(default_factory=dict)
    renamed: bool = False

    def line(self) -> str:
        decisions = self.rows.get("decision", 0)
        records = self.rows.get("review_record", 0)
        named = f" (as {self.review_id!r}: {self.original_name!r} exists already)" if self.renamed else ""
        return f"imported review {self.original_name!r}{named}: {records:,} records, {decisions:,} decisions"


def import_review_file(store: ReviewStore, path: str | Path, *, name: str | None = None) -> ImportedReview:
    """Import a review file as a new review, named ``name`` or as in the file; a name taken gets a
    free one (``name (2)``). Nothing is written unless the whole file is read and checked."""
    doc = read_review_file(path)
    about: dict[str, Any] = doc["review"] if isinstance(doc.get("review"), dict) else {}
    original = str(about.get("name") or about.get("id") or "review")
    wanted = name or original
    scores = [_score_row(row, path) for row in doc.get(_SCORES, [])
              if isinstance(row, list) and len(row) == 7]
    review_id = store.free_name(wanted)
    tables = {
        table: (list(t["columns"]), [[_decode(v) for v in row] for row in t["rows"]])
        for table, t in doc["tables"].items()
    }
    columns, rows = tables["review"]
    if len(rows) != 1:
        raise ReviewError(f"{path} holds {len(rows)} review rows where one belongs; export the review again")
    if "name" in columns:
        rows[0][columns.index("name")] = review_id
    written = store.insert_rows(tables, review_id)
    for model, question, key, score, reason, note in scores:  # checked before anything was written
        store.set_model_score(model, question, key, score, reason, note)
    return ImportedReview(review_id, original, written, renamed=review_id != wanted)


def _score_row(row: list[Any], path: str | Path) -> tuple[str, str, tuple[str, str], int | None, str, str]:
    """One model score of a review file, checked: a score is 1-5 or none (``[1]`` or ``1e400`` raised
    after the review was already written, and a retry made a second copy)."""
    model, question, source, ext, score, reason, note = row
    if score is not None and not (isinstance(score, int) and not isinstance(score, bool) and 1 <= score <= 5):
        raise ReviewError(f"{path}: a model score of {score!r} is not 1-5; export the review again")
    return str(model), str(question), (str(source), str(ext)), score, str(reason or ""), str(note or "")


@dataclass
class MergeReport:
    """What merging a second screener's returned review did."""

    reviewer: str
    imported: int = 0
    unknown: int = 0  #: their decisions on records this review does not have
    agreement: agreement.Agreement | None = None

    @property
    def conflicts(self) -> list[tuple[Key, str, str]]:
        return list(self.agreement.disagreements) if self.agreement else []

    def line(self) -> str:
        parts = [f"{self.imported:,} decisions of {self.reviewer} merged (kept beside yours)"]
        if self.unknown:
            parts.append(f"{self.unknown:,} on records this review does not have, skipped")
        if self.agreement is not None:
            parts.append(self.agreement.summary(self.reviewer))
        if self.conflicts:
            parts.append(f"{len(self.conflicts):,} conflicts kept for you to resolve "
                         "('literature screen state' lists the agreement)")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        a = self.agreement
        return {
            "reviewer": self.reviewer, "imported": self.imported, "unknown": self.unknown,
            "both": a.both if a else 0, "agreed": a.agreed if a else 0, "kappa": a.kappa if a else None,
            "conflicts": [{"source": k[0], "external_id": k[1], "yours": m, "theirs": t}
                          for k, m, t in self.conflicts],
        }


def merge_returned(store: ReviewStore, review_id: str, path: str | Path,
                   reviewer: str | None = None) -> MergeReport:
    """Merge a second screener's returned review file: their decisions are kept as another reviewer's
    (never over yours), matched to your records by identity, DOI, PMID or title; disagreements are
    reported (Cohen's kappa) and both decisions kept."""
    review = store.find(review_id)
    doc = read_review_file(path)
    who = " ".join(str(reviewer or doc.get("reviewer") or "").split()) or "second screener"
    theirs_records = _table(doc, "review_record")
    matcher = RecordMatcher(store.records(review.id))
    their_key: dict[Key, Key | None] = {}
    for row in theirs_records:
        try:
            rec = ScreeningRecord.from_dict(json.loads(row.get("data") or "{}"))
        except (ValueError, TypeError, AttributeError):
            continue
        their_key[(str(row.get("source")), str(row.get("external_id")))] = matcher.match(rec)
    theirs: dict[Key, Decision] = {}
    unknown = 0
    for row in _table(doc, "decision"):
        key = (str(row.get("source")), str(row.get("external_id")))
        mine = their_key.get(key) or matcher.match(ScreeningRecord(document=Document(*key)))
        if mine is None or row.get("decision") not in DECISIONS:
            unknown += 1
            continue
        theirs[mine] = Decision(str(row["decision"]), str(row.get("reason") or ""),
                                str(row.get("note") or ""), None, str(row.get("decided_at") or ""))
    store.add_other_decisions(review.id, who, theirs)
    report = MergeReport(who, imported=len(theirs), unknown=unknown)
    report.agreement = agreement.compare(store.decisions(review.id), store.other_decisions(review.id, who))
    return report


def _table(doc: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    table = (doc.get("tables") or {}).get(name)
    if not table:
        return []
    columns = table["columns"]
    return [dict(zip(columns, row, strict=True)) for row in table["rows"]]
