"""One-line messages for people, from exceptions: what failed and what to do, never a class name.

The window and the CLI show the same words. Errors of this app's own families (LLM, literature,
index, KB, settings) already carry a message written for users, so it is shown as is; only an empty
message or an unexpected exception needs wording here. Classification is by exception *type*, never
by the text of a message.
"""

from __future__ import annotations

from kmds_desktop.config import SettingsError
from kmds_desktop.index.errors import SemanticIndexError
from kmds_desktop.kb.model import KnowledgeBaseError
from kmds_desktop.literature.errors import LiteratureError
from kmds_desktop.llm import errors as llm
from kmds_desktop.tasks import Cancelled

#: Wording for an error that came without a message of its own.
_FALLBACK: tuple[tuple[type[BaseException], str], ...] = (
    (Cancelled, "cancelled"),
    (llm.LLMTimeout, "the model did not answer within the time limit"),
    (llm.LLMUnreachable, "the LLM server could not be reached"),
    (llm.LLMModelNotFound, "the model is not installed on the server"),
    (llm.LLMAuthError, "the API key is missing or was refused"),
    (llm.LLMQuotaError, "the provider's quota or rate limit was reached"),
    (llm.LLMBadReply, "the model's reply was unusable"),
    (llm.LLMError, "the LLM gave no reply"),
    (SettingsError, "the settings are invalid"),
    (MemoryError, "out of memory"),
    (TimeoutError, "the operation timed out"),
    (ConnectionError, "the connection failed"),
    (OSError, "a file or connection could not be used"),
)

#: Exception families whose message is written for users (shown without a prefix).
_OWN_FAMILIES: tuple[type[BaseException], ...] = (
    llm.LLMError, SettingsError, Cancelled, LiteratureError, SemanticIndexError, KnowledgeBaseError,
)


def describe_error(exc: BaseException) -> str:
    """What failed, in words for a user: the exception's own message (one line), or a plain phrase
    for its kind when it has none. Never the exception's class name."""
    text = " ".join(str(exc).split())
    if text:
        return text
    for kind, phrase in _FALLBACK:
        if isinstance(exc, kind):
            return phrase
    return "unexpected error (see the log file for details)"


def is_expected(exc: BaseException) -> bool:
    """Whether ``exc`` is one of the app's own failures (a message written for users) or an OS one."""
    return isinstance(exc, (*_OWN_FAMILIES, OSError, ValueError))


def user_message(exc: BaseException, context: str = "") -> str:
    """``"<context>: <what failed>"`` in one line, with no exception class name in it.

    Without a context, a failure that is not one of the app's own is introduced as unexpected.
    """
    detail = describe_error(exc)
    if context:
        return f"{context}: {detail}"
    if not is_expected(exc):
        return f"Unexpected error: {detail}"
    return detail[:1].upper() + detail[1:]


def job_progress_text(label: str, message: str) -> str:
    """One job's progress in the status line: its name, then what it is doing, said once.

    A job's progress message often repeats its name ("Loading the embedding model: loading the
    embedding model"); the status line has room for one short line, so a message that only says
    the name again is dropped, and a message that starts with the name keeps only the rest.
    """
    label, message = label.strip(), (message or "").strip()
    if not message:
        return label
    if not label:
        return message
    key, said = label.casefold(), message.casefold()
    if said == key:
        return label
    if said.startswith(key):
        rest = message[len(label):].lstrip(" :·-–—,;")
        return f"{label}: {rest}" if rest else label
    return f"{label}: {message}"


def progress_line(jobs: list[tuple[str, str]]) -> str:
    """The one status line for the running jobs, each ``(label, message)``, newest last.

    One job: its name and progress (:func:`job_progress_text`). Several: how many and their names,
    newest first, without their messages: each in full was the first start's "2 tasks: Loading the
    embedding model: loading the embedding model · I…", cut before the second job's name (the
    tooltip holds every job's full progress).
    """
    if not jobs:
        return ""
    if len(jobs) == 1:
        return job_progress_text(*jobs[0])
    return f"{len(jobs)} tasks: " + " · ".join(label for label, _message in reversed(jobs))
