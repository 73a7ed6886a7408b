"""Verdicts from full texts: does each paper support a claim, contradict it or not address it; which
option of a multiple-choice question the papers bear out; yes / no / maybe for a yes-no question.

Every verdict rests on a quote, and every quote goes through the one verifier
(:func:`~kmds_desktop.literature.evidence.quotes.locate_quote`): a quote that is not verbatim on
its page is dropped and counted, and a document left without a verified quote is "not addressed".
"Cannot tell" (and "insufficient" for a choice) is an answer: the balance of weak or missing
evidence is reported, never turned into a guess.

Two ways to judge one document, the same shape out of both:

- **offline** (no model): the document's sentence closest in meaning to the claim (cosine with the
  shipped model, nudged by shared rare words) addresses it when the cosine reaches
  :data:`ADDRESS_SIMILARITY`; it contradicts the claim when its polarity differs (a negation or
  "no effect" cue on one side only, or opposite directions: increases vs decreases), and supports it
  otherwise. Crude, and measured as such (``bench/evidence_verdicts.py`` on SciFact's labelled
  claim-abstract pairs); its worth is that it is fast, explainable and never invents a quote.
- **with a model**: a short prompt per passage asks for SUPPORTS / CONTRADICTS / NOT_ADDRESSED and a
  verbatim quote; the quote is verified like any other, and a stance whose quote fails is dropped
  (counted in the notes), because an unverifiable stance is an uncited claim.

A multiple-choice question is answered offline by scoring each option against the question's best
passages (the option's own words and numbers found in a sentence that is about the question) and
choosing only above a margin. With a model, the model reads the best sentences of those passages,
numbered, and names one sentence and the option (its text, not a letter); the app quotes that sentence
and checks that it bears the option out, and where it does not, the answer follows the evidence and the
note says so (:func:`choose_with_model`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kmds_desktop.limits import too_long_reason
from kmds_desktop.literature.evidence.answer import _sentences as quotable_sentences
from kmds_desktop.literature.evidence.quotes import PageText, QuoteCheck, locate_quote

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from kmds_desktop.literature.evidence.search import EvidenceHit
    from kmds_desktop.literature.fulltext.store import FulltextStore

SUPPORTS = "supports"
CONTRADICTS = "contradicts"
NOT_ADDRESSED = "not addressed"
STANCES = (SUPPORTS, CONTRADICTS, NOT_ADDRESSED)

SUPPORTED = "supported"
CONTRADICTED = "contradicted"
MIXED = "mixed"
CANNOT_TELL = "cannot tell"
INSUFFICIENT = "insufficient"

#: A sentence at least this close in meaning to the claim addresses it (offline). Set from the LitQA
#: examples (a claim restating a key passage: 0.85; the same claim against other papers' best
#: sentences: below 0.50; off-topic claims: below 0.20); ``bench/evidence_verdicts.py`` reports the
#: stance accuracy it gives on SciFact's labelled claim-abstract pairs.
ADDRESS_SIMILARITY = 0.55
#: Offline multiple choice: the best option must beat the runner-up by this much, else "insufficient"
#: (tuned on the LitQA dev questions for precision, see the bench).
CHOICE_MARGIN = 0.10
#: Offline: when the closest sentence is not verbatim on its page, only sentences within this much of
#: its score may stand in for it (else the document is "not addressed" and the drop is counted).
VERIFY_SLACK = 0.05
#: Offline multiple choice: only sentences at least this close in meaning to the question count (a
#: "10%" in a methods sentence about formalin is not an answer to a question about PEG fractions).
CHOICE_MIN_SIMILARITY = 0.50
#: Passages read per claim or question.
PASSAGES = 10
#: Yes-no offline: a hedge cue ("may", "unclear") in the deciding sentence answers "maybe".
_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)?%?")
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|neither|nor|without|cannot|can't|didn't|doesn't|don't|isn't|aren't|"
    r"wasn't|weren't|fail(?:s|ed)? to|unable|lack(?:s|ed|ing)?|absence|absent|unchanged|unaffected|"
    r"insignificant|non-?significant|did not differ|no difference|independent of|regardless)\b",
    re.IGNORECASE)
_UP = re.compile(r"\b(?:increas\w*|higher|more|greater|enhanc\w*|promot\w*|elevat\w*|rais\w*|improv\w*|"
                 r"upregulat\w*|up-regulat\w*|activat\w*|induc\w*|gain\w*|accelerat\w*|stimulat\w*)\b",
                 re.IGNORECASE)
_DOWN = re.compile(r"\b(?:decreas\w*|lower|less|fewer|reduc\w*|diminish\w*|inhibit\w*|suppress\w*|"
                   r"downregulat\w*|down-regulat\w*|impair\w*|loss|lost|declin\w*|attenuat\w*|"
                   r"block\w*|prevent\w*|slow\w*)\b", re.IGNORECASE)
_HEDGE = re.compile(r"\b(?:may|might|could|possibl\w*|unclear|uncertain|suggest\w*|further stud\w*|"
                    r"remains? to be|not clear|inconclusive|limited evidence|warrant\w*)\b", re.IGNORECASE)
_STOP = frozenset("""a an and are as at be been by can do does for from had has have in into is it its
of on or that the their them these this those to was were which with what when where who why how
whether than then there also such not no""".split())

EmbedFn = Callable[[Sequence[str]], "np.ndarray"]
LLMFn = Callable[[str], str]


@dataclass(frozen=True)
class Passage:
    """A stretch of one document to judge: its text and the pages it spans (the quote's search range)."""

    text: str
    start_page: int
    end_page: int


@dataclass
class DocumentVerdict:
    """One document's stance on a claim, with the verified quote it rests on (``None`` when not addressed)."""

    label: str
    stance: str
    quote: str | None = None
    pages: tuple[int, ...] = ()
    score: float = 0.0
    doi: str | None = None
    file: str | None = None
    title: str | None = None
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "doi": self.doi, "file": self.file, "title": self.title,
                "stance": self.stance, "quote": self.quote, "pages": list(self.pages),
                "score": round(self.score, 4), "reason": self.reason}


@dataclass
class ClaimVerdict:
    """A claim judged against several documents: each one's stance and the balance."""

    claim: str
    method: str  # "offline" or the model backend's name
    documents: list[DocumentVerdict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dropped_quotes: int = 0

    @property
    def balance(self) -> dict[str, int]:
        counts = {stance: 0 for stance in STANCES}
        for document in self.documents:
            counts[document.stance] += 1
        return counts

    @property
    def verdict(self) -> str:
        """``supported`` / ``contradicted`` when the addressed documents agree, ``mixed`` when they
        do not, ``cannot tell`` when none addresses the claim."""
        counts = self.balance
        if counts[SUPPORTS] and counts[CONTRADICTS]:
            return MIXED
        if counts[SUPPORTS]:
            return SUPPORTED
        if counts[CONTRADICTS]:
            return CONTRADICTED
        return CANNOT_TELL

    @property
    def summary(self) -> str:
        counts = self.balance
        return (f"{self.verdict}: {counts[SUPPORTS]} support, {counts[CONTRADICTS]} contradict, "
                f"{counts[NOT_ADDRESSED]} do not address it")

    def as_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "method": self.method, "verdict": self.verdict,
                "balance": self.balance, "documents": [d.as_dict() for d in self.documents],
                "dropped_quotes": self.dropped_quotes, "notes": self.notes}


@dataclass
class ChoiceVerdict:
    """A multiple-choice question answered from the papers, or ``insufficient``."""

    question: str
    options: list[str]
    method: str
    choice: int | None = None  # index into options
    scores: list[float] = field(default_factory=list)
    quote: str | None = None
    label: str | None = None
    pages: tuple[int, ...] = ()
    notes: list[str] = field(default_factory=list)
    dropped_quotes: int = 0
    #: With a model: the option the model named and the number of the sentence it cited, before the
    #: app checked the pick against that sentence (``choice`` is the answer after the check).
    model_choice: int | None = None
    model_sentence: int | None = None

    @property
    def answer(self) -> str:
        return self.options[self.choice] if self.choice is not None else INSUFFICIENT

    def as_dict(self) -> dict[str, Any]:
        return {"question": self.question, "options": self.options, "method": self.method,
                "answer": self.answer, "choice": self.choice,
                "scores": [round(s, 4) for s in self.scores], "quote": self.quote, "source": self.label,
                "pages": list(self.pages), "dropped_quotes": self.dropped_quotes, "notes": self.notes,
                "model_choice": self.model_choice, "model_sentence": self.model_sentence}


# -- text helpers --------------------------------------------------------------------------------
def sentences(text: str) -> list[str]:
    """Whole sentences of at least five words (shorter ones are captions and fragments), an
    abbreviation's full stop ("Fig.", "et al.") kept inside: the sentences answers quote."""
    return quotable_sentences(text)


def content_words(text: str) -> set[str]:
    """Lower-case words that carry meaning: numbers (``40%``) and words not in the stop list."""
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and (len(w) > 2 or w[0].isdigit())}


def polarity(text: str) -> tuple[bool, int]:
    """``(negated, direction)``: whether a negation / no-effect cue is present, and the sign of the
    up-minus-down direction words (0 when none or balanced)."""
    negated = bool(_NEGATION.search(text))
    direction = len(_UP.findall(text)) - len(_DOWN.findall(text))
    return negated, (direction > 0) - (direction < 0)


def stance_from_polarity(claim: str, sentence: str) -> str:
    """Offline: the sentence contradicts the claim when exactly one of them is negated, or when both
    state a direction and the directions differ; it supports it otherwise."""
    claim_negated, claim_direction = polarity(claim)
    sentence_negated, sentence_direction = polarity(sentence)
    flips = (claim_negated != sentence_negated)
    if claim_direction and sentence_direction and claim_direction != sentence_direction:
        flips = not flips
    return CONTRADICTS if flips else SUPPORTS


def default_embed(texts: Sequence[str]) -> np.ndarray:
    # why: looked up when called, so a replaced function is the one used
    from kmds_desktop.index.embeddings import encode

    return encode(list(texts))


# -- one document --------------------------------------------------------------------------------
def judge_offline(
    claim: str,
    passages: Sequence[Passage],
    page_text: PageText,
    *,
    embed: EmbedFn = default_embed,
    min_similarity: float = ADDRESS_SIMILARITY,
) -> tuple[str, str | None, tuple[int, ...], float, int]:
    """One document's offline stance: ``(stance, quote, pages, similarity, dropped)``.

    The closest sentence (by meaning, nudged by shared rare words) that the verifier finds on its page
    decides; below ``min_similarity`` the document does not address the claim.
    """
    import numpy as np  # why: numpy loads on first use, not at start-up

    candidates = [(p, s) for p in passages for s in sentences(p.text)]
    if not candidates:
        return NOT_ADDRESSED, None, (), 0.0, 0
    vectors = embed([claim] + [s for _, s in candidates])
    similarity = vectors[1:] @ vectors[0]
    words = content_words(claim)
    scores = np.asarray([
        float(similarity[i]) + 0.05 * len(words & content_words(s)) / max(1, len(words))
        for i, (_, s) in enumerate(candidates)])
    dropped = 0
    for index in np.argsort(-scores):
        passage, sentence = candidates[int(index)]
        if float(similarity[int(index)]) < min_similarity or scores[int(index)] < scores.max() - VERIFY_SLACK:
            break  # a much weaker sentence must not decide because the closest one failed the verifier
        check = locate_quote(sentence, page_text, passage.start_page, passage.end_page)
        if not check.verified:
            dropped += 1
            continue
        return (stance_from_polarity(claim, sentence), sentence, check.pages,
                float(similarity[int(index)]), dropped)
    best = float(similarity.max()) if len(similarity) else 0.0
    return NOT_ADDRESSED, None, (), best, dropped


STANCE_PROMPT = """You check a claim against one passage of a scientific paper.
Claim: {claim}

Passage (pages {pages}):
\"\"\"{passage}\"\"\"

Does the passage SUPPORT the claim, CONTRADICT it, or is it NOT_ADDRESSED (the passage does not speak
to the claim)? Answer with JSON only: {{"stance": "SUPPORTS" | "CONTRADICTS" | "NOT_ADDRESSED",
"quote": "the one sentence of the passage, copied exactly, that decides it (empty when NOT_ADDRESSED)"}}"""

_STANCE_WORDS = {"SUPPORTS": SUPPORTS, "SUPPORT": SUPPORTS, "CONTRADICTS": CONTRADICTS,
                 "CONTRADICT": CONTRADICTS, "NOT_ADDRESSED": NOT_ADDRESSED, "NOT ADDRESSED": NOT_ADDRESSED}


#: Opening braces of a reply tried as the start of its JSON object: a verdict is one small object,
#: and garbage before it is a few words, not thousands of braces.
MAX_JSON_STARTS = 64


def parse_json_reply(reply: str) -> dict[str, Any]:
    """The first JSON object in a model's reply (models wrap it in prose or code fences); ``{}`` when
    none. Bounded: a reply over :data:`~kmds_desktop.limits.MAX_REPLY_CHARS` is not read, at most
    :data:`MAX_JSON_STARTS` braces are tried, each decoded once by the JSON decoder (which stops where
    the object ends), and nesting the decoder cannot take is no object (a scan from every brace to
    the reply's end took 23 s for 40,000 braces; deep brackets raised RecursionError)."""
    if not isinstance(reply, str) or too_long_reason(reply) is not None:
        return {}
    decoder = json.JSONDecoder()
    start = reply.find("{")
    for _ in range(MAX_JSON_STARTS):
        if start < 0:
            break
        try:
            value, _end = decoder.raw_decode(reply, start)
        except (ValueError, RecursionError):
            start = reply.find("{", start + 1)
            continue
        return value if isinstance(value, dict) else {}
    return {}


def judge_with_model(
    claim: str, passages: Sequence[Passage], page_text: PageText, llm: LLMFn
) -> tuple[str, str | None, tuple[int, ...], float, int]:
    """One document's stance from the model, passage by passage: the first passage whose stance is
    SUPPORTS or CONTRADICTS with a verified quote decides; unverifiable quotes are dropped and counted."""
    dropped = 0
    stances: list[tuple[str, str, tuple[int, ...]]] = []
    for passage in passages:
        span = f"{passage.start_page}-{passage.end_page}"
        reply = parse_json_reply(llm(STANCE_PROMPT.format(claim=claim, pages=span, passage=passage.text)))
        stance = _STANCE_WORDS.get(str(reply.get("stance", "")).strip().upper(), NOT_ADDRESSED)
        quote = str(reply.get("quote") or "").strip().strip('"\u201c\u201d')
        if stance == NOT_ADDRESSED:
            continue
        check = locate_quote(quote, page_text, passage.start_page, passage.end_page)
        if not check.verified:
            dropped += 1
            continue
        stances.append((stance, quote, check.pages))
    if not stances:
        return NOT_ADDRESSED, None, (), 0.0, dropped
    stance, quote, pages = stances[0]
    return stance, quote, pages, 1.0, dropped


# -- a claim over the store ----------------------------------------------------------------------
#: A paper's best passages read for a claim. Why three: a claim's words rank the passages that share
#: its subject, not its finding, and the finding's passage is often the paper's third: the denial of
#: the PEG-maleimide finding ("... show detectable transfection") ranks the paper's methods first and
#: its result sentence ("showed no detectable levels of transfection") third on the 40 LitQA papers,
#: so with two passages the judge never read the sentence that contradicts it.
PASSAGES_PER_PAPER = 3


def _hit_passages(hits: Sequence[EvidenceHit]) -> dict[int, list[EvidenceHit]]:
    by_paper: dict[int, list[EvidenceHit]] = {}
    for hit in hits:
        by_paper.setdefault(hit.paper_id, []).append(hit)
    return by_paper


def claim_verdict(
    store: FulltextStore,
    claim: str,
    hits: Sequence[EvidenceHit],
    *,
    llm: LLMFn | None = None,
    method: str = "offline",
    embed: EmbedFn = default_embed,
    max_passages_per_paper: int = PASSAGES_PER_PAPER,
) -> ClaimVerdict:
    """Judge ``claim`` against each paper among ``hits`` (the claim's ranked passages)."""
    if not claim or not claim.strip():
        raise ValueError("the claim is empty: type the statement to check against the papers")
    result = ClaimVerdict(claim, method if llm is not None else "offline")
    for paper_id, paper_hits in _hit_passages(hits).items():
        first = paper_hits[0]
        passages = [Passage(h.text, h.start_page, h.end_page) for h in paper_hits[:max_passages_per_paper]]

        def page_text(page: int, paper: int = paper_id) -> str | None:
            return store.page_text(paper, page)

        if llm is None:
            stance, quote, pages, score, dropped = judge_offline(claim, passages, page_text, embed=embed)
        else:
            stance, quote, pages, score, dropped = judge_with_model(claim, passages, page_text, llm)
        result.dropped_quotes += dropped
        result.documents.append(DocumentVerdict(
            first.label, stance, quote, pages, score, first.doi, first.file, first.title,
            "" if quote else "no sentence of its best passages speaks to the claim"))
    order = {SUPPORTS: 0, CONTRADICTS: 0, NOT_ADDRESSED: 1}
    result.documents.sort(key=lambda d: (order[d.stance], -d.score))
    if not result.documents:
        result.notes.append("no passages: import full texts first")
    if result.dropped_quotes:
        result.notes.append(f"{result.dropped_quotes} quote{'s' if result.dropped_quotes != 1 else ''} "
                            "dropped: not found verbatim on the cited page")
    return result


# -- multiple choice -----------------------------------------------------------------------------
#: Sentences the model is shown for a multiple-choice question. Why sentences and not whole passages:
#: five passages are ~1,800 prompt tokens (a minute a question on a quiet 2-core machine) and the 1.5B
#: model quoted their first sentences instead of the deciding one; the best eight sentences are ~460
#: tokens and hold a sentence of the key passage for 16 of the 20 LitQA dev questions that have one
#: (five whole passages: 17 of 19), so the model reads a quarter of the text with the answer still in it.
CHOICE_SENTENCES = 8
#: Sentence ranking for the model: closeness to the question plus this much times the best share of an
#: option's distinctive words the sentence holds (a sentence naming an option is likelier the deciding
#: one). 0.3 set on the LitQA dev questions: 0 -> 12 of 20 key sentences among the eight, 0.3 -> 16.
OPTION_WEIGHT = 0.3


@dataclass(frozen=True)
class ChoiceSentence:
    """A candidate sentence for a multiple-choice question: where it is, how close it is to the
    question, and the share of each option's distinctive words it holds (its support for that option)."""

    hit: EvidenceHit
    text: str
    closeness: float
    support: tuple[float, ...]

    def score(self, option: int) -> float:
        """How well this sentence bears out ``option``: its support scaled by its closeness."""
        return self.closeness * self.support[option]


def _option_words(option: str, others: Sequence[str]) -> set[str]:
    """The option's distinctive words: those the other options do not share (so "Above 40%" is
    scored on "40%", not on "above")."""
    mine = content_words(option)
    shared = set().union(*(content_words(o) for o in others)) if others else set()
    distinct = mine - shared
    return distinct or mine


def choice_sentences(question: str, options: Sequence[str], hits: Sequence[EvidenceHit], *,
                     embed: EmbedFn = default_embed) -> list[ChoiceSentence]:
    """Every quotable sentence of ``hits`` (each once, in the passages' order) with its closeness to
    the question and its support for each option: what both ways of answering a choice read."""
    import numpy as np  # why: numpy loads on first use, not at start-up

    seen: set[str] = set()
    found: list[tuple[EvidenceHit, str]] = []
    for hit in hits:
        for sentence in sentences(hit.text):
            if sentence not in seen:
                seen.add(sentence)
                found.append((hit, sentence))
    if not found:
        return []
    vectors = embed([question] + [s for _, s in found])
    closeness = np.clip(vectors[1:] @ vectors[0], 0.0, 1.0)
    words = [_option_words(o, [x for j, x in enumerate(options) if j != i]) for i, o in enumerate(options)]
    out = []
    for k, (hit, sentence) in enumerate(found):
        have = content_words(sentence)
        support = tuple(len(w & have) / len(w) if w else 0.0 for w in words)
        out.append(ChoiceSentence(hit, sentence, float(closeness[k]), support))
    return out


def _offline_pick(
    candidates: Sequence[ChoiceSentence], n_options: int, margin: float, min_similarity: float
) -> tuple[int | None, list[float], int, str]:
    """``(choice, scores, deciding sentence's index, note)``: each option scored by its best sentence
    that is about the question; a choice only when the best beats the runner-up by ``margin``."""
    scores = [0.0] * n_options
    best = [-1] * n_options
    for k, candidate in enumerate(candidates):
        if candidate.closeness < min_similarity:
            continue
        for i in range(n_options):
            if candidate.score(i) > scores[i]:
                scores[i], best[i] = candidate.score(i), k
    ranked = sorted(range(n_options), key=lambda i: -scores[i])
    top = ranked[0]
    runner_up = scores[ranked[1]] if n_options > 1 else 0.0
    if scores[top] <= 0.0 or scores[top] - runner_up < margin:
        return None, scores, -1, (f"no option stands out (best {scores[top]:.2f}, next {runner_up:.2f}, "
                                  f"margin {margin:.2f}): the passages do not decide it")
    return top, scores, best[top], ""


def choose_offline(
    store: FulltextStore,
    question: str,
    options: Sequence[str],
    hits: Sequence[EvidenceHit],
    *,
    embed: EmbedFn = default_embed,
    margin: float = CHOICE_MARGIN,
    min_similarity: float = CHOICE_MIN_SIMILARITY,
) -> ChoiceVerdict:
    """Score each option by its best sentence among the question's passages: the share of the option's
    distinctive words the sentence holds, times how close the sentence is to the question (cosine; a
    sentence below ``min_similarity`` does not count); choose only when the best beats the runner-up by
    ``margin``."""
    options = _check_options(question, options)
    result = ChoiceVerdict(question, list(options), "offline", scores=[0.0] * len(options))
    candidates = choice_sentences(question, options, hits, embed=embed)
    if not candidates:
        result.notes.append("no passages: import full texts first")
        return result
    choice, result.scores, deciding, note = _offline_pick(candidates, len(options), margin, min_similarity)
    if choice is None:
        result.notes.append(note)
        return result
    sentence = candidates[deciding]
    check = _locate(store, sentence)
    if not check.verified:
        result.dropped_quotes += 1
        result.notes.append("the deciding sentence was not found verbatim on its page: not answered")
        return result
    return _settle(result, choice, sentence, check.pages)


def _settle(result: ChoiceVerdict, choice: int, sentence: ChoiceSentence,
            pages: tuple[int, ...]) -> ChoiceVerdict:
    """``result`` answered with ``choice``, quoting ``sentence`` (verified on ``pages``)."""
    result.choice, result.quote, result.label, result.pages = choice, sentence.text, sentence.hit.label, pages
    return result


def _locate(store: FulltextStore, sentence: ChoiceSentence) -> QuoteCheck:
    return locate_quote(sentence.text, functools.partial(store.page_text, sentence.hit.paper_id),
                        sentence.hit.start_page, sentence.hit.end_page)


CHOICE_PROMPT = """Answer a multiple-choice question from numbered sentences of papers.
Question: {question}

Options:
{options}

Sentences:
{sentences}

Find the sentence that answers the question, then the option it bears out. If no sentence answers
it, answer "insufficient". Answer with JSON only:
{{"sentence": <the sentence's number>, "answer": "<the option, copied exactly, or insufficient>"}}"""

CLOSED_BOOK_PROMPT = """Answer a multiple-choice question.
Question: {question}

Options:
{options}

If you do not know, answer "insufficient".
Answer with JSON only: {{"answer": "<the option, copied exactly, or insufficient>"}}"""


def _bullets(options: Sequence[str]) -> str:
    """The options as a list without letters. Why: asked for a letter, the 1.5B model answered "C"
    for 11 of the 22 LitQA dev questions closed-book (right C: 2) and kept that preference with the
    passages in front of it; asked to copy the option, it has to name what it means."""
    return "\n".join(f"- {option}" for option in options)


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[^\w%.,+-]+", " ", text.lower()).split()).strip(" .,")


def match_option(answer: object, options: Sequence[str]) -> int | None:
    """The option a model's ``answer`` names: the same text (case, spacing and punctuation aside), else
    the one option the answer contains or is contained in, else the one sharing the most distinctive
    words; ``None`` for "insufficient", nothing, or an answer that fits no option or several alike."""
    said = _plain(str(answer or ""))
    if not said or said in {"insufficient", "none", "unknown", "n a"}:
        return None
    plain = [_plain(o) for o in options]
    if said in plain:
        return plain.index(said)
    inside = [i for i, o in enumerate(plain) if o and (f" {o} " in f" {said} " or f" {said} " in f" {o} ")]
    if len(inside) == 1:
        return inside[0]
    have = content_words(said)
    shares = [len(have & _option_words(o, [x for j, x in enumerate(options) if j != i]))
              for i, o in enumerate(options)]
    best = max(shares)
    if best and shares.count(best) == 1:
        return shares.index(best)
    return None


def _sentence_number(reply: dict[str, Any], count: int) -> int | None:
    try:
        number = int(reply.get("sentence", 0))
    except (TypeError, ValueError, OverflowError):  # a list, a word, 5,000 digits, 1e999
        return None
    return number - 1 if 1 <= number <= count else None


def choose_with_model(
    store: FulltextStore,
    question: str,
    options: Sequence[str],
    hits: Sequence[EvidenceHit],
    llm: LLMFn,
    *,
    method: str = "model",
    embed: EmbedFn = default_embed,
    shown: int = CHOICE_SENTENCES,
    margin: float = CHOICE_MARGIN,
    min_similarity: float = CHOICE_MIN_SIMILARITY,
) -> ChoiceVerdict:
    """The model reads the question's best sentences (numbered, each with its paper and page) and
    names one sentence and the option it bears out; the app quotes that sentence (verbatim by
    construction, checked all the same) and then checks the pick against the sentence.

    The check, as the routing guard checks a route: the pick stands when the model's sentence holds
    the option's distinctive words. Where it does not but the sentence holds another option's, or
    the model found nothing while the offline reading of the same sentences decides clearly, the
    answer follows the evidence and a note says so; ``model_choice`` keeps what the model said.
    A pick no sentence bears out is kept only when the offline reading has no answer to set
    against it (the note says the sentence does not name the option).
    """
    options = _check_options(question, options)
    result = ChoiceVerdict(question, list(options), method, scores=[0.0] * len(options))
    candidates = choice_sentences(question, options, hits, embed=embed)
    if not candidates:
        result.notes.append("no passages: import full texts first")
        return result
    offline, result.scores, deciding, _ = _offline_pick(candidates, len(options), margin, min_similarity)
    ranked = sorted(candidates, key=lambda c: -(c.closeness + OPTION_WEIGHT * max(c.support)))
    listed: list[tuple[ChoiceSentence, tuple[int, ...]]] = []
    for candidate in ranked:
        check = _locate(store, candidate)
        if check.verified:  # only sentences that are on their page are shown, so any pick can be quoted
            listed.append((candidate, check.pages))
        else:
            result.dropped_quotes += 1
        if len(listed) == shown:
            break
    numbered = "\n".join(f"[{i + 1}] {c.text} ({c.hit.label}, p. {'-'.join(map(str, pages))})"
                         for i, (c, pages) in enumerate(listed))
    reply = parse_json_reply(llm(CHOICE_PROMPT.format(question=question, options=_bullets(options),
                                                      sentences=numbered)))
    picked = match_option(reply.get("answer"), options)
    number = _sentence_number(reply, len(listed))
    result.model_choice, result.model_sentence = picked, None if number is None else number + 1

    def answer(choice: int, sentence: ChoiceSentence, pages: tuple[int, ...]) -> ChoiceVerdict:
        return _settle(result, choice, sentence, pages)

    if picked is not None and number is not None and listed[number][0].support[picked] > 0:
        return answer(picked, *listed[number])
    if picked is not None:
        # The model's own sentence does not name its option: does it name another one, alone?
        if number is not None:
            sentence, pages = listed[number]
            named = [i for i, share in enumerate(sentence.support) if share > 0]
            if len(named) == 1 and sentence.closeness >= min_similarity:
                result.notes.append(f"the model chose \"{options[picked]}\", but the sentence it cited "
                                    f"names \"{options[named[0]]}\": the answer follows the sentence")
                return answer(named[0], sentence, pages)
        if offline is not None:
            if offline == picked:  # the offline reading's sentence names it: quote that one
                return _follow_offline(store, result, candidates[deciding], offline, "")
            return _follow_offline(store, result, candidates[deciding], offline,
                                   f"the model chose \"{options[picked]}\" without a sentence that names it")
        # Nothing to set against the pick: it stands on the sentence the model cited, or the best one
        # that names the option.
        backing = [(c, p) for c, p in listed if c.support[picked] > 0]
        if number is not None or backing:
            sentence, pages = listed[number] if number is not None else backing[0]
            if sentence.support[picked] == 0:
                result.notes.append("the cited sentence does not name the chosen option")
            return answer(picked, sentence, pages)
    if offline is not None:
        return _follow_offline(store, result, candidates[deciding], offline,
                               "the model found the sentences insufficient")
    result.notes.append("the model found the sentences insufficient" if picked is None else
                        "the model's answer cites no sentence: not answered")
    return result


def _follow_offline(store: FulltextStore, result: ChoiceVerdict, sentence: ChoiceSentence, choice: int,
                    why: str) -> ChoiceVerdict:
    """The answer the offline reading decides clearly, with the model's part named in the notes."""
    check = _locate(store, sentence)
    if not check.verified:
        result.dropped_quotes += 1
        result.notes.append(f"{why or 'the cited sentence does not name the option'}; the offline reading's "
                            "sentence is not verbatim on its page: not answered")
        return result
    if why:
        result.notes.append(f"{why}; the evidence decides \"{result.options[choice]}\"")
    return _settle(result, choice, sentence, check.pages)


def choose_closed_book(question: str, options: Sequence[str], llm: LLMFn, *,
                       method: str = "model") -> ChoiceVerdict:
    """The model alone, no passages: the baseline the evidence must beat (the options shown and
    answered as in :func:`choose_with_model`, so the two differ only by the evidence)."""
    options = _check_options(question, options)
    result = ChoiceVerdict(question, list(options), f"{method} closed-book")
    reply = parse_json_reply(llm(CLOSED_BOOK_PROMPT.format(question=question, options=_bullets(options))))
    result.choice = result.model_choice = match_option(reply.get("answer"), options)
    return result


def _check_options(question: str, options: Sequence[str]) -> list[str]:
    if not question or not question.strip():
        raise ValueError("the question is empty: type the question the options answer")
    cleaned = [o.strip() for o in options if o and o.strip()]
    if len(cleaned) < 2:
        raise ValueError("give at least two options (--option A --option B)")
    if len(set(cleaned)) != len(cleaned):
        raise ValueError("two options are the same; give distinct options")
    return cleaned


# -- yes / no / maybe ----------------------------------------------------------------------------
def yes_no_maybe(verdict: ClaimVerdict) -> str:
    """A yes-no question's answer from its claim verdict: yes when the papers support it, no when they
    contradict it, maybe when they are mixed or hedge, and ``cannot tell`` when none addresses it."""
    label = verdict.verdict
    if label == SUPPORTED:
        hedged = all(d.quote and _HEDGE.search(d.quote) for d in verdict.documents if d.stance == SUPPORTS)
        return "maybe" if hedged else "yes"
    if label == CONTRADICTED:
        return "no"
    if label == MIXED:
        return "maybe"
    return CANNOT_TELL


def yes_no_offline(question: str, text: str, *, embed: EmbedFn = default_embed, top: int = 3) -> str:
    """Yes / no for ``question`` from one text (an abstract): the ``top`` sentences closest to the
    question vote by polarity, and "no" wins only with a majority of them negating or reversing what
    the question asks. Offline it never says "maybe": a hedge cue ("may", "suggest") is in most
    abstracts whatever their answer, and using it lost accuracy on the development split (PubMedQA,
    odd PMIDs; ``bench/evidence_verdicts.py``). Used on PubMedQA, where every question is addressed by
    its abstract."""
    import numpy as np  # why: numpy loads on first use, not at start-up

    found = sentences(text)
    if not found:
        return "yes"
    vectors = embed([question, *found])
    order = np.argsort(-(vectors[1:] @ vectors[0]))[:top]
    flips = sum(stance_from_polarity(question, found[int(i)]) == CONTRADICTS for i in order)
    return "no" if 2 * flips > len(order) else "yes"
