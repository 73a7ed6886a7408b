"""Ranking full-text rows by how specific their terms are (inverse document frequency).

Why: PostgreSQL's ``ts_rank`` and ``ts_rank_cd`` count how often and how close the query's words occur,
but every word weighs the same: in ``erlotinib | survival | lung | cancer`` a paper that says
"cancer" five times outranks one that names erlotinib once. BM25, the usual reference, weighs each
term by its rarity in the collection. The ``idf`` ranking does the same inside PostgreSQL: a document's
score is ``sum over the query's terms t of idf(t) * ts_rank(search_vector, t, 1)``, with
``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` (BM25's form; ``N`` documents, ``df`` containing
``t``). ``ts_rank`` per term keeps what the search vector already knows: title words (weight A)
count more than abstract words (B), repeated occurrences saturate, and normalisation 1 divides by
``1 + log(document length)``. Every part runs in the server's C code over the matches the GIN index
finds; the only extra work is one count per term, kept for :data:`STATISTICS_TTL_S`.

Measured on SciFact *train* claims (``bench/retrieval_quality.py``): the built-in generator's broad
query alone, nDCG@10 0.40 ranked by ``ts_rank_cd`` and 0.65 ranked by ``idf`` (bm25s: 0.67).
"""

from __future__ import annotations

import re
import threading
import time

from kmds_desktop.word_rarity import idf

#: A lexeme of a normalised tsquery as PostgreSQL prints it: ``'word'``, ``'word':*``, ``'it''s':AB``.
#: The pattern has no nested repetition, so it runs in linear time on any text.
OPERAND = re.compile(r"'(?:[^']|'')*'(?::[*A-D]+)?")
#: At most this many distinct terms are weighted (a longer query ranks by its first ones; it still
#: matches as written).
MAX_OPERANDS = 64
#: Document counts are reused this long (and dropped after an import through the same connection).
STATISTICS_TTL_S = 300.0


def operands(normalized: str) -> list[str]:
    """The distinct terms of a tsquery printed by PostgreSQL (``to_tsquery(...)::text``), in order."""
    return list(dict.fromkeys(OPERAND.findall(normalized)))[:MAX_OPERANDS]


def rank_expression(count: int) -> str:
    """``w0 * ts_rank(d.search_vector, t0, 1) + ...`` with named parameters ``w<i>``, ``t<i>``."""
    return " + ".join(
        f"%(w{i})s * ts_rank(d.search_vector, %(t{i})s::tsquery, 1)" for i in range(count)
    ) or "0"


class TermStatistics:
    """Document frequencies of tsquery terms and the collection size, cached per database object.

    Thread-safe: the window's workers and the CLI share one database object.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stamp = 0.0
        self._documents: int | None = None
        self._frequency: dict[str, int] = {}

    def clear(self) -> None:
        """Forget everything (after an import: the counts changed)."""
        with self._lock:
            self._documents, self._frequency, self._stamp = None, {}, 0.0

    def _expire(self) -> None:
        if time.monotonic() - self._stamp > STATISTICS_TTL_S:
            self._documents, self._frequency, self._stamp = None, {}, time.monotonic()

    def missing(self, terms: list[str]) -> tuple[bool, list[str]]:
        """(whether the collection size is needed, the terms whose frequency is not known)."""
        with self._lock:
            self._expire()
            return self._documents is None, [t for t in terms if t not in self._frequency]

    def store(self, documents: int | None, frequencies: dict[str, int]) -> None:
        with self._lock:
            if documents is not None:
                self._documents = documents
            self._frequency.update(frequencies)

    def weights(self, terms: list[str]) -> list[float]:
        """idf of each term (1.0 for a term whose count is unknown)."""
        with self._lock:
            n = self._documents or 0
            return [idf(self._frequency[t], n) if t in self._frequency and n else 1.0 for t in terms]
