"""Small wording helpers shared by every layer (the window, the CLI, the literature loaders).

It sits at the bottom of the import layers (see ``pyproject.toml``) and imports nothing of the
project, so the Qt-free core and the views word counts the same way: "1 record", never "1 records".
"""

from __future__ import annotations


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
