"""The window's one progress area (in the status bar): every slow job in one line, one bar, one Cancel.

A job appears only when it runs longer than :data:`~kmds_desktop.ui.jobs.runner.SHOW_PROGRESS_MS` (the
runner's ``job_shown`` signal), so quick jobs never flicker, and the area never blocks the window
the way a modal progress dialog would. Several jobs at once (a warm-up, an index build, a search)
share the line: it names them all (each with its progress in the tooltip; the wording is
:func:`~kmds_desktop.app.messages.progress_line`'s), the bar follows the newest, and
Cancel stops the only job, or offers a menu (each job, or all) when there are several.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QAction, QPainter
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMenu, QProgressBar, QToolButton, QWidget

from kmds_desktop.app.messages import job_progress_text, progress_line
from kmds_desktop.ui.jobs.runner import Job, JobRunner

#: Widest the progress line may grow in the status bar (longer text is elided; the tooltip has it all).
LABEL_WIDTH = 520
#: Narrowest it is squeezed to when the status bar is full (the LLM and literature lines keep theirs).
LABEL_MIN_WIDTH = 120


class ElidedLabel(QLabel):
    """A one-line label drawn elided ("…") to the width the status bar gives it.

    ``text()`` stays the whole line; :meth:`shown_text` is what is drawn. A plain QLabel asks for
    its whole text's width and, squeezed by the status bar's other lines, was cut mid-letter
    ("2 tasks: Indexing the knowledge base · Loading the embedding moc" at 1600 px)."""

    def shown_text(self) -> str:
        width = self.contentsRect().width()
        return self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, max(0, width))

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        hint = super().sizeHint()
        return QSize(min(hint.width(), LABEL_WIDTH), hint.height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        hint = super().minimumSizeHint()
        return QSize(min(hint.width(), LABEL_MIN_WIDTH), hint.height())

    def paintEvent(self, _event: Any) -> None:  # noqa: N802 - Qt API
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(self.contentsRect(), int(self.alignment()), self.shown_text())


class JobEntry:
    """One job shown in the area: its label, last progress, and how to stop it."""

    def __init__(self, strip: ProgressStrip, job: Job) -> None:
        self.strip = strip
        self.job = job
        self.done, self.total, self.message = 0, None, ""
        done, total, message = job.last_progress
        self.update(done, total, message)

    def update(self, done: int, total: object, message: str) -> None:
        self.done, self.message = done, message
        self.total = total if isinstance(total, int) else None

    @property
    def text(self) -> str:
        return job_progress_text(self.job.label, self.message)

    @property
    def cancel_button(self) -> QToolButton:
        """The area's one Cancel button (with only this job shown, a click cancels it)."""
        return self.strip.cancel_button

    def cancel(self) -> None:
        self.job.cancel()


class ProgressStrip(QWidget):
    """Shows the runner's slow jobs in one line; hides itself when none is left."""

    def __init__(self, jobs: JobRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("progressArea")
        self._entries: dict[int, JobEntry] = {}
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.label = ElidedLabel()
        self.label.setObjectName("progressText")
        self.bar = QProgressBar()
        self.bar.setFixedWidth(140)
        self.bar.setMaximumHeight(16)
        self.bar.setTextVisible(False)
        self.cancel_button = QToolButton()
        self.cancel_button.setObjectName("cancelJobs")
        self.cancel_button.setText("Cancel")
        self.cancel_button.clicked.connect(self._cancel_clicked)
        self._menu = QMenu(self.cancel_button)
        self._menu_keys: tuple[int, ...] = ()
        self._menu.triggered.connect(self._menu_chosen)
        layout.addWidget(self.label)
        layout.addWidget(self.bar)
        layout.addWidget(self.cancel_button)
        jobs.job_shown.connect(self._show_job)
        jobs.job_finished.connect(self._job_finished)
        self.setVisible(False)

    def rows(self) -> list[JobEntry]:
        return list(self._entries.values())

    def row_for(self, kind: str) -> JobEntry | None:
        return next((e for e in self._entries.values() if e.job.kind == kind), None)

    def _show_job(self, job: Job) -> None:
        if id(job) in self._entries or not job.running:
            return
        entry = JobEntry(self, job)
        self._entries[id(job)] = entry
        job.progress.connect(lambda d, t, m, e=entry: (e.update(d, t, m), self._refresh()))
        self._refresh()

    def _job_finished(self, job: Job) -> None:
        if self._entries.pop(id(job), None) is not None:
            self._refresh()

    def _refresh(self) -> None:
        entries = list(self._entries.values())
        self.setVisible(bool(entries))
        if not entries:
            self._menu_keys = ()
            return
        newest = entries[-1]
        text = progress_line([(e.job.label, e.message) for e in entries])
        self.label.setToolTip("\n".join(e.text for e in entries))
        self.label.setText(text)  # drawn elided to the width it gets (ElidedLabel)
        if newest.total:
            self.bar.setRange(0, newest.total)
            self.bar.setValue(min(newest.done, newest.total))
        else:
            self.bar.setRange(0, 0)  # busy indicator when the total is unknown
        keys = tuple(id(e) for e in entries)
        if keys == self._menu_keys:
            return  # the same jobs: the menu stands (rebuilt only when a job comes or goes)
        self._menu_keys = keys
        self._menu.clear()
        if len(entries) == 1:
            self.cancel_button.setMenu(None)
            self.cancel_button.setPopupMode(QToolButton.ToolButtonPopupMode.DelayedPopup)
            self.cancel_button.setToolTip(f"Stop: {newest.job.label}")
        else:
            # One slot for the whole menu, each action carrying its job's key: no Python closure
            # per action (PySide mis-counted a bool reference in those at interpreter exit).
            for key, entry in zip(keys, entries, strict=True):
                self._menu.addAction(f"Stop: {entry.job.label}").setData(key)
            self._menu.addSeparator()
            self._menu.addAction("Stop all").setData(0)
            self.cancel_button.setMenu(self._menu)
            self.cancel_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
            self.cancel_button.setToolTip("Choose what to stop")

    def _menu_chosen(self, action: QAction) -> None:
        key = action.data()
        if key == 0:
            self._cancel_all()
            return
        entry = next((e for e in self._entries.values() if id(e) == key), None)
        if entry is not None:
            entry.cancel()

    def _cancel_clicked(self) -> None:
        entries = list(self._entries.values())
        if len(entries) == 1:
            self.label.setText(f"{entries[0].job.label}: cancelling")
            entries[0].cancel()

    def _cancel_all(self) -> None:
        for entry in list(self._entries.values()):
            entry.cancel()
