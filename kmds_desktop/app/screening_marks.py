"""Which words the screening view marks in a record: the terms of the rows that found it.

A reviewer reads the marks to see *where* a row matched, so a mark must point at a word that carried the
search: "cystic", "fibros…", "sputum". Function words ("the", "of", "and", "which", "from") carry no
search (PostgreSQL drops them from a full-text query, and a semantic row's sentence is full of them), and
marking them painted half of every abstract blue. Why a module of its own: the view only renders marks;
what counts as a term is a rule a test (and any other view) can read without Qt.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: Query syntax that is not a term, and the words of a row's name that are not the row's text.
_SYNTAX = frozenset("and or not near semantic hypothetical abstract row".split())

#: Words that say nothing about a record's subject: English function words (as PostgreSQL's English
#: configuration drops them), and the words questions are made of. Never marked.
FILLER_WORDS = frozenset(
    """
    a about above after again against all also although am among an and any are as at be because been
    before being below between both but by can could did do does doing down during each either few for
    from further had has have having he her here hers him his how however i if in into is it its itself
    just least less like may might more most much must my no nor not of off on once one only onto or other
    our out over own per rather same several shall she should since so some such than that the their them
    then there these they this those through thus to too under until up upon versus very via vs was we were
    what whatever when where whereas whether which while who whom whose why will with within without would
    yet you your
    """.split()
)

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-]{2,}")
_ROW_NAME = re.compile(r"^#\d+ row \d+: ")


def is_filler(word: str) -> bool:
    """Whether ``word`` is a function word or query syntax (never marked in a record)."""
    low = word.lower().strip("-")
    return low in FILLER_WORDS or low in _SYNTAX


def row_terms(found_by: Iterable[str]) -> list[str]:
    """The words of the rows that found a record ("#3 row 2: cystic AND fibros:*" -> cystic, fibros),
    lower case, each once, in the order the rows give them; prefix terms (``fibros:*``) stay prefixes.
    Filler words (:data:`FILLER_WORDS`) and query syntax are left out, and a hypothetical abstract's
    paragraph gives none (its words say nothing about this record)."""
    terms: list[str] = []
    for row in found_by:
        text = row.split(": ", 1)[1] if _ROW_NAME.match(row) else row
        if text.startswith("hypothetical abstract"):
            continue
        for word in _WORD.findall(text):
            low = word.lower()
            if not is_filler(low) and low not in terms:
                terms.append(low)
    return terms
