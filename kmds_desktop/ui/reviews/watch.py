"""The check "the database changed": after an import in the window, and on start after an import or a
withdrawal made elsewhere, the reviews say what is new for them.

Why a fingerprint and not the document count alone: a withdrawal (``document.withdrawn_date`` set by a
PubMed update file) changes no count, yet every review holding the record must say so. The panel's status
count is the trigger (it is read on start and after each import or embedding); the fingerprint (count,
withdrawn count, newest withdrawal date: one scan, on a worker) is compared with the one kept in the place
file, and only when it differs are the reviews' strategies re-run (without adding anything) on the same
worker. The window's :class:`~kmds_desktop.ui.reviews.dialogs.NewRecordsBar` shows what they found.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject

from kmds_desktop.app import review_resume as resume

#: The job kind of the check: a newer status replaces a check not started yet.
CHECK_KIND = "reviews.check"


class DatabaseWatch(QObject):
    """Runs the check when the literature panel counts the database (see the module docstring)."""

    def __init__(self, reviews: Any) -> None:
        super().__init__(reviews)
        self.reviews = reviews
        reviews.panel.status_changed.connect(lambda _text: self.counted())

    def counted(self) -> None:
        """The panel read the database's status: compare its fingerprint with the one seen last."""
        panel = self.reviews.panel
        if panel.session.documents_in_database is None or panel.database is None:
            return
        self.reviews.jobs.submit(
            CHECK_KIND, resume.check_if_changed, panel.database, self.reviews.place.database_seen,
            pass_progress=False, label="Looking for new and withdrawn records of your reviews",
            policy="latest", busy_cursor=False, on_result=self._checked,
            on_error=lambda exc: self.reviews.messages.show_exception(
                exc, "The reviews could not be checked for new records"))

    def _checked(self, check: resume.DatabaseCheck) -> None:
        place = self.reviews.place
        if place.database_seen != check.fingerprint:
            place.database_seen = check.fingerprint
            self.reviews.save_place()
        if check.notice is not None:
            self.reviews.new_records_bar.show_new(check.notice)
