"""A search strategy written the way a librarian writes one: concepts, their variants, blocks.

Why: in a topical corpus every topical word is frequent, so picking "the rarest words" of a question
(the built-in generator's old rule) ends on a word such as ``worsen`` that says nothing about the
subject. PubMed's building-block method instead finds the question's *concepts* ("cystic fibrosis",
"lung function", "Pseudomonas aeruginosa"), writes each as a block of its variants joined by OR, and
joins the blocks by AND. A concept that is frequent in the corpus is still a concept.

Everything is learnt from the corpus itself, through the database (so it fits each user's own papers):

- **multi-word concepts**: adjacent content words form a phrase when the corpus uses them as one
  (``a <-> b`` matches at least :data:`PHRASE_SHARE` of the documents of the rarer word);
- **abbreviations the corpus defines**: "cystic fibrosis (CF)" in the documents of the phrase, or the
  long form written before "(CF)" for an abbreviation in the question; a candidate counts only when
  most documents that use it also use the other form;
- **British/American spellings** (tumour/tumor, haemoglobin/hemoglobin, randomised/randomized) that
  occur in the corpus;
- **pseudo-relevance feedback** (RM3, as Anserini/pyserini do it, in a light form): the words that
  the best :data:`FEEDBACK_DOCS` documents of a first ranked pass share, weighted by rarity; they
  widen the medium query of a two-concept question, and the broad query (:data:`FEEDBACK_IN_BROAD`).

The three queries, precise to broad: (1) every concept block joined by AND, leaving out blocks while
that matches fewer than :data:`PRECISE_MIN` documents; (2) any ``k`` of the ``n`` blocks (OR of the
AND groups), the largest ``k`` that clearly widens (1); (3) every word and variant and the feedback
words joined by OR (ranked by term rarity, so a common word only adds a little). Each query keeps a
note of the concepts, variants and reasons, shown in the review table.

Cost: a handful of counts (one GIN look-up each, cached per question and term) and one ranked pass
of :data:`FEEDBACK_DOCS` documents.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from kmds_desktop.literature.queries.query_cleaning import MAX_QUERY_CHARS as CLEANER_MAX_CHARS
from kmds_desktop.literature.store.collection_size import collection_size

#: A pair of adjacent words is one concept when the phrase matches at least PHRASE_MIN documents and
#: either this share of the documents of the rarer word, or PHRASE_LIFT times the documents that
#: would hold both words if they were independent (in a small or topical corpus the share is low for
#: real concepts such as "lung function", while their co-occurrence is far above chance).
PHRASE_SHARE = 0.2
PHRASE_LIFT = 0.25
PHRASE_MIN = 2
#: The precise query leaves out concepts while it matches fewer documents than this (keeping two).
PRECISE_MIN = 5
#: The medium query asks for k of the n concepts, the largest k whose query matches at least this
#: many times as many documents as the precise one.
MEDIUM_WIDER = 3
MEDIUM_CONCEPTS = 5
#: Queries are written well below the query cleaner's limit (1,000 characters a line).
MAX_QUERY_CHARS = 900
#: An abbreviation is a variant when at least this share of its documents also use the long form.
ABBREVIATION_SHARE = 0.5
#: Neighbours in the shipped embedding model's space (all-MiniLM-L6-v2): a word or two-word phrase of
#: the feedback documents is a variant of a concept when its vector is at least this close (cosine)
#: to the concept's ("pulmonary function" 0.88 to "lung function", "sars-cov" 0.95 to "SARS-CoV-2";
#: "mucin" 0.65 to "mucus", "antibiotics" 0.65 to "infection" and "bone" 0.60 to "fractures" are
#: related words, not other names).
NEIGHBOUR_SIMILARITY = 0.7
#: A candidate sharing a word with the concept is mostly a narrower or other concept ("lung disease"
#: 0.71 to "lung function"), so it must be this close.
NEIGHBOUR_SIMILARITY_SHARED = 0.8
#: Candidates embedded per question (the most shared in the feedback documents first) and variants
#: kept per concept; a variant may match at most NEIGHBOUR_WIDER times the concept's documents (a far
#: more common word is a broader term, not another name).
NEIGHBOUR_CANDIDATES = 60
NEIGHBOUR_PER_CONCEPT = 2
NEIGHBOUR_MIN_DOCS = 2
NEIGHBOUR_WIDER = 3.0
#: Documents read for pseudo-relevance feedback, and feedback words added to the broad query.
FEEDBACK_DOCS = 10
FEEDBACK_TERMS = 3
#: Whether the feedback documents are the best-ranked matches of the medium query (True), or the
#: first matches of the precise query, unranked (cheaper on a large database: no ranking of every
#: match). Measured on the first 400 SciFact *train* claims, merged full-text rows: ranked 0.911 /
#: 0.560 (recall@100 / nDCG@10), unranked 0.905 / 0.547.
FEEDBACK_RANKED = True
#: Feedback words whose rarity is looked up (the most shared ones first; one count each).
FEEDBACK_CANDIDATES = 12
#: Whether the broad query carries the feedback words too. Measured on the first 400 SciFact *train*
#: claims, merged full-text rows: without them recall@100 0.907, with 5 words 0.910, with 3 words
#: 0.911, nDCG@10 0.560 in all three (the broad row alone ranks a little worse with them: each weighs
#: as much as a word of the question, so only FEEDBACK_TERMS of them are added).
FEEDBACK_IN_BROAD = True
#: A feedback word must occur in at least this many of the feedback documents...
FEEDBACK_MIN_DOCS = 3
#: ...and in at most this share of the corpus (a word most documents have adds nothing).
FEEDBACK_MAX_SHARE = 0.2
#: Documents whose text is read to find abbreviations (bounded: the look-up stays fast).
ABBREVIATION_DOCS = 40
MAX_CONCEPTS = 8

# British <-> American spelling rules as (pattern, replacement), both directions listed; a variant
# is kept only if the corpus uses it.
_SPELLINGS = [
    (r"our(s?)$", r"or\1"), (r"or(s?)$", r"our\1"),
    (r"is(e|es|ed|ing|ation|ations)$", r"iz\1"), (r"iz(e|es|ed|ing|ation|ations)$", r"is\1"),
    (r"ys(e|es|ed|ing)$", r"yz\1"), (r"yz(e|es|ed|ing)$", r"ys\1"),
    (r"tre(s?)$", r"ter\1"), (r"ter(s?)$", r"tre\1"),
    (r"ogue(s?)$", r"og\1"),
]
#: "ae"/"oe" against a plain "e" is ambiguous in general (edema -> oedema, but not every e): only
#: the common medical stems.
_DIGRAPHS = [("haem", "hem"), ("oedem", "edem"), ("oesoph", "esoph"), ("anaem", "anem"),
             ("oestrog", "estrog"), ("paediatr", "pediatr"), ("glycaem", "glycem"), ("foet", "fet"),
             ("orthopaed", "orthoped"), ("leukaem", "leukem"), ("ischaem", "ischem"), ("diarrhoe", "diarrhe"),
             ("aetiolog", "etiolog"), ("caesar", "cesar"), ("faec", "fec"), ("haemat", "hemat")]
_ABBREVIATION = re.compile(r"^[A-Z][A-Za-z0-9\-]*[A-Z0-9][A-Za-z0-9\-]*$|^[A-Z]{2,}s?$")
_LONG_FORM_WORD = re.compile(r"[A-Za-z][A-Za-z\-]*")


@dataclass
class Concept:
    """One concept of the question: its words, its variants (tsquery operands) and why each is there."""

    label: str
    variants: list[str]
    notes: list[str] = field(default_factory=list)
    matches: int | None = None
    #: Concepts of one group stood next to each other in the question ("warm humid weather").
    group: int = 0

    @property
    def block(self) -> str:
        """The concept as a tsquery block: its variants joined by OR."""
        if len(self.variants) == 1:
            return self.variants[0]
        return "(" + " | ".join(self.variants) + ")"

    def describe(self) -> str:
        extra = [v for v in self.variants[1:]]
        text = f"'{self.label}'"
        if extra:
            text += " or " + ", ".join(f"'{v.replace(' <-> ', ' ')}'" for v in extra)
        if self.matches is not None:
            text += f" ({self.matches:,} documents)"
        if self.notes:
            text += ": " + "; ".join(self.notes)
        return text


@dataclass
class Strategy:
    """The concepts of one question and its three queries with their notes."""

    concepts: list[Concept]
    queries: list[str]
    notes: list[str]
    feedback: list[str] = field(default_factory=list)


#: One count may take this long before the planner's estimate stands in for it (a frequent term of a
#: large database: its exact count only tells "frequent", which the estimate tells as well).
COUNT_BUDGET_MS = 25
#: Up to this many documents every count is exact, whatever the machine's load (a few ms each
#: here): the strategy of a question is then the same on every run, window and CLI alike. The
#: budget above is for larger collections, where an exact count of a frequent term costs more.
EXACT_COUNTS_UP_TO = 100_000
class CorpusLookups:
    """Counts, stems and texts from the literature database, cached; every look-up may fail (then the
    strategy is written with less knowledge, never not at all)."""

    def __init__(self, database: Any) -> None:
        self.database = database
        self._counts: dict[str, int | None] = {}
        self._sql = callable(getattr(database, "run", None))

    def count(self, query: str) -> int | None:
        """Matches of ``query``: exact within :data:`COUNT_BUDGET_MS`, else the planner's estimate."""
        if self.database is None or not query:
            return None
        if query not in self._counts:
            try:
                total = self.total()
                if total is not None and total <= EXACT_COUNTS_UP_TO:
                    self._counts[query] = int(self.database.count_matches(query))
                    return self._counts[query]
                try:
                    self._counts[query] = int(self.database.count_matches(query, timeout_ms=COUNT_BUDGET_MS))
                except TypeError:  # a database object without the time budget
                    self._counts[query] = int(self.database.count_matches(query))
            except Exception:  # noqa: BLE001 - an unknown count leaves the concept as it is
                self._counts[query] = None
        return self._counts[query]

    def total(self) -> int | None:
        return collection_size(self.database)

    def texts(self, query: str, limit: int, *, ranked: bool = True) -> list[str]:
        """Titles and abstracts of ``limit`` matches of ``query``: the best ones (ranked by term rarity)
        or, unranked, the first the index gives (enough to read how the corpus writes a term, and
        cheap: no ranking of every match)."""
        if not self._sql:
            return []
        fetch = ("SELECT coalesce(title, '') || ' ' || coalesce(abstract, '') FROM document "
                 "WHERE id = ANY(%s)")
        try:
            if ranked:
                ids = [i for i, _ in self.database.find_abstract_ids_ranked(query, limit, ranking="idf")]
                if not ids:
                    return []
                rows = self.database.run(lambda c: c.execute(fetch, (ids,)).fetchall())
            else:
                rows = self.database.run(lambda c: c.execute(
                    "SELECT coalesce(title, '') || ' ' || coalesce(abstract, '') FROM document "
                    "WHERE search_vector @@ to_tsquery('english', %s) AND withdrawn_date IS NULL LIMIT %s",
                    (query, limit)).fetchall())
        except Exception:  # noqa: BLE001 - no texts: no feedback
            return []
        return [str(r[0])[:20000] for r in rows]

    def stems(self, words: list[str]) -> dict[str, str]:
        """Each word's lexemes as the database's ``english`` configuration stems it ('' for a stop word)."""
        if not self._sql or not words:
            return {}
        try:
            rows = self.database.run(lambda c: c.execute(
                "SELECT w, plainto_tsquery('english', w)::text FROM unnest(%s::text[]) AS w",
                (words,)).fetchall())
        except Exception:  # noqa: BLE001
            return {}
        return {str(w): " ".join(re.findall(r"'((?:[^']|'')*)'", str(q or ""))) for w, q in rows}


def _initials(label: str) -> str:
    return "".join(w[0] for w in label.replace("-", " ").split() if w).upper()


def spelling_variants(word: str) -> list[str]:
    """British/American alternatives of ``word`` by the usual rules (both directions)."""
    lower = word.lower()
    out: list[str] = []
    for pattern, repl in _SPELLINGS:
        candidate = re.sub(pattern, repl, lower)
        if candidate != lower and candidate not in out:
            out.append(candidate)
    for british, american in _DIGRAPHS:
        for old, new in ((british, american), (american, british)):
            if old in lower and not (old == american and british in lower):
                candidate = lower.replace(old, new)
                if candidate != lower and candidate not in out:
                    out.append(candidate)
    return out


class ConceptFinder:
    """Finds the concepts of a question and their variants in one corpus (see the module docstring)."""

    def __init__(self, lookups: CorpusLookups,
                 encoder: Callable[[list[str]], Any] | None = None) -> None:
        self.lookups = lookups
        #: ``encoder(texts) -> unit-length rows`` of the embedding model (None: no neighbours).
        self.encoder = encoder
        #: The feedback documents' texts of the last :meth:`feedback_terms` (read for neighbours).
        self.feedback_texts: list[str] = []
        #: Why no neighbours were found ('' when they were looked for): added to each query's note.
        self.neighbour_note = ""

    # --- concepts ------------------------------------------------------------------------------
    def concepts(self, runs: list[list[str]]) -> list[Concept]:
        """``runs``: the question's content words as runs of adjacent words (stop words split runs)."""
        out: list[Concept] = []
        for group, run in enumerate(runs):
            i = 0
            while i < len(run):
                taken = 1
                for size in (3, 2):
                    if i + size <= len(run) and self._is_phrase(run[i:i + size]):
                        taken = size
                        break
                words = run[i:i + taken]
                label = " ".join(words)
                operand = " <-> ".join(term_operand(w) for w in words)
                notes = ["used as one phrase in the corpus"] if taken > 1 else []
                out.append(Concept(label, [operand], notes, group=group))
                i += taken
        return out[:MAX_CONCEPTS]

    def _is_phrase(self, words: list[str]) -> bool:
        if any("-" in w or " " in w for w in words) or self.lookups.database is None:
            return False
        phrase = self.lookups.count(" <-> ".join(term_operand(w) for w in words))
        singles = [self.lookups.count(term_operand(w)) for w in words]
        if phrase is None or any(s is None for s in singles):
            return False
        rarest = min(s for s in singles if s is not None)
        total = self.lookups.total() or 0
        expected = 1.0
        for single in singles:
            expected *= (single or 0) / total if total else 0.0
        # Chance co-occurrence of three words is so small that any phrase beats it: the lift rule is
        # for pairs only.
        lift = bool(total) and len(words) == 2 and phrase >= PHRASE_LIFT * expected * total
        return phrase >= PHRASE_MIN and (phrase >= PHRASE_SHARE * rarest or lift)

    # --- variants ------------------------------------------------------------------------------
    def add_variants(self, concepts: list[Concept]) -> None:
        for concept in concepts:
            self._abbreviation(concept)
            self._spellings(concept)
            concept.matches = self.lookups.count(concept.block)

    def _abbreviation(self, concept: Concept) -> None:
        words = concept.label.split()
        lookups = self.lookups
        if len(words) >= 2:
            short = _initials(concept.label)
            texts = lookups.texts(concept.variants[0], ABBREVIATION_DOCS, ranked=False)
            label = re.escape(concept.label).replace(r"\ ", r"[\s\-]+")
            defined = re.compile(f"(?i:{label})" + r"\s*\(\s*([A-Z][A-Za-z0-9]{1,9})\s*\)")
            found = Counter(m.group(1) for t in texts for m in defined.finditer(t[:20000]))
            candidates = [a for a, _ in found.most_common(2)] or ([short] if len(short) >= 2 else [])
            for abbreviation in candidates:
                if abbreviation.upper() != short and not found:
                    continue
                self._accept_abbreviation(concept, abbreviation, concept.variants[0],
                                          "an abbreviation the corpus defines" if found else
                                          "its initials, used with it in the corpus")
        elif _ABBREVIATION.match(words[0]) and len(words[0]) <= 8:
            abbreviation = words[0]
            texts = lookups.texts(term_operand(abbreviation), ABBREVIATION_DOCS, ranked=False)
            before = re.compile(r"((?:[A-Za-z][A-Za-z\-]*\s+){1,5})\(\s*" + re.escape(abbreviation)
                                + r"\s*\)")
            forms: Counter[str] = Counter()
            letters = abbreviation.rstrip("s").upper()
            for text in texts:
                for match in before.finditer(text[:20000]):
                    tokens = _LONG_FORM_WORD.findall(match.group(1))
                    tail = tokens[-len(letters):] if len(tokens) >= len(letters) else []
                    if tail and _initials(" ".join(tail)) == letters:
                        forms[" ".join(t.lower() for t in tail)] += 1
            if forms:
                long_form = forms.most_common(1)[0][0]
                operand = " <-> ".join(term_operand(w) for w in long_form.split())
                if lookups.count(operand):
                    concept.variants.append(operand)
                    concept.notes.append(f"'{abbreviation}' is defined as '{long_form}' in the corpus")

    def _accept_abbreviation(self, concept: Concept, abbreviation: str, long_operand: str, why: str) -> None:
        lookups = self.lookups
        alone = lookups.count(abbreviation)
        together = lookups.count(f"{abbreviation} & {long_operand}")
        if not alone or together is None or together < ABBREVIATION_SHARE * alone:
            return
        if abbreviation not in concept.variants:
            concept.variants.append(abbreviation)
            concept.notes.append(f"'{abbreviation}': {why}")

    def _spellings(self, concept: Concept) -> None:
        if " " in concept.label:
            return
        for candidate in spelling_variants(concept.label):
            if self.lookups.count(term_operand(candidate)):
                concept.variants.append(term_operand(candidate))
                concept.notes.append(f"'{candidate}': another spelling the corpus uses")
                break

    # --- feedback ----------------------------------------------------------------------------------
    def feedback_terms(self, first_pass: str, exclude: set[str]) -> list[str]:
        """Words the best documents of the ranked ``first_pass`` share (RM3-like; see the module
        docstring). The first pass is a query of the concepts (not every word OR-ed): its best documents
        are more on the subject, and ranking its fewer matches stays cheap on a large database."""
        lookups = self.lookups
        total = lookups.total()
        if not total or not first_pass:
            return []
        texts = lookups.texts(first_pass, FEEDBACK_DOCS, ranked=FEEDBACK_RANKED)
        self.feedback_texts = texts
        if len(texts) < FEEDBACK_MIN_DOCS:
            return []
        per_doc: Counter[str] = Counter()
        surface: dict[str, Counter[str]] = {}
        for text in texts:
            words = {w for w in re.findall(r"[A-Za-z][A-Za-z0-9\-]{2,}", text) if len(w) <= 30}
            for w in sorted(words):  # sorted: ties below keep one order from run to run (not the hash's)
                per_doc[w.lower()] += 1
        candidates = [w for w, n in per_doc.most_common(200) if n >= FEEDBACK_MIN_DOCS]
        stems = lookups.stems(candidates)
        by_stem: Counter[str] = Counter()
        for word in candidates:
            stem = stems.get(word, "")
            if not stem or " " in stem or stem in exclude or word in FEEDBACK_STOP:
                continue
            by_stem[stem] = max(by_stem[stem], per_doc[word])
            surface.setdefault(stem, Counter())[word] += per_doc[word]
        scored: list[tuple[float, str]] = []
        for stem, docs in by_stem.most_common(FEEDBACK_CANDIDATES):
            word = surface[stem].most_common(1)[0][0]
            df = lookups.count(term_operand(word))
            if not df or df > FEEDBACK_MAX_SHARE * total:
                continue
            scored.append(((docs / len(texts)) * math.log(1 + total / df), word))
        scored.sort(reverse=True)
        return [w for _, w in scored[:FEEDBACK_TERMS]]

    # --- neighbours in the embedding model's space ----------------------------------------------------
    def add_neighbours(self, concepts: list[Concept], exclude: set[str]) -> bool:
        """Add to each concept the words and two-word phrases of the feedback documents that lie near it
        in the embedding model's space (see :data:`NEIGHBOUR_SIMILARITY`); True when any was added.

        Why the feedback documents: another name of a concept is used by the documents about the
        question's subject, so reading the best of them finds it in the user's own corpus, and it
        bounds the cost (a few dozen short texts embedded, one count per accepted variant). ``exclude``
        holds the stems of the question's words (a question word is never another's variant)."""
        if self.encoder is None or not self.feedback_texts or not concepts:
            return False
        lookups = self.lookups
        per_doc: Counter[str] = Counter()
        for text in self.feedback_texts:
            seen: set[str] = set()
            for segment in re.split(r"[.,;:()\[\]!?\"]+", text.lower()):
                words = [w for w in re.findall(r"[a-z][a-z0-9\-]{2,29}", segment)]
                for i, word in enumerate(words):
                    if word in FEEDBACK_STOP or word in _STOP_WORDS:
                        continue
                    seen.add(word)
                    if i + 1 < len(words) and words[i + 1] not in FEEDBACK_STOP | _STOP_WORDS:
                        seen.add(f"{word} {words[i + 1]}")
            per_doc.update(sorted(seen))  # sorted: ties keep one order from run to run
        shared = [w for w, n in per_doc.most_common() if n >= NEIGHBOUR_MIN_DOCS]
        candidates = shared[:NEIGHBOUR_CANDIDATES * 2]
        words = sorted({w for c in candidates for w in c.split()} | {w.lower() for c in concepts
                                                                      for w in c.label.split()})
        stems = lookups.stems(words) if lookups.database is not None else {w: w for w in words}
        concept_stems = [{stems.get(w.lower(), w.lower()) for w in c.label.split()} for c in concepts]
        taken = set().union(*concept_stems) | exclude
        kept: list[tuple[str, set[str]]] = []
        for candidate in candidates:
            cstems = {stems.get(w, "") for w in candidate.split()}
            if "" in cstems or cstems <= taken:
                continue  # a stop word, or only words the question has already
            kept.append((candidate, cstems))
            if len(kept) >= NEIGHBOUR_CANDIDATES:
                break
        if not kept:
            return False
        try:
            vectors = self.encoder([c.label for c in concepts] + [k for k, _ in kept])
            import numpy as np  # why: numpy loads on first use, not at start-up

            matrix = np.asarray(vectors, dtype="float32")
        except Exception as exc:  # noqa: BLE001 - no embedding model: the strategy goes on without
            self.neighbour_note = f"no embedding neighbours ({type(exc).__name__})"
            return False
        similarity = matrix[len(concepts):] @ matrix[:len(concepts)].T
        best = similarity.argmax(axis=1)
        added = False
        for index, concept in enumerate(concepts):
            own = concept_stems[index]
            order = sorted(range(len(kept)), key=lambda j: -float(similarity[j, index]))
            count = 0
            for j in order:
                if count >= NEIGHBOUR_PER_CONCEPT or best[j] != index:
                    continue
                candidate, cstems = kept[j]
                score = float(similarity[j, index])
                shares_a_stem = bool(cstems & own)
                if score < (NEIGHBOUR_SIMILARITY_SHARED if shares_a_stem else NEIGHBOUR_SIMILARITY):
                    continue
                if cstems <= own or own <= cstems:
                    continue  # the concept itself, a part of it, or a narrower phrase containing it
                operand = " <-> ".join(term_operand(w) for w in candidate.split())
                if operand in concept.variants:
                    continue
                matches = lookups.count(operand)
                if not matches or (concept.matches and matches > NEIGHBOUR_WIDER * concept.matches
                                   and matches > FEEDBACK_MIN_DOCS):
                    continue
                concept.variants.append(operand)
                concept.notes.append(f"'{candidate}': near it in the embedding model's space ({score:.2f})")
                concept.matches = lookups.count(concept.block)
                count += 1
                added = True
        return added


#: Function words (the database drops them too; here they only split two-word phrases).
_STOP_WORDS = frozenset(
    """
    a an the of in on at to for by as is are was were be been being it its this that these those and or
    but nor not no so than then there their them they we our you your he she his her which who whom whose
    what when where why how all any both each few more most other some such own same very can will just
    do does did doing has have having had from with into onto over under about against among through via
    per vs versus after before during while whereas because if also may might must shall should would
    could
    """.split()
)


#: Words that abstracts share whatever their subject (feedback would otherwise pick them).
FEEDBACK_STOP = frozenset(
    """
    the and with from that this were was are been have has had which their these those than also into
    between after before during among within without study studies studied patients patient results
    result method methods conclusion conclusions background objective objectives aim aims data analysis
    using used use group groups compared control controls significant significantly increased decreased
    higher lower levels level effect effects associated observed found showed show shows present
    presented report reported case cases review however although both each other more most less such
    only may can could not but all one two three four five six first second new total years year age
    months weeks days included including based well high low number found suggest suggests suggested
    evidence role potential important clinical activity changes change different similar normal might
    key whether thus therefore furthermore moreover
    """.split()
)


def term_operand(word: str) -> str:
    """A word as a tsquery operand (only characters ``to_tsquery`` accepts inside a term); a word with
    its qualifier ("vitamin D") becomes a phrase."""
    parts = [re.sub(r"[^\w\-]", "", p).strip("-_") for p in word.split()]
    return " <-> ".join(p for p in parts if p)


def write_strategy(concepts: list[Concept], lookups: CorpusLookups,
                   feedback_for: Callable[[str], list[str]] | None,
                   broad_words: list[str], flood_limit: int | None) -> Strategy:
    """The three queries from the concept blocks (see the module docstring), with their notes."""
    notes: list[str] = []
    queries: list[str] = []
    known = lookups.database is not None and lookups.total() not in (None, 0)
    # A concept the corpus does not have (a typo, another spelling, a term of another field) would
    # empty every AND: it stays in the broad query only, and the note says so.
    absent = [c for c in concepts if known and c.matches == 0]
    blocks = [c for c in concepts if c.variants and c not in absent] or [c for c in concepts if c.variants]
    if not blocks:
        return Strategy(concepts, [], [])

    # 1. precise: every block; while it matches too little, leave out the least specific block (the
    # one most documents have) whose absence lets it reach PRECISE_MIN; when no single absence does,
    # the block whose absence widens it most, never the rarest (the subject).
    chosen = list(blocks)
    dropped: list[Concept] = []

    def count(group: list[Concept]) -> int:
        return lookups.count(" & ".join(c.block for c in group)) or 0

    if known:
        while len(chosen) > 2 and count(chosen) < PRECISE_MIN:
            without = [count([c for c in chosen if c is not out]) for out in chosen]
            reach = [i for i, n in enumerate(without) if n >= PRECISE_MIN]
            if reach:
                index = max(reach, key=lambda i: (chosen[i].matches or 0, i))
            else:  # the absence that widens most, but never the rarest concept's (the subject's)
                rarest = min(range(len(chosen)), key=lambda i: (chosen[i].matches or 0, i))
                others = [i for i in range(len(chosen)) if i != rarest]
                index = max(others, key=lambda i: (without[i], chosen[i].matches or 0, i))
            dropped.append(chosen.pop(index))
        if len(chosen) == 2 and not count(chosen) and len(blocks) > 2:
            pairs = [(count([a, b]), -i, -j, a, b) for (i, a), (j, b) in combinations(enumerate(blocks), 2)]
            best = max(pairs, key=lambda t: t[:3])
            if best[0] > 0:
                chosen = [best[3], best[4]]
                dropped = [c for c in blocks if c not in chosen]
    while len(" & ".join(c.block for c in chosen)) > MAX_QUERY_CHARS and len(chosen) > 2:
        dropped.append(chosen.pop(max(range(len(chosen)), key=lambda i: chosen[i].matches or 0)))
    precise = " & ".join(c.block for c in chosen)
    queries.append(precise)
    note = "precise: " + " AND ".join(c.describe() for c in chosen)
    if dropped:
        note += (" · left out " + ", ".join(f"'{c.label}'" for c in dropped)
                 + f" (with it fewer than {PRECISE_MIN} documents matched)")
    if absent and len(blocks) < len(concepts):
        note += " · no document has " + ", ".join(f"'{c.label}'" for c in absent)
    notes.append(note)

    def feedback_from(*candidates: str) -> list[str]:
        if feedback_for is None:
            return []
        for candidate in candidates:
            if candidate and (lookups.count(candidate) or 0) >= FEEDBACK_MIN_DOCS:
                return feedback_for(candidate)
        return feedback_for(" | ".join(v for c in blocks for v in c.variants))

    # 2. medium: any k of the n blocks, the largest k that clearly widens the precise query (for two
    # blocks: both, or the rarer one with words of the best-matching documents).
    medium = ""
    if len(blocks) >= 3:
        floor = max(PRECISE_MIN, MEDIUM_WIDER * count(chosen)) if known else 0
        # Every k-of-n group repeats the blocks: a long question keeps its MEDIUM_CONCEPTS most
        # specific concepts here, so the query stays below the cleaner's length limit; a first group
        # the cleaner would refuse is passed over, and where none fits, the most common concept kept
        # goes too (five blocks of four variants made a 1,267-character query, and the row was lost)
        ranked = sorted(blocks, key=lambda c: c.matches if c.matches is not None else -len(c.label))
        kept = [c for c in blocks if c in ranked[:MEDIUM_CONCEPTS]]
        size = 0
        while len(kept) >= 3 and not medium:
            for k in range(len(kept) - 1, 1, -1):
                groups = [" & ".join(c.block for c in group) for group in combinations(kept, k)]
                candidate = " | ".join(f"({g})" for g in groups)
                if len(candidate) > MAX_QUERY_CHARS and medium:
                    break
                if len(candidate) > CLEANER_MAX_CHARS:
                    continue
                medium, size = candidate, k
                if not known or (lookups.count(candidate) or 0) >= floor:
                    break
            if not medium:
                kept.remove(max(kept, key=ranked.index))
        if medium:
            notes.append(f"medium: any {size} of the {len(kept)} " + (
                "concepts" if len(kept) == len(blocks) else "most specific concepts"))
        else:
            medium = precise
            notes.append("medium: the precise query (any fewer of the concepts made too long a query)")
    feedback = (feedback_from(medium) if medium else feedback_from(precise)) if FEEDBACK_RANKED else (
        feedback_from(precise, medium))
    if len(blocks) == 2 and feedback:
        rare, common = sorted(blocks, key=lambda c: (c.matches if c.matches is not None else 0))
        words = " | ".join(term_operand(w) for w in feedback[:3])
        medium = f"({rare.block} & {common.block}) | ({rare.block} & ({words}))"
        if len(medium) > CLEANER_MAX_CHARS:  # the same query with the rare block written once
            medium = f"{rare.block} & ({common.block} | {words})"
        notes.append(f"medium: both concepts, or '{rare.label}' with words of the best-matching documents "
                     f"({', '.join(feedback[:3])})")
    elif len(blocks) < 3:
        medium = " | ".join(c.block for c in blocks)
        notes.append("medium: any of the concepts")
    queries.append(medium)

    # 3. broad: every word and variant, and the feedback words, OR-ed; ranked by rarity.
    operands = list(dict.fromkeys([*broad_words,
                                   *(v for c in blocks for v in c.variants[1:]),
                                   *(term_operand(w) for w in (feedback if FEEDBACK_IN_BROAD else []))]))
    left_out: list[str] = []
    if flood_limit is not None:
        while len(operands) > 2 and (lookups.count(" | ".join(operands)) or 0) > flood_limit:
            counts = [lookups.count(o) or 0 for o in operands]
            left_out.append(operands.pop(max(range(len(operands)), key=lambda i: (counts[i], i))))
    while len(" | ".join(operands)) > MAX_QUERY_CHARS and len(operands) > 2:
        operands.pop()  # the feedback words go first, then the question's last words
    queries.append(" | ".join(operands))
    note = "broad: any word of the question or a variant"
    if feedback and FEEDBACK_IN_BROAD:
        note += f", and words the best-matching documents share ({', '.join(feedback)})"
    if left_out:
        note += " · left out " + ", ".join(f"'{o}'" for o in left_out) + " (most of the corpus has them)"
    notes.append(note + "; ranked by how rare each word is")
    return Strategy(concepts, queries, notes, feedback)
