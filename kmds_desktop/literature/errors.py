"""Errors of the literature database layer.

Every error the user can act on is a :class:`LiteratureError` whose message names the server, file or
query involved and what to do. Messages never carry a database password: the database layer passes
every message through :func:`kmds_desktop.secrets.redact` before raising.
"""

from __future__ import annotations

from kmds_desktop.tasks import Cancelled


class LiteratureError(Exception):
    """Base class of every literature database error."""


class DatabaseUnavailable(LiteratureError):  # noqa: N818 - a public name: renaming it would break callers
    """The server cannot be reached (stopped, wrong host/port, bad credentials).

    The connection is dropped; the next call reconnects, so the app recovers as soon as the server
    is back without being restarted.
    """


class ServerStartError(DatabaseUnavailable):
    """The embedded PostgreSQL server could not be initialised or started."""


class DiskFull(LiteratureError):  # noqa: N818 - a public name: renaming it would break callers
    """The disk holding the embedded server's data folder cannot take a write (an import, a start).

    Raised before an import that would not fit (nothing written), and after one that filled the disk
    (the file in progress rolled back, files finished before it kept); the message says how much
    space is missing and on which folder, so the user frees space there or moves the data folder.
    """


class SchemaError(LiteratureError):
    """The database lacks the tables the app needs, or has a newer schema than this app knows."""


class InvalidQuery(LiteratureError):  # noqa: N818 - a public name: renaming it would break callers
    """The search text is not a valid ``tsquery``; the message is the server's own explanation."""


class QueryTimeout(LiteratureError):  # noqa: N818 - a public name: renaming it would break callers
    """A statement ran longer than the configured ``statement_timeout`` and was stopped by the server."""


class QueryCancelled(LiteratureError, Cancelled):  # noqa: N818 - a public name: renaming it would break callers
    """A statement was cancelled on request (``cancel_current()`` or a cancel token).

    Also a :class:`kmds_desktop.tasks.Cancelled`, so code that handles task cancellation in general
    treats it the same way.
    """


class ImportFileError(LiteratureError):
    """A file could not be imported at all (unreadable, not the format its name says, truncated).

    Nothing from that file was written: each file is imported in one transaction.
    """


class QueryAgentError(LiteratureError):
    """The agent cannot go on: no query was generated, none could run, or the review broke a rule."""


class VectorsUnavailable(LiteratureError):  # noqa: N818 - a public name: renaming it would break callers
    """Document vectors cannot be used here: no pgvector, or a foreign database without opt-in.

    Here rather than beside the vector code (:mod:`kmds_desktop.literature.store.vectors`, which still
    names it) so the application layer can catch it without loading that engine's module."""
