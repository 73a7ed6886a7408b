"""File → Review report…: the review's report and its PRISMA 2020 diagram for updated reviews, read on a
worker and shown in :class:`~kmds_desktop.ui.reviews.dialogs.ReportDialog`; either saved to a file.

Why a part of its own: the report is read-only and needs only the job runner and the message bar, so the
reviews menu hands it the review's name and shows the dialog it returns.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from kmds_desktop.app import last_folders
from kmds_desktop.app import review_resume as resume
from kmds_desktop.ui.reviews.dialogs import ReportDialog
from kmds_desktop.ui.shell import file_dialogs


class ReviewReports(QObject):
    """Opens a review's report dialog and saves its text or diagram, each on the job runner."""

    def __init__(self, window: QWidget, jobs: Any, messages: Any, *, kind: str) -> None:
        super().__init__(window)
        self.window = window
        self.jobs = jobs
        self.messages = messages
        self.kind = kind

    def open(self, name: str) -> ReportDialog:
        """A dialog for review ``name`` that fills itself when the report has been read."""
        dialog = ReportDialog(name, self.window)

        def arrived(report: tuple[str, str]) -> None:
            with contextlib.suppress(RuntimeError):  # the dialog was closed before the report came
                dialog.show_report(*report)

        dialog.save_requested.connect(lambda: self._save(
            name, resume.write_review_report, "the report", "Save the review report", f"{name} report.txt",
            "Text (*.txt *.md);;All files (*)"))
        dialog.save_flow_requested.connect(lambda: self._save(
            name, resume.write_review_flow, "the PRISMA flow", "Save the PRISMA flow of the updates",
            f"{name} PRISMA flow.svg", "SVG (*.svg);;All files (*)"))
        self.submit(resume.review_report_and_flow, name, label=f"Reading the report of {name}", done=arrived,
                     failed=f"The report of review {name} could not be read")
        return dialog

    def _save(self, name: str, write: Callable[..., Any], what: str, caption: str, suggested: str,
              filters: str) -> None:
        path = file_dialogs.save_file(self.window, last_folders.SCREENING, caption, suggested, filters)
        if path:
            self.submit(write, name, path, label=f"Saving {what} of {name}",
                         done=lambda written: self.messages.show_message(
                             f"{what[0].upper()}{what[1:]} of review {name} written to {written}.", "info",
                             topic=self.kind),
                         failed=f"{what[0].upper()}{what[1:]} of review {name} could not be saved",
                         policy="queue")  # a save asked for while another runs waits its turn, never dropped

    def submit(self, fn: Callable[..., Any], *args: Any, label: str, done: Callable[[Any], None],
               failed: str, policy: str = "refuse", **kwargs: Any) -> Any:
        """Review work on the runner under this part's kind: ``done`` gets the result, a failure is
        shown as ``failed`` with the reason. The reviews menu submits through it too, so a review's
        jobs share one kind and one way of failing."""
        return self.jobs.submit(self.kind, fn, *args, pass_progress=False, label=label, policy=policy,
                                on_result=done,
                                on_error=lambda exc: self.messages.show_exception(exc, failed), **kwargs)
