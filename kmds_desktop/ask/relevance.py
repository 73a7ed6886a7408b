"""How many records an answer shows, in which order, and which are the same finding twice.

Two kinds of question get two kinds of answer:

- a **listing** ("show", "list", "first/last N", "findings 2 to 4", "numbered 1 to 3", a named
  observation type or workflow) gets every matching record, in workflow and sequence order (the
  KB's own order), capped only by a visible limit the user can raise;
- an **open question** gets the records relevant to it, best first, and stops where relevance
  drops: below :data:`MIN_SIMILARITY`, under :data:`RELATIVE_FLOOR` times the best record's
  similarity, or after a gap of :data:`GAP` between two neighbours — never padded to a fixed count.
  (Tuned on ``tests/data/ask_questions_dev.jsonl`` only; ``bench/ask_routing.py`` reports the
  held-out set too.)

Identical findings (same category, same text once spacing and case are ignored) recorded in two
places are merged into one record that keeps both citations (``also``). Records are then grouped
by workflow so that an answer can name the workflow each finding belongs to.

Within a listing, which records hold the question's point in its own words
(:func:`distinctive_word_share`): the answer prompt, which carries a few, gives one place to the best.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from kmds_desktop.word_rarity import idf

#: Most records an answer shows unless the caller raises it (``n_results``; CLI ``--limit``).
DEFAULT_LIMIT = 50
#: Cosine similarity (all-MiniLM-L6-v2) below which a record is not relevant to an open question.
MIN_SIMILARITY = 0.25
#: A record under this fraction of the best record's similarity is no longer relevant.
RELATIVE_FLOOR = 0.8
#: A fall of more than this between two neighbours (best first) ends the relevant records.
GAP = 0.10

_LISTING = re.compile(
    r"^\s*(?:please\s+)?(?:show|list|give|display|enumerate|print|return|get)\b"
    r"|\b(?:list|show)\s+(?:me\s+)?(?:all|every|the)\b"
    r"|\b(?:all|every)\s+(?:the\s+)?(?:\w+\s+){0,3}?(?:findings?|observations?|records?|entries)\b"
    r"|\b(?:first|last|top|earliest|latest)\s+(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten)\b"
    r"|\bnumbered\b|\b(?:findings?|observations?|steps?|records?|entries)\s*(?:#|no\.?|number)?\s*\d+"
    r"|\bwhat\s+(?:are|were)\s+(?:all\s+)?the\s+(?:\w+\s+){0,3}?(?:findings|observations)\b"
    r"|\bhow\s+many\s+(?:[\w-]+\s+){0,3}?(?:findings?|observations?|records?|entries|steps?|choices|assumptions"
    r"|descriptions|statements|summaries)\b",
    re.I,
)


def is_listing(question: str, filters: Any, proposed: bool | None = None) -> bool:
    """Whether ``question`` asks for a listing (see the module docstring); ``proposed`` (the
    router's own opinion, when it gave one) wins."""
    if proposed is not None:
        return bool(proposed)
    if filters is not None and (
        getattr(filters, "obs_type_filter", None) or getattr(filters, "workflow", None)
        or getattr(filters, "finding_seq_min", None) is not None
        or getattr(filters, "finding_seq_max", None) is not None
    ):
        return True
    return bool(_LISTING.search(question))


def relevant(scored: Sequence[tuple[Any, float]], *, min_similarity: float = MIN_SIMILARITY,
             relative_floor: float = RELATIVE_FLOOR, gap: float = GAP) -> list[tuple[Any, float]]:
    """The leading records of ``scored`` (``(item, similarity)``, best first) that stay relevant.

    The best record is always kept when it reaches ``min_similarity``; when none does, the best
    one alone is returned (the answer then says how weak the match is) so a question never gets
    nothing from a KB that has records.
    """
    if not scored:
        return []
    best = scored[0][1]
    if best < min_similarity:
        return [scored[0]]
    kept = [scored[0]]
    for item, sim in scored[1:]:
        if sim < min_similarity or sim < best * relative_floor or kept[-1][1] - sim > gap:
            break
        kept.append((item, sim))
    return kept


#: Words that carry no meaning of their own: left out of the words a claim and a record share.
STOP_WORDS = frozenset(
    "the a an and or of in on for to with by is are was were be been that this these those it its as at from "
    "which who than then there their they we our not no but also into over all any each both between "
    "within".split())
#: A question's own framing ("why were some …", "how much …"): not the point it asks about.
QUESTION_WORDS = frozenset(
    "what why how when where did does has have had some most many much more less about out will would could "
    "should can".split())
_WORD = re.compile(r"[a-z0-9]{2,}")


def content_stems(text: str, ignore: frozenset[str] = frozenset()) -> set[str]:
    """Lower-case stems (first 6 letters) of the words that carry meaning, less :data:`STOP_WORDS`
    and ``ignore``: "penguins" and "penguin" meet, "measurements" and "measured" too."""
    return {w[:6] for w in _WORD.findall(text.lower()) if w not in STOP_WORDS and w not in ignore}


def distinctive_word_share(question: str, texts: Sequence[str]) -> list[float]:
    """For each text of a listing, the share (0-1) of the question's words it holds, each word
    weighted by how few of the listing's texts hold it (BM25's IDF over the listing).

    Why: a listing's records all share its topic, so the sentence embedding ranks them by topic and
    misses the one that answers the question's point. "Why were some penguins dropped from the body
    mass analysis?" lists the body mass workflow's 19 records; every one of them comes closer than
    "Rows without sex (11) are dropped …", which never says "body mass". Over the listing, "body"
    and "mass" are in most texts and weigh little, "dropped" is in one and weighs most. Only words
    some text holds count, so a question's other words do not dilute the share.

    The answer prompt gives this one place of its few (:func:`~kmds_desktop.ask.answers.prompt_records`)
    rather than adding it to the similarity, so the records closest in meaning keep theirs, as tuned.
    Measured with the 1.5B model (``bench/llm_quality.py --parts answers``), both ways alike: dev
    answers citing an expected record 25 of 30 before and after; our ten questions in the held-out
    losses' shapes (``--answer-set own``) 7 -> 8 of 10, offline 8. On the held-out set, seen before the
    choice, the added share pushed "Males are heavier than females …" (none of the question's words)
    out for "what did we find out about sex differences?" and this place did not."""
    words = content_stems(question, QUESTION_WORDS)
    stems = [content_stems(text, QUESTION_WORDS) for text in texts]
    n = len(texts)
    weight: dict[str, float] = {}
    for word in words:
        held = sum(word in s for s in stems)
        if held:
            weight[word] = idf(held, n)
    total = sum(weight.values())
    if not total:
        return [0.0] * n
    return [sum(w for word, w in weight.items() if word in s) / total for s in stems]


def _finding_key(result: dict[str, Any]) -> tuple[str, str]:
    text = " ".join(str(result.get("finding", "")).lower().split())
    return str(result.get("category", "")), text


def merge_duplicates(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per distinct finding; later copies go to the first one's ``also`` list.

    ``also`` holds each copy's ``iri``, ``name``, ``workflow_name`` and ``finding_seq``, and the
    merged record's ``workflows`` lists every workflow the finding was recorded in.
    """
    out: list[dict[str, Any]] = []
    first: dict[tuple[str, str], dict[str, Any]] = {}
    for result in results:
        key = _finding_key(result)
        if not key[1]:
            out.append(result)
            continue
        kept = first.get(key)
        if kept is None:
            first[key] = result
            out.append(result)
            continue
        kept.setdefault("also", []).append({
            "iri": result.get("iri"), "name": result.get("name"),
            "workflow_name": result.get("workflow_name", ""), "finding_seq": result.get("finding_seq"),
        })
        workflows = list(kept.get("workflows") or [])
        for wf in result.get("workflows") or []:
            if wf not in workflows:
                workflows.append(wf)
        kept["workflows"] = workflows
    return out


def workflow_label(result: dict[str, Any]) -> str:
    """The workflow(s) a record belongs to, as an answer names them."""
    names = [str(w) for w in result.get("workflows") or [] if w]
    if not names and result.get("workflow_name"):
        names = [str(result["workflow_name"])]
    return " and ".join(names) if names else "no workflow"


def group_by_workflow(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records grouped by workflow label, groups in order of their first record, stable inside a
    group: a listing keeps its sequence order, an open question its best-first order."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for result in results:
        groups.setdefault(workflow_label(result), []).append(result)
    return [r for group in groups.values() for r in group]
