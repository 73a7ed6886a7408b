"""The screening window's Scores and Two screeners pages.

Why pages of their own: scoring by LLM is slow and optional, and comparing with another reviewer is a
step of its own; each page renders one part of the session (its cached model scores, its agreement
with an imported reviewer) and forwards its buttons to the app layer. Nothing here decides a record.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.app import last_folders
from kmds_desktop.app.screening import ScreeningSession
from kmds_desktop.app.screening_scores import (
    score_by_similarity,
    score_undecided,
    scoring_backend,
)
from kmds_desktop.ui.shell import file_dialogs


def _table(headers: list[str]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(headers)
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    table.setWordWrap(True)
    table.verticalHeader().setVisible(False)
    table.horizontalHeader().setStretchLastSection(True)
    table.setTextElideMode(Qt.TextElideMode.ElideNone)
    return table


class _Number(QTableWidgetItem):
    """A cell that sorts by its number (a score), empty cells last."""

    def __init__(self, value: float | None, text: str = "") -> None:
        super().__init__(text if text else ("" if value is None else f"{value:g}"))
        self.value = -1.0 if value is None else float(value)

    def __lt__(self, other: QTableWidgetItem) -> bool:
        return self.value < getattr(other, "value", -1.0)


class ScoresPage(QWidget):
    """Each record's 1–5 scores with their reasons (or the note of a reply without one), and the
    buttons that score the undecided records: by the configured LLMs, or by embedding similarity."""

    def __init__(self, *, jobs: Any = None, settings_fn: Callable[[], Any] | None = None,
                 encoder: Callable[..., Any] | None = None) -> None:
        super().__init__()
        self.session: ScreeningSession | None = None
        self.jobs = jobs
        #: ``() -> (backend, model names)``; default: the app's settings (query generation's models).
        self.backend_fn = settings_fn or scoring_backend
        self.encoder = encoder
        self.job: Any = None
        self.llm_button = QPushButton("Score undecided with the LLMs")
        self.llm_button.setToolTip("Each configured LLM scores each undecided record 1–5 "
                                   "(a few decided records first, to check its scores against your "
                                   "decisions); scores are cached, so a second run asks only what is missing")
        self.similarity_button = QPushButton("Score by similarity (no LLM)")
        self.similarity_button.setToolTip("The embedding model's similarity between record and question, "
                                          "as 1–5 — not a reader's judgement")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.llm_button.clicked.connect(lambda: self.score_with_llms())
        self.similarity_button.clicked.connect(lambda: self.score_by_similarity())
        self.cancel_button.clicked.connect(self.cancel)
        self.status = QLabel("Scores never decide: they are a column, and “Order: Model score” sorts "
                             "by them.")
        self.status.setWordWrap(True)
        self.table = _table(["Record", "Decision", "Mean score", "Scores and reasons"])
        self.table.setSortingEnabled(True)
        bar = QHBoxLayout()
        for w in (self.llm_button, self.similarity_button, self.cancel_button):
            bar.addWidget(w)
        bar.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.status)
        layout.addWidget(self.table, 1)

    def render(self) -> None:
        session = self.session
        if session is None:
            return
        self.table.setSortingEnabled(False)
        self.table.setRowCount(len(session.records))
        means, _kind = session.score_column()  # the LLMs' mean where they scored, else the similarity's
        for row, rec in enumerate(session.records):
            scores = session.model_scores(rec.key)
            d = session.decisions.get(rec.key)
            self.table.setItem(row, 0, QTableWidgetItem(rec.title or rec.external_id))
            self.table.setItem(row, 1, QTableWidgetItem(d.decision if d else ""))
            self.table.setItem(row, 2, _Number(means[row]))
            self.table.setItem(row, 3, QTableWidgetItem("\n".join(s.text() for s in scores)))
        self.table.setSortingEnabled(True)
        self.table.sortItems(2, Qt.SortOrder.DescendingOrder)
        self.table.setColumnWidth(0, 520)
        self.table.setColumnWidth(1, 80)
        self.table.setColumnWidth(2, 90)
        self.table.resizeRowsToContents()
        # Again once laid out: the stretched last column's width decides how its reasons wrap.
        QTimer.singleShot(0, self.table.resizeRowsToContents)

    def _running(self, on: bool) -> None:
        self.llm_button.setEnabled(not on)
        self.similarity_button.setEnabled(not on)
        self.cancel_button.setEnabled(on)

    def _finished(self, summary: Any) -> None:
        self._running(False)
        self.job = None
        self.status.setText(summary.line())
        self.render()

    def _failed(self, exc: BaseException) -> None:
        self._running(False)
        self.job = None
        self.status.setText(f"Scoring failed: {exc}")

    def score_with_llms(self) -> Any:
        """Score the undecided records with every configured LLM (on a worker when there is a runner)."""
        if self.session is None:
            return None
        backend, models = self.backend_fn()
        if backend is None or not models:
            self.status.setText("No LLM is configured (Preferences → Query generation models): "
                                "use “Score by similarity (no LLM)” instead.")
            return None
        self._running(True)
        self.status.setText(f"Scoring with {', '.join(models)}…")
        if self.jobs is None:
            try:
                summary = score_undecided(self.session, backend, models, progress=self._progress)
            except Exception as exc:  # noqa: BLE001 - shown on the page
                self._failed(exc)
                return None
            self._finished(summary)
            return summary
        self.job = self.jobs.submit(
            "screening.score", score_undecided, self.session, backend, models, policy="refuse",
            label="Scoring records", busy_cursor=False, on_result=self._finished, on_error=self._failed,
            on_progress=lambda done, total, msg: self._progress(done, total or 0, msg),
            on_cancelled=lambda: self._finished_cancelled(),
        )
        return self.job

    def _finished_cancelled(self) -> None:
        self._running(False)
        self.job = None
        self.status.setText("Scoring cancelled: the scores so far are kept; scoring again goes on "
                            "from there.")
        self.render()

    def _progress(self, done: int, total: int, message: str) -> None:
        self.status.setText(f"Scoring {done:,} of {total:,}: {message}")

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()

    def score_by_similarity(self) -> Any:
        """Score every record by its similarity to the question (on a worker when there is a runner: it
        may embed the records that have no vector yet, through the index process)."""
        if self.session is None:
            return None
        if self.jobs is None:
            try:
                summary = score_by_similarity(self.session, self.encoder)
            except Exception as exc:  # noqa: BLE001 - e.g. no vectors: shown on the page
                self._failed(exc)
                return None
            self._finished(summary)
            return summary
        self._running(True)
        self.status.setText("Scoring by similarity to the question…")
        self.job = self.jobs.submit(
            "screening.score", score_by_similarity, self.session, self.encoder, policy="refuse",
            pass_progress=False, label="Scoring records by similarity", busy_cursor=False,
            on_result=self._finished, on_error=self._failed, on_cancelled=lambda: self._finished_cancelled(),
        )
        return self.job


class AgreementPage(QWidget):
    """Two screeners: export my decisions, import another reviewer's, their disagreements and kappa."""

    def __init__(self) -> None:
        super().__init__()
        self.session: ScreeningSession | None = None
        self.export_button = QPushButton("Export my decisions…")
        self.import_button = QPushButton("Import another reviewer's decisions…")
        self.export_button.clicked.connect(lambda: self.export_decisions())
        self.import_button.clicked.connect(lambda: self.import_decisions())
        self.reviewer_combo = QComboBox()
        self.reviewer_combo.activated.connect(lambda _i: self.render())
        self.report_label = QLabel("Import a file another reviewer exported to compare decisions.")
        self.report_label.setWordWrap(True)
        self.kappa_label = QLabel()
        self.kappa_label.setStyleSheet("font-size: 14px; font-weight: bold")
        self.kappa_label.setWordWrap(True)
        self.table = _table(["Record", "Mine", "Theirs"])
        bar = QHBoxLayout()
        for w in (self.export_button, self.import_button, QLabel("Compare with:"), self.reviewer_combo):
            bar.addWidget(w)
        bar.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.report_label)
        layout.addWidget(self.kappa_label)
        layout.addWidget(self.table, 1)

    def export_decisions(self, path: str | Path | None = None, reviewer: str = "me") -> Path | None:
        if self.session is None:
            return None
        if path is None:
            path = file_dialogs.save_file(self, last_folders.SCREENING, "Export my decisions",
                                          "decisions.csv", "CSV (*.csv)")
            if not path:
                return None
        written = self.session.export_decisions(path, reviewer)
        self.report_label.setText(f"Your decisions were written to {written}")
        return written

    def import_decisions(self, path: str | Path | None = None) -> Any:
        if self.session is None:
            return None
        if path is None:
            path = file_dialogs.open_file(self, last_folders.SCREENING, "Import decisions",
                                          "CSV (*.csv);;All files (*)")
            if not path:
                return None
        try:
            report = self.session.import_decisions(path)
        except Exception as exc:  # noqa: BLE001 - an unreadable file: said on the page
            self.report_label.setText(f"Cannot import {path}: {exc}")
            return None
        lines = [report.summary() + "."]
        lines += [f"line {n}: {why}" for n, why in report.broken[:20]]
        self.report_label.setText("<br>".join(lines))
        self.render(report.reviewer)
        return report

    def render(self, reviewer: str | None = None) -> None:
        session = self.session
        if session is None:
            return
        others = session.store.other_reviewers(session.review.id)
        current = reviewer or self.reviewer_combo.currentText()
        self.reviewer_combo.clear()
        self.reviewer_combo.addItems(others)
        if current in others:
            self.reviewer_combo.setCurrentText(current)
        who = self.reviewer_combo.currentText()
        if not who:
            self.kappa_label.setText("")
            self.table.setRowCount(0)
            return
        result = session.agreement(who)
        self.kappa_label.setText(f"With {who}: {result.summary(who)}")
        titles = {r.key: r.title for r in session.records}
        self.table.setRowCount(len(result.disagreements))
        for row, (key, mine, theirs) in enumerate(result.disagreements):
            self.table.setItem(row, 0, QTableWidgetItem(titles.get(key, f"{key[0]}:{key[1]}")))
            self.table.setItem(row, 1, QTableWidgetItem(mine))
            self.table.setItem(row, 2, QTableWidgetItem(theirs))
        self.table.setColumnWidth(0, 700)
        self.table.resizeRowsToContents()
