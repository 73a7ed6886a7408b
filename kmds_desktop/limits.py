"""Size limits for text that comes from a language model, shared by every reader of replies.

A top-level module (not in ``llm``) so that parsers import it without loading the LLM clients.

Why one place: a server (or a model gone wrong) can send megabytes of braces, parentheses or
nesting. Every reply is cut off at :data:`MAX_REPLY_CHARS` while it streams in (the backend stops
reading and says so), and every parser refuses longer input before it starts, so no reply can take
unbounded memory or time, whichever backend it came from.
"""

from __future__ import annotations

#: The longest reply (in characters) any backend reads and any parser accepts: far above a route, a
#: query or an answer (a few kilobytes), small enough to parse in milliseconds.
MAX_REPLY_CHARS = 2 * 1024 * 1024


def too_long_reason(text: str, what: str = "reply", limit: int = MAX_REPLY_CHARS) -> str | None:
    """A one-line reason when ``text`` is over ``limit`` characters, else None."""
    if len(text) <= limit:
        return None
    return f"the {what} is too long ({len(text):,} characters; at most {limit:,} are read)"
