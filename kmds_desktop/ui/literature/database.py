"""The literature view's link to its database: opened on a worker when first needed, its status read.

A part given the session, the window's job runner and the database-on-demand rule
(:class:`~kmds_desktop.app.literature_data.DatabaseOnDemand`); it gives the open database and each
status read to the session (:meth:`~kmds_desktop.app.literature.LiteratureSession.attach_database`,
:meth:`~kmds_desktop.app.literature.LiteratureSession.apply_database_status`), which keeps them and
announces them; views read the counts from the session. It knows nothing of the panel: what it has
to say goes out as signals.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from kmds_desktop.app import literature_data as lj
from kmds_desktop.app.doctor import server_notes
from kmds_desktop.app.literature import LiteratureSession
from kmds_desktop.app.messages import user_message
from kmds_desktop.ui.jobs.job import Job
from kmds_desktop.ui.jobs.runner import JobRunner

#: The job kinds of the literature view (one of each runs at a time; see JobRunner).
KINDS = {
    "open": "literature.open",
    "status": "literature.status",
    "check": "literature.check",
    "generate": "literature.generate",
    "run": "literature.run",
    "import": "literature.import",
    "embed": "literature.embed",
    "topk": "literature.topk",
    "export": "literature.export",
    "record": "history.record",
}


class DatabaseLink(QObject):
    """Opens the literature database on demand and reads its status, for the session."""

    #: (level, text) for the window's message bar.
    message = Signal(str, str)
    #: The status bar's line ("Literature: 8,316 documents, …").
    status_text = Signal(str)

    def __init__(self, session: LiteratureSession, jobs: JobRunner, db: lj.DatabaseOnDemand,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.jobs = jobs
        self.db = db
        self._open_job: Job | None = None
        if db.database is not None:
            session.attach_database(db.database)

    @property
    def database(self) -> Any | None:
        """The open literature database, or None until something has needed it."""
        return self.db.database

    def with_database(self, then: Callable[[Any], None],
                      failed: Callable[[BaseException], None] | None = None) -> None:
        """Call ``then(db)`` once the database is open (opening it on a worker if needed)."""
        if not self.db.when_open(then, failed):
            return
        self._open_job = self.jobs.submit(
            KINDS["open"], lj.open_literature_database, self.session.literature, self.db.dsn,
            label="Opening the literature database", policy="refuse", busy_cursor=False,
            on_result=self._opened, on_error=self._failed,
            on_cancelled=lambda: self._failed(RuntimeError("opening the database was cancelled")),
        )

    def _opened(self, db: Any) -> None:
        self.session.attach_database(db)
        for note in server_notes(db):  # the embedded server was found stuck and brought back
            self.message.emit("warning", note)
        for then in self.db.opened(db):
            then(db)

    def _failed(self, exc: BaseException) -> None:
        waiting = self.db.failed(exc)
        self.status_text.emit("Literature: database unavailable")
        self.message.emit("error", user_message(exc, "The literature database is not available"))
        for failed in waiting:
            failed(exc)

    def refresh_status(self) -> None:
        """Read the documents, vectors and top-k state (the session keeps them and announces them)."""
        self.with_database(
            lambda db: self.jobs.submit(
                KINDS["status"], lj.database_status, db, self.session.embedding_model,
                use_database_vectors=self.session.retrieval.use_database_vectors,
                label="Reading the literature database status",
                policy="latest", busy_cursor=False, on_result=self._status_arrived,
                on_error=lambda exc: self.message.emit(
                    "error", user_message(exc, "Cannot read the literature database")),
            )
        )

    def _status_arrived(self, status: dict[str, Any]) -> None:
        read = lj.DatabaseStatus.from_status(status)
        self.session.apply_database_status(read)  # first: a listener of the line reads the session's counts
        self.status_text.emit(read.line())

    def close(self) -> None:
        """Close the database if this link opened it."""
        self.db.close()
