"""Model scores: an LLM rates a record 1–5 for relevance to the question.

Why (BMLibrarian's document scoring agent): a reviewer deciding thousands of records wants a second
opinion that reads the abstract against the question, and the order can be sorted by it. A score never
decides anything; it is a column beside the decision. The model is asked for the score alone (a reason
written after the score never informed it, and cost two thirds of the reply's time on a CPU); a reason a
model gives anyway is kept and shown.

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
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kmds_desktop.limits import too_long_reason
from kmds_desktop.reply_text import fenced_blocks

#: A score reply is one small object; anything longer is not read (a hostile or runaway reply).
MAX_SCORE_REPLY_CHARS = 64 * 1024
#: Abstracts in the prompt are cut here (the first part holds the aims and the population). Every
#: character is read by the model for every record and scorer (a CPU reads about 4 characters a token);
#: CF's abstracts: median 801 characters, 95th percentile 1,651.
MAX_ABSTRACT_CHARS = 1500
#: The name under which embedding-similarity scores are kept and shown.
EMBEDDING_SCORER = "embedding similarity"
#: Cosine similarity (all-MiniLM-L6-v2) below each cut gives 1, 2, 3, 4; at or above the last, 5.
SIMILARITY_CUTS = (0.25, 0.40, 0.55, 0.70)

#: The reply: the score alone. Why no reason: it was written after the score, so it never informed
#: it, and it was two thirds of the reply (Qwen2.5-Coder-1.5B: 22 tokens with a 12-word reason, 6
#: without), and writing is the slow half of a request on a CPU. A reply that gives a reason anyway
#: (a server without schemas) still has it read and shown.
SCORE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
    },
    "required": ["score"],
    "additionalProperties": False,
}

_THINK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
#: "score: 4" in free text. Not a score: a sign before the digit ("score: -3"), more digits or a decimal
#: or exponent after it ("score = 1e9"), or another scale ("score: 4/10"; "4/5" is one).
_SCORE_WORD = re.compile(
    r"score[^\w\-+]{0,6}([1-5])(?![0-9]|\.[0-9]|[eE][-+]?[0-9]|\s*/\s*(?!5(?![0-9]))[0-9])", re.IGNORECASE)
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
        return f"{self.model}: {self.score}/5" + (f" — {self.reason}" if self.reason else "")


def mean_score(scores: Sequence[ModelScore]) -> float | None:
    """The mean of the scores given (None: no model gave one)."""
    values = [s.score for s in scores if s.score is not None]
    return statistics.fmean(values) if values else None


class ScoreReplyError(ValueError):
    """A reply with no usable score; the message is the note shown for the record."""


#: The instructions of every score request, sent as the system message: the same bytes on every call,
#: so a server's prompt cache (llama.cpp's ``cache_prompt``, Ollama's kept context) reads them once.
SCORE_SYSTEM = (
    "You screen records for a systematic review. Rate the record's relevance to the review question "
    "from 1 (not relevant) to 5 (clearly relevant). Reply with JSON only: "
    '{"score": <1-5>}'
)


def score_prompt(question: str, title: str, abstract: str) -> str:
    """The per-record part of a score request (after :data:`SCORE_SYSTEM`): the review question first
    (the same for every record of a review, so it joins the cached prefix), the record last."""
    abstract = " ".join((abstract or "").split())
    if len(abstract) > MAX_ABSTRACT_CHARS:
        abstract = abstract[:MAX_ABSTRACT_CHARS].rsplit(" ", 1)[0] + " …"
    return (
        f"Review question: {question.strip()}\n\nTitle: {(title or '').strip() or '(no title)'}\n"
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
    if isinstance(value, str) and value.strip() in ("1", "2", "3", "4", "5"):  # not int() of any text:
        value = int(value.strip())  # "²" is a digit to isdigit(), and 5,000 digits are too many for int()
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
    candidates = [*fenced_blocks(text, 4), text]
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


# -- do the scores mean something? --------------------------------------------------------------------

#: The AUC a scorer's scores must reach on the screened records to feed the active-learning order.
#: Measured by simulation (1–5 scores cut from normal latents, 4,000 draws per cell): with 5 includes
#: and 5 excludes, scores that know nothing pass 0.70 in 15% of draws and scores of true AUC 0.76 in
#: 66%; at 0.65 the know-nothings pass in 22%, at 0.75 the useful ones only in 53%.
AUC_THRESHOLD = 0.70
#: Fewer screened includes (or excludes) with a score than this: too few to tell (AUC's spread by chance
#: with 3 and 3 is about 0.2: a know-nothing scorer passes 0.70 in 20% of draws).
MIN_DECISIONS_EACH = 5
#: How many screened records of each kind a scoring run scores first (before the undecided), so the
#: check has its decisions: with 8 and 8 know-nothings pass 0.70 in 9% of draws, useful ones in 68%.
CHECK_PER_CLASS = 8


def auc(positive: Sequence[float], negative: Sequence[float]) -> float | None:
    """The probability that a positive outscores a negative, ties counting half (the Mann–Whitney
    AUC); None when either side is empty. Counted over distinct values (scores are 1–5 or their means),
    so a review of thousands of decisions is checked after every decision without a pause."""
    if not positive or not negative:
        return None
    pos, neg = Counter(positive), Counter(negative)
    wins = 0.0
    for p, np_ in pos.items():
        for n, nn in neg.items():
            wins += np_ * nn * (1.0 if p > n else 0.5 if p == n else 0.0)
    return wins / (len(positive) * len(negative))


@dataclass(frozen=True)
class ScoreCheck:
    """One scorer's scores against the reviewer's own include/exclude decisions."""

    model: str
    included: int  #: screened includes that have this scorer's score
    excluded: int  #: screened excludes that have this scorer's score
    auc: float | None
    #: The one score every screened record got (the "3 of 5 to every record" case), else None.
    constant: int | None = None

    @property
    def enough(self) -> bool:
        return self.included >= MIN_DECISIONS_EACH and self.excluded >= MIN_DECISIONS_EACH

    @property
    def separates(self) -> bool | None:
        """True or False once there are enough decisions to tell; None before."""
        if not self.enough or self.auc is None:
            return None
        return self.constant is None and self.auc >= AUC_THRESHOLD

    def line(self) -> str:
        """One line: what the scores did on the screened records, and what that means for the order."""
        basis = f"{self.included} included / {self.excluded} excluded"
        if not self.enough:
            return (f"{self.model}: too few screened records with a score to check it ({basis}; "
                    f"needs {MIN_DECISIONS_EACH} of each)")
        if self.constant is not None:
            return (f"{self.model} gave {self.constant} of 5 to every screened record ({basis}): its scores "
                    "do not separate includes from excludes and are left out of the order")
        if self.separates:
            return (f"{self.model}: AUC {self.auc:.2f} on {basis} (≥ {AUC_THRESHOLD:.2f}): its scores "
                    "separate includes from excludes")
        return (f"{self.model}: AUC {self.auc:.2f} on {basis} (below {AUC_THRESHOLD:.2f}): its scores do not "
                "separate includes from excludes and are left out of the order")


def check_scores(model: str, pairs: Sequence[tuple[int | float | None, bool]]) -> ScoreCheck:
    """``pairs``: (score, included?) of screened records (maybes left out by the caller)."""
    pos = [float(s) for s, inc in pairs if s is not None and inc]
    neg = [float(s) for s, inc in pairs if s is not None and not inc]
    distinct = set(pos) | set(neg)
    constant = int(next(iter(distinct))) if len(distinct) == 1 and pos and neg else None
    return ScoreCheck(model, len(pos), len(neg), auc(pos, neg), constant)
