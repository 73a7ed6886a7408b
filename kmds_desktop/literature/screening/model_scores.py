"""Model scores with a reason: an LLM rates a record 1–5 for relevance to the question, in one sentence.

Why (BMLibrarian's document scoring agent): a reviewer deciding thousands of records wants a second
opinion that reads the abstract against the question, and the order can be sorted by it. A score never
decides anything; it is a column beside the decision.

Replies are parsed with bounded size and time, as every reply in the app: a reply longer than
:data:`MAX_SCORE_REPLY_CHARS` is refused before parsing, JSON the decoder refuses (nesting, a broken
object) falls back to one bounded regular expression, and whatever holds no score 1–5 gives a
:class:`ScoreReplyError` whose message is the note shown for that record.

Without an LLM, :func:`similarity_score` turns the embedding model's cosine similarity between record and
question into 1–5 on fixed cut points, labelled as what it is (:data:`EMBEDDING_SCORER`).
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kmds_desktop.limits import too_long_reason

#: A score reply is one small object; anything longer is not read (a hostile or runaway reply).
MAX_SCORE_REPLY_CHARS = 64 * 1024
#: Abstracts in the prompt are cut here (a model's context is small; the first part holds the aims).
MAX_ABSTRACT_CHARS = 3000
#: The name under which embedding-similarity scores are kept and shown.
EMBEDDING_SCORER = "embedding similarity"
#: Cosine similarity (all-MiniLM-L6-v2) below each cut gives 1, 2, 3, 4; at or above the last, 5.
SIMILARITY_CUTS = (0.25, 0.40, 0.55, 0.70)

SCORE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
        "reason": {"type": "string"},
    },
    "required": ["score", "reason"],
}

_THINK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
_SCORE_WORD = re.compile(r"score\W{0,6}([1-5])(?![0-9]|\.[0-9])", re.IGNORECASE)
_REASON_WORD = re.compile(r"reason\W{0,6}([^\n\"}]{3,400})", re.IGNORECASE)


@dataclass(frozen=True)
class ModelScore:
    model: str
    score: int | None
    reason: str
    note: str = ""

    def text(self) -> str:
        if self.score is None:
            return f"{self.model}: no score — {self.note}"
        return f"{self.model}: {self.score}/5 — {self.reason or '(no reason given)'}"


def mean_score(scores: Sequence[ModelScore]) -> float | None:
    """The mean of the scores given (None: no model gave one)."""
    values = [s.score for s in scores if s.score is not None]
    return statistics.fmean(values) if values else None


class ScoreReplyError(ValueError):
    """A reply with no usable score; the message is the note shown for the record."""


def score_prompt(question: str, title: str, abstract: str) -> str:
    abstract = (abstract or "").strip()
    if len(abstract) > MAX_ABSTRACT_CHARS:
        abstract = abstract[:MAX_ABSTRACT_CHARS] + " …"
    return (
        "You screen records for a systematic review. Rate how relevant the record is to the review "
        "question, from 1 (not relevant) to 5 (clearly relevant), and give the reason in one sentence.\n"
        'Reply with one JSON object and nothing else: {"score": <1-5>, "reason": "<one sentence>"}\n\n'
        f"Review question: {question.strip()}\n\nTitle: {(title or '').strip() or '(no title)'}\n\n"
        f"Abstract: {abstract or '(no abstract)'}"
    )


def _snippet(text: str, n: int = 60) -> str:
    flat = " ".join(text.split())
    return repr(flat[:n] + ("…" if len(flat) > n else ""))


def _one_sentence(text: str) -> str:
    text = " ".join(str(text).split())
    m = re.match(r"(.{10,300}?[.!?])(\s|$)", text)
    return (m.group(1) if m else text[:300]).strip()


def _from_object(data: Any) -> tuple[int, str] | None:
    if not isinstance(data, Mapping):
        return None
    value = data.get("score")
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not 1 <= value <= 5:
        return None
    reason = data.get("reason")
    return value, _one_sentence(reason) if isinstance(reason, str) else ""


def parse_score(reply: Any) -> tuple[int, str]:
    """``(score 1–5, one-sentence reason)`` from a model's reply; raises :class:`ScoreReplyError`."""
    if not isinstance(reply, str) or not reply.strip():
        raise ScoreReplyError("the model's reply was empty")
    too_long = too_long_reason(reply, "model's reply", MAX_SCORE_REPLY_CHARS)
    if too_long:
        raise ScoreReplyError(too_long)
    text = _THINK.sub("", reply) if "</think>" in reply.lower() else reply
    candidates = [m.group(1) for m in _FENCE.finditer(text)][:4] + [text]
    unreadable = False
    for candidate in candidates:
        body = candidate.strip()
        start, end = body.find("{"), body.rfind("}")
        if start < 0 or end <= start:
            continue
        try:
            data = json.loads(body[start : end + 1])
        except RecursionError:  # nested past the decoder's limit: a hostile reply, not an answer
            raise ScoreReplyError(
                "the model's reply is JSON nested too deeply to read; no score taken"
            ) from None
        except ValueError:
            unreadable = unreadable or body.startswith("{")
            continue
        found = _from_object(data)
        if found is not None:
            return found
        if isinstance(data, Mapping) and "score" in data:
            raise ScoreReplyError(
                f"the model's reply has no score 1–5 (score: {_snippet(json.dumps(data.get('score')), 40)})"
            )
    if unreadable:
        raise ScoreReplyError(f"the model's reply is broken JSON: {_snippet(text)}")
    m = _SCORE_WORD.search(text)
    if m is None:
        stripped = text.strip()
        if re.fullmatch(r"[1-5](\s*/\s*5)?\.?", stripped):
            return int(stripped[0]), ""
        raise ScoreReplyError(f"no score 1–5 in the model's reply: {_snippet(text)}")
    reason = _REASON_WORD.search(text)
    return int(m.group(1)), _one_sentence(reason.group(1)) if reason else ""


def similarity_score(similarity: float) -> int:
    """1–5 from a cosine similarity on :data:`SIMILARITY_CUTS`."""
    return 1 + sum(1 for cut in SIMILARITY_CUTS if similarity >= cut)


def similarity_reason(similarity: float, model: str) -> str:
    return f"Cosine similarity {similarity:.2f} to the question ({model}); no LLM read it."
