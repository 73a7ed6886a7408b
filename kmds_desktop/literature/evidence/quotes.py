"""The one quote verifier: every quote an answer shows is checked here against the cited page's text.

Why one function for every answer path: a quote is the user's reason to trust an answer, and a
model can paraphrase, merge two sentences or invent a plausible one. Whatever produced the quote (the
offline extractive answer, a model's summary later), it is shown only when it is a verbatim substring
of the page it cites, compared in :func:`~kmds_desktop.literature.fulltext.cleaning.normalise_for_match`
form (whitespace, hyphenation at line ends, ligatures and typographic quotes and dashes do not
count). A quote that runs from one page onto the next is verified against the two pages joined, and
then cites both. Anything else is refused, and the caller counts the refusal in the answer's notes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kmds_desktop.literature.fulltext.cleaning import normalise_for_match

#: A quote shorter than this (in words) proves nothing ("the", "Fig. 3") and is refused.
MIN_QUOTE_WORDS = 3

#: ``page_text(page_no) -> text or None`` for one paper (pages 1-based).
PageText = Callable[[int], "str | None"]


@dataclass(frozen=True)
class QuoteCheck:
    """The verdict on one quote: ``pages`` are the pages it is on (one, or two when it runs over)."""

    verified: bool
    pages: tuple[int, ...] = ()
    reason: str = ""


def verify_quote(quote: str, page_text: PageText, page: int) -> QuoteCheck:
    """Whether ``quote`` is on ``page`` (or starts on it and runs onto the next page)."""
    wanted = normalise_for_match(quote)
    if len(wanted.split()) < MIN_QUOTE_WORDS:
        return QuoteCheck(False, reason=f"a quote needs at least {MIN_QUOTE_WORDS} words")
    text = page_text(page)
    if text is None:
        return QuoteCheck(False, reason=f"page {page} does not exist in this paper")
    here = normalise_for_match(text)
    if _find_whole(here, wanted) >= 0:
        return QuoteCheck(True, (page,))
    following = page_text(page + 1)
    if following is not None:
        joined = f"{here} {normalise_for_match(following)}"
        position = _find_whole(joined, wanted)
        while 0 <= position < len(here):
            if len(here) < position + len(wanted):
                return QuoteCheck(True, (page, page + 1))
            position = _find_whole(joined, wanted, position + 1)
    return QuoteCheck(False, reason=f"not found verbatim on page {page}")


def _find_whole(text: str, quote: str, start: int = 0) -> int:
    """Where ``quote`` stands in ``text`` as whole words (-1: nowhere): a quote that ends inside a
    word ("the protein is in" on a page that says "inactive") says something the page does not."""
    position = text.find(quote, start)
    while position >= 0:
        end = position + len(quote)
        cut_before = position > 0 and quote[:1].isalnum() and text[position - 1].isalnum()
        cut_after = end < len(text) and quote[-1:].isalnum() and text[end].isalnum()
        if not (cut_before or cut_after):
            return position
        position = text.find(quote, position + 1)
    return -1


def locate_quote(quote: str, page_text: PageText, first_page: int, last_page: int) -> QuoteCheck:
    """The first page of ``first_page``-``last_page`` that :func:`verify_quote` accepts ``quote`` on
    (a passage spanning pages: which page is this sentence on?), or the refusal."""
    check = QuoteCheck(False, reason="no page given")
    for page in range(first_page, last_page + 1):
        check = verify_quote(quote, page_text, page)
        if check.verified:
            return check
    return check
