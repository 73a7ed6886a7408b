"""One family of errors for every LLM backend, with messages a user can act on.

The GUI and the CLI show ``str(err)`` as is, so each message names what failed (the host, the
model, the key's source) and what to do next. Backends translate their client's exceptions into
these; callers catch :class:`LLMError` once instead of knowing each client library.
"""

from __future__ import annotations


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


class LLMAuthError(LLMError):  # noqa: N818
    """The API key is missing, invalid or lacks permission."""


class LLMQuotaError(LLMError):  # noqa: N818
    """The provider refused the request because a quota or rate limit was reached."""


class LLMBadReply(LLMError):  # noqa: N818
    """The backend answered with something unusable (empty, malformed, blocked)."""


class LLMSchemaRefused(LLMError):  # noqa: N818
    """The server refused a JSON schema for the reply (it cannot constrain output): ask again
    without one and parse the text, as for a model that ignores schemas."""
