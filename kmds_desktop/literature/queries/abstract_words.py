"""Words of the model's hypothetical abstract that widen its broad query (query2doc-like expansion).

Why: the relevant papers a question's own words miss use other words, and a small model names them
more readily while writing an abstract that answers the question than when asked for a list of
synonyms (asked for terms, Qwen2.5-Coder-1.5B gave "element" for calcium and "fluid" for mucus). The
abstract's rarest words the corpus has join the model's broad row, as the built-in's feedback words
join its own; the abstract is the one the hypothetical-abstract row searches by meaning, written once
per question and model.

Measured on the dev split only (Qwen2.5-Coder-1.5B, its abstracts kept, the abstract's words added to
the built-in's broad row and that row fused with the built-in's three as the app fuses rows;
docs/design/benchmarks.md): SciFact *train*, 48 claims, recall@100 0.875 -> 0.958 with 10 single words
of at most 20 % of the corpus (6 words of at most 5 %: 0.917; two-word phrases no better); CF, 49
odd-id questions, 0.479 -> 0.487 and nDCG@10 0.416 -> 0.476 (the best of the 12 settings there too).
The share limit keeps out the abstract's generic words ("samples", "healthy", "plays").
"""

from __future__ import annotations

import math
import re
from collections import Counter

from kmds_desktop.literature.queries.concept_blocks import FEEDBACK_STOP, CorpusLookups, term_operand

#: Words of the abstract added to the broad row (0: none).
ABSTRACT_WORDS = 10
#: A word must be in at least this many documents (one document is a typo or a name)...
ABSTRACT_WORD_MIN_DOCS = 2
#: ...and in at most this share of the corpus (a common word only floods the broad row).
ABSTRACT_WORD_MAX_SHARE = 0.2
#: The abstract's characters read (a 4-6 sentence abstract is about 1,000).
ABSTRACT_CHARS_READ = 4000
#: Words an abstract writes about itself rather than about the subject.
_ABSTRACT_FILLER = frozenset(
    """
    aimed aims investigate investigated investigating examine examined explore explored assess assessed
    evaluate evaluated determine determined analyze analyzed analyse analysed conducted performed
    crucial plays play understanding understood findings finding implications future research
    further needed insights overall various several provide provides provided highlight highlights
    """.split()
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-]{2,29}")


def abstract_words(abstract: str, known_stems: set[str], lookups: CorpusLookups,
                   limit: int = ABSTRACT_WORDS) -> list[str]:
    """The ``limit`` words of ``abstract`` to add to the broad row, rarest and most repeated first.

    A word counts when the queries lack it (``known_stems``: the question's words and the blocks'
    variants, as the database stems them), it is not a common or filler word, and the corpus has it in
    :data:`ABSTRACT_WORD_MIN_DOCS` documents or more but at most :data:`ABSTRACT_WORD_MAX_SHARE` of them.
    Each is weighed as feedback words are: its count in the abstract times its rarity. Without corpus
    counts nothing is added (an unchecked word could be one no paper uses). One count per candidate
    word, bounded by the abstract's length."""
    total = lookups.total()
    if limit <= 0 or not total or not abstract:
        return []
    counts = Counter(w.lower() for w in _WORD.findall(abstract[:ABSTRACT_CHARS_READ]))
    candidates = sorted(w for w in counts if w not in FEEDBACK_STOP and w not in _ABSTRACT_FILLER)
    stems = lookups.stems(candidates)
    seen: set[str] = set()
    scored: list[tuple[float, str]] = []
    for word in candidates:
        stem = stems.get(word, "")
        if not stem or " " in stem or stem in known_stems or stem in seen:
            continue
        seen.add(stem)
        documents = lookups.count(term_operand(word))
        if not documents or documents < ABSTRACT_WORD_MIN_DOCS or documents > ABSTRACT_WORD_MAX_SHARE * total:
            continue
        scored.append((counts[word] * math.log(1 + total / documents), word))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [word for _, word in scored[:limit]]
