"""A non-modal progress strip for the status bar: one row per slow job, each with a Cancel button.

It appears only for jobs that run longer than :data:`~kmds_desktop.ui.workers.SHOW_PROGRESS_MS`
(the runner's ``job_shown`` signal), so quick jobs never flicker, and it never blocks the window the
way a modal progress dialog would: the user can keep browsing while an index builds.
"""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from kmds_desktop.ui.workers import Job, JobRunner


class _JobRow(QWidget):
    def __init__(self, job: Job, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.job = job
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.label = QLabel(job.label)
        self.bar = QProgressBar()
        self.bar.setFixedWidth(140)
        self.bar.setMaximumHeight(16)
        self.bar.setTextVisible(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName(f"cancel:{job.kind}")
        self.cancel_button.setToolTip(f"Stop: {job.label}")
        self.cancel_button.clicked.connect(self._cancel)
        layout.addWidget(self.label)
        layout.addWidget(self.bar)
        layout.addWidget(self.cancel_button)
        self.update_progress(*job.last_progress)
        job.progress.connect(self.update_progress)

    def update_progress(self, done: int, total: object, message: str) -> None:
        if isinstance(total, int) and total > 0:
            self.bar.setRange(0, total)
            self.bar.setValue(min(done, total))
        else:
            self.bar.setRange(0, 0)  # busy indicator when the total is unknown
        self.label.setText(f"{self.job.label}: {message}" if message else self.job.label)

    def _cancel(self) -> None:
        self.cancel_button.setEnabled(False)
        self.label.setText(f"{self.job.label}: cancelling…")
        self.job.cancel()


class ProgressStrip(QWidget):
    """Shows the runner's slow jobs; hides itself when none is left."""

    def __init__(self, jobs: JobRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows: dict[int, _JobRow] = {}
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        jobs.job_shown.connect(self._show_job)
        jobs.job_finished.connect(self._job_finished)
        self.setVisible(False)

    def rows(self) -> list[_JobRow]:
        return list(self._rows.values())

    def row_for(self, kind: str) -> _JobRow | None:
        return next((r for r in self._rows.values() if r.job.kind == kind), None)

    def _show_job(self, job: Job) -> None:
        if id(job) in self._rows or not job.running:
            return
        row = _JobRow(job, self)
        self._rows[id(job)] = row
        self._layout.addWidget(row)
        self.setVisible(True)

    def _job_finished(self, job: Job) -> None:
        row = self._rows.pop(id(job), None)
        if row is not None:
            self._layout.removeWidget(row)
            row.deleteLater()
        self.setVisible(bool(self._rows))
