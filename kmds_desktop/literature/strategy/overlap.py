"""Overlap between the rows of one or more searches: shared documents, Jaccard, unique contributions.

Why: a strategy built from several models' queries often carries rows that find nothing the others do
not; the matrix and each row's unique contribution show which rows can be dropped, and the per-model
view shows which models found documents no other row found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kmds_desktop.literature.retrieval.semantic import KIND_FULL_TEXT, KIND_HYPOTHETICAL
from kmds_desktop.literature.strategy.history import SearchHistory, row_kind


@dataclass
class RowSet:
    label: str  # "#N.K"
    text: str
    origin: str  # see :func:`origin_of`
    ids: set[int]
    kind: str = KIND_FULL_TEXT  # full-text, semantic: the question / hand-written, hypothetical abstract


@dataclass
class Overlap:
    """Rows, the pairwise shared counts and Jaccard indices, unique contributions, per-model uniques."""

    rows: list[RowSet]
    shared: list[list[int]]
    jaccard: list[list[float]]
    unique: list[int]
    union: int
    models: dict[str, dict[str, int]]  # origin -> {"rows", "documents", "unique"}

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [{"row": r.label, "kind": r.kind, "text": r.text, "origin": r.origin,
                      "documents": len(r.ids), "unique": u}
                     for r, u in zip(self.rows, self.unique, strict=True)],
            "shared": self.shared,
            "jaccard": [[round(v, 4) for v in line] for line in self.jaccard],
            "union": self.union,
            "models": self.models,
        }

    def markdown(self) -> str:
        """The matrix as a Markdown table (shared count / Jaccard) and the per-model contributions."""
        if not self.rows:
            return "No rows with documents.\n"
        head = "| row | kind | documents | unique | " + " | ".join(r.label for r in self.rows) + " |"
        sep = "|---|---|---:|---:|" + "---:|" * len(self.rows)
        lines = [head, sep]
        for i, r in enumerate(self.rows):
            cells = []
            for j in range(len(self.rows)):
                cells.append("—" if i == j else f"{self.shared[i][j]} ({self.jaccard[i][j]:.2f})")
            lines.append(f"| {r.label} | {r.kind} | {len(r.ids)} | {self.unique[i]} | "
                         + " | ".join(cells) + " |")
        lines += ["", "Cells: documents shared by the two rows (Jaccard index). "
                      "Unique: found by no other row.",
                  "", "| model | rows | documents | found by no other model |", "|---|---:|---:|---:|"]
        for origin, info in self.models.items():
            lines.append(f"| {origin} | {info['rows']} | {info['documents']} | {info['unique']} |")
        return "\n".join(lines) + "\n"


def origin_of(provenance: dict[str, Any]) -> str:
    """The group a row counts in for "found by no other model": a full-text row by its model (or
    "hand-written" / "edited"); a semantic row by its kind, so the question searched by meaning is
    never counted with hand-written queries; a hypothetical abstract by its kind and model."""
    kind = row_kind(provenance)
    if kind == KIND_HYPOTHETICAL:
        model = provenance.get("model")
        return f"{kind} ({model})" if model else kind
    if kind != KIND_FULL_TEXT:
        return kind
    origin = provenance.get("kind")
    if origin == "generated":
        return str(provenance.get("model") or "?")
    return str(origin or "unknown")


def overlap(history: SearchHistory, numbers: list[int]) -> Overlap:
    """Overlap of the rows of the searches ``numbers`` (rows that failed are left out)."""
    rows: list[RowSet] = []
    for number in numbers:
        saved = history.complete_set(number)
        ids = history.all_row_ids(number)
        for row in saved.rows:
            if row.ok:
                rows.append(RowSet(f"#{number}.{row.position}", row.text, origin_of(row.provenance),
                                   set(ids.get(row.position, [])), row.row_kind))
    n = len(rows)
    shared = [[len(rows[i].ids & rows[j].ids) for j in range(n)] for i in range(n)]
    jaccard = [[(shared[i][j] / len(rows[i].ids | rows[j].ids)) if (rows[i].ids | rows[j].ids) else 0.0
                for j in range(n)] for i in range(n)]
    count: dict[int, int] = {}
    for r in rows:
        for d in r.ids:
            count[d] = count.get(d, 0) + 1
    unique = [sum(1 for d in r.ids if count[d] == 1) for r in rows]
    models: dict[str, dict[str, int]] = {}
    by_origin: dict[str, set[int]] = {}
    for r in rows:
        info = models.setdefault(r.origin, {"rows": 0, "documents": 0, "unique": 0})
        info["rows"] += 1
        by_origin.setdefault(r.origin, set()).update(r.ids)
    for origin, found in by_origin.items():
        others: set[int] = set()
        for other, other_ids in by_origin.items():
            if other != origin:
                others |= other_ids
        models[origin]["documents"] = len(found)
        models[origin]["unique"] = len(found - others)
    return Overlap(rows, shared, jaccard, unique, len(count), models)
