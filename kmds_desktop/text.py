"""Small wording helpers shared by every layer (the window, the CLI, the literature loaders).

It sits at the bottom of the import layers (see ``pyproject.toml``) and imports nothing of the
project, so the Qt-free core and the views word counts the same way: "1 record", never "1 records".
"""

from __future__ import annotations

from datetime import datetime


def plural(n: int, one: str, many: str | None = None) -> str:
    """``n`` and the noun that agrees with it: ``1 record``, ``2 records``, ``1,240 records``.

    ``many`` is for nouns whose plural is not ``one + "s"`` (``query`` / ``queries``).
    """
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


#: The longest message (in characters) a reason or an error line keeps: about four lines of a
#: terminal or of the window's status text, enough for a file name, a position and the cause.
MESSAGE_LIMIT = 300


def shorten(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` on one line and at most ``limit`` characters, saying how long it was when cut.

    Why: a reason or an error often quotes what the user gave (a 60 KB query, a 200,000-character
    field, a parser's echo of a whole line); quoted whole it buries the sentence that says what to do
    under pages of text. Runs of white space (new lines too) become one space, so a cut message is
    still one line; the cut keeps the start, which is where the cause is said."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    tail = f"… ({len(flat):,} characters in all)"
    keep = max(limit - len(tail), 1)
    return flat[:keep].rstrip() + tail


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def human_datetime(stamp: str) -> str:
    """An ISO-8601 time stamp as a person reads it, in local time: ``3 Dec 2026 14:05``.

    Why: the stores keep UTC ISO stamps (``2026-12-03T14:05:11+00:00``), exact and sortable, and a
    label made of one ("search 2026-12-03T14:05:11+00:00") was what a user saw of a search. Month
    names are fixed English abbreviations, not the process locale's, so a label reads the same in
    the window, the CLI and a saved diagram. Text that is not a time stamp comes back unchanged."""
    text = (stamp or "").strip()
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    if moment.tzinfo is not None:
        moment = moment.astimezone()
    return f"{moment.day} {_MONTHS[moment.month - 1]} {moment.year} {moment.hour:02d}:{moment.minute:02d}"
