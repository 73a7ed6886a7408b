"""One family of errors for every LLM backend, with messages a user can act on.

The GUI and the CLI show ``str(err)`` as is, so each message names what failed (the host, the
model, the key's source) and what to do next. Backends translate their client's exceptions into
these; callers catch :class:`LLMError` once instead of knowing each client library.
"""

from __future__ import annotations

import html
import re

from kmds_desktop.text import shorten


class LLMError(RuntimeError):
    """Base class: the LLM could not produce a reply."""


class LLMUnreachable(LLMError):  # noqa: N818 - reads as "the LLM is unreachable"
    """The server could not be reached (not running, wrong host, connection dropped)."""

    def __init__(self, message: str, host: str | None = None) -> None:
        super().__init__(message)
        self.host = host


class LLMModelNotFound(LLMError):  # noqa: N818
    """The server answered but does not have the requested model."""

    def __init__(self, message: str, model: str | None = None, available: list[str] | None = None) -> None:
        super().__init__(message)
        self.model = model
        self.available = list(available or [])


class LLMTimeout(LLMError):  # noqa: N818
    """No complete reply within the configured timeout."""


class LLMAuthError(LLMError):
    """The API key is missing, invalid or lacks permission."""


class LLMQuotaError(LLMError):
    """The provider refused the request because a quota or rate limit was reached."""


class LLMBadReply(LLMError):  # noqa: N818
    """The backend answered with something unusable (empty, malformed, blocked)."""


class LLMSchemaRefused(LLMError):  # noqa: N818
    """The server refused a JSON schema for the reply (it cannot constrain output): ask again
    without one and parse the text, as for a model that ignores schemas."""



#: The most of a server's error body that is looked at: an error page is a few kilobytes; a server
#: gone wrong can send megabytes, and only the start is needed to say what it is.
_ERROR_BODY_CHARS = 64 * 1024
_HTML_MARKS = ("<!doctype html", "<html", "<head", "<body", "<title")
_TITLE = re.compile(r"<(?:title|h1)\b[^>]{0,200}>([^<]{0,2000})", re.IGNORECASE)


def server_error_text(body: str, status: int | None = None) -> str:
    """The text of a server's error reply as a message can quote it: one short line, never markup.

    Why: a proxy or a crashed server in front of the LLM (nginx, a load balancer, a captive portal)
    answers with an HTML error page, which quoted as is filled the fallback reason with tags. An HTML
    page is named for what it is, with its title: "the server answered with an HTML page (HTTP 502:
    Bad Gateway)"; any other text is cut to :data:`~kmds_desktop.text.MESSAGE_LIMIT` characters.
    """
    text = str(body or "")[:_ERROR_BODY_CHARS]
    head = text.lstrip()[:2048].lower()
    if not (head.startswith("<") and any(mark in head for mark in _HTML_MARKS)):
        return shorten(text)
    found = _TITLE.search(text)
    title = shorten(html.unescape(found.group(1)), 80) if found else ""
    if status and title.startswith(str(status)):  # nginx: "<title>502 Bad Gateway</title>"
        title = title[len(str(status)):].strip()
    parts = [part for part in (f"HTTP {status}" if status else "", title) if part]
    return "the server answered with an HTML page" + (f" ({': '.join(parts)})" if parts else "")
