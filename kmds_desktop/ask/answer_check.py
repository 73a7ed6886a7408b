"""A model's answer checked against the records it read, so that the offline answer stays its floor.

Measured with a 1.5B model on the dev question set (``bench/llm_quality.py --split dev --parts
answers``), three kinds of answer were worse than the offline answer to the same question:

- **figures no record holds**: "the best model for species ... achieved an accuracy of 681 grams",
  "the tree ensembles missed the linear model by 12 grams [1]". A number is the one part of a claim
  the app can check word for word, and a wrong one is the costliest: each statement whose figure is
  in none of the records the model read (nor in the question) is left out, and the note under the
  answer quotes it, so nothing is hidden;
- **no sentence at all**: the whole answer was ``[1]``;
- **no citation**: "Logistic regression was used to compare the models." (the records said
  accuracy): an answer that cites nothing cannot be checked by a click.

In the last two cases, and where leaving out invented statements leaves no cited one, the records the
model read follow in their own words (as the offline answer gives them, numbered as in the view), so
the reader has what the offline path would have shown. Plain Python: the orchestrator calls
:func:`without_unheld_figures` on the model's text before its citations are repaired, and
:func:`with_records_if_uncited` after.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from kmds_desktop.ask.answers import (
    CITATION,
    LIST_ITEM,
    SENTENCE_BREAK,
    claim_words,
    extractive_answer,
    record_label,
)

#: A figure: digits with optional thousands commas and decimals, not part of a name ("R2", "F1",
#: "Q4_K_M") and not a citation marker (those are taken out first).
_FIGURE = re.compile(r"(?<![A-Za-z0-9_.,])\d+(?:,\d{3})*(?:\.\d+)?")
#: Whole numbers below this are counts a model restates in its own words ("two rows" -> "2 rows"),
#: or list positions: they are not checked.
SMALL_COUNT = 10
#: An answer with fewer words than this, citations aside ("[1]", "Yes."), states nothing.
NO_STATEMENT_WORDS = 2
#: Characters of a left-out statement quoted in the note.
QUOTE_CHARS = 160
#: The note under an answer the model wrote no statement for: the records it read stand in for it.
NO_STATEMENT_NOTE = ("The records the model read are shown in their own words, as the offline answer gives "
                     "them.")


def figure_values(text: str) -> set[str]:
    """The figures of ``text`` in one spelling each: ``1,000`` and ``1000``, ``15.0`` and ``15``
    compare equal; the citation markers are not figures."""
    values = set()
    for match in _FIGURE.finditer(CITATION.sub(" ", text)):
        try:
            number = Decimal(match.group(0).replace(",", ""))
        except InvalidOperation:  # pragma: no cover - the pattern admits only digits
            continue
        values.add(format(number.normalize(), "f"))
    return values


def _held_forms(held: set[str]) -> list[Decimal]:
    """Each held figure and its percentage twins (``0.8`` and ``80``): a model may restate either way."""
    forms = []
    for value in held:
        number = Decimal(value)
        forms += [number, number * 100, number / 100]
    return forms


def _rounds_to(held: Decimal, figure: Decimal) -> bool:
    """Whether ``held``, rounded to ``figure``'s decimals, is ``figure`` (0.988 -> 0.99, 230.6 -> 231)."""
    exponent = figure.as_tuple().exponent
    if not isinstance(exponent, int):  # pragma: no cover - figures are finite
        return False
    try:
        return held.quantize(Decimal(1).scaleb(exponent), rounding=ROUND_HALF_UP) == figure
    except InvalidOperation:  # too many digits for the context: not the same figure
        return False


def unheld_figures(sentence: str, held: set[str]) -> list[str]:
    """The figures of ``sentence`` (small whole counts aside) that no figure in ``held`` is, or rounds
    to (a model rounds 0.988 to 0.99, or restates it as 98.8 %)."""
    forms = _held_forms(held)
    missing = []
    for value in sorted(figure_values(sentence)):
        number = Decimal(value)
        if number == number.to_integral_value() and abs(number) < SMALL_COUNT:
            continue
        if not any(_rounds_to(form, number) for form in forms):
            missing.append(value)
    return missing


def _has_cited_statement(text: str) -> bool:
    """A sentence with words that cites a record ("Model 1 was selected [1]." counts; "[1]" does not)."""
    sentences = (s for line in text.splitlines() for s in SENTENCE_BREAK.split(line))
    return any(claim_words(s) and CITATION.search(s) for s in sentences)


#: A marker with the white space before it; starting only at a run's first space keeps it linear.
_MARKER_AND_SPACE = re.compile(r"(?<!\s)\s*\[\d{1,6}\]")


def _quote(sentence: str) -> str:
    flat = " ".join(_MARKER_AND_SPACE.sub("", sentence).split()).rstrip(" .")
    return flat if len(flat) <= QUOTE_CHARS else flat[: QUOTE_CHARS - 1].rstrip() + "…"


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def without_unheld_figures(answer: str, question: str, results: Sequence[dict[str, Any]],
                          given: Sequence[int]) -> tuple[str, str]:
    """The answer without the statements whose figures no record the model read holds, and the note
    that quotes them ("" when none was left out).

    ``results``: every record of the route, numbered as the view numbers them (``[n]`` is
    ``results[n-1]``); ``given``: the numbers of those the model read. The figures a statement may use
    are those of the given records (their whole findings and labels) and of the question."""
    held: set[str] = figure_values(question)
    for number in given:
        if 1 <= number <= len(results):
            record = results[number - 1]
            held |= figure_values(f"{record_label(record)} {record.get('finding', '')}")
    kept_lines: list[str] = []
    left_out: list[str] = []
    missing_figures: list[str] = []
    for line in answer.splitlines():
        bullet = LIST_ITEM.match(line)
        head = bullet.group(0) if bullet else ""  # "12. " numbers the list, it is not a figure
        kept = []
        for sentence in SENTENCE_BREAK.split(line[len(head):]):
            missing = unheld_figures(sentence, held) if claim_words(sentence) else []
            if missing:
                left_out.append(_quote(sentence))
                missing_figures += [m for m in missing if m not in missing_figures]
            else:
                kept.append(sentence)
        if kept or not line.strip():
            kept_lines.append(head + " ".join(kept))
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(kept_lines)).strip()
    if not left_out:
        return text, ""
    quoted = "; ".join(f"\u201c{q}\u201d" for q in left_out[:3])
    return text, (f"The app left out {len(left_out)} {_plural(len(left_out), 'statement', 'statements')} "
                  f"of the model's with {_plural(len(missing_figures), 'a figure', 'figures')} "
                  f"({', '.join(missing_figures[:6])}) that no record it read holds: {quoted}.")


def with_records_if_uncited(answer: str, results: Sequence[dict[str, Any]],
                            given: Sequence[int]) -> tuple[str, str]:
    """Where the answer (its citations already repaired) has no statement that cites a record, the
    answer with the records the model read added in their own words (numbered as in the view), and
    the note that says so; otherwise the answer unchanged and ""."""
    shown = [n for n in given if 1 <= n <= len(results)]
    if not shown or _has_cited_statement(answer):
        return answer, ""
    records = [results[n - 1] for n in shown]
    which = _plural(len(records), "is the record it read, in its own words:",
                    "are the records it read, in their own words:")
    if claim_words(answer) < NO_STATEMENT_WORDS:
        said = " ".join(answer.split())[:QUOTE_CHARS]
        heading = (f"The model wrote no statement (only \u201c{said}\u201d), so here {which}" if said
                   else f"The model left no statement the app could keep, so here {which}")
        note = NO_STATEMENT_NOTE
        return extractive_answer(records, heading, numbers=shown), note
    heading = f"The model cited no record for this, so here {which}"
    note = ("The model cited no record: its words above are not marked as coming from one, and the records "
            "it read follow in their own words.")
    return f"{answer}\n\n{extractive_answer(records, heading, numbers=shown)}", note
