"""The screening window: one record at a time, decided by key or button, on a :class:`ScreeningSession`.

Keys: I, E, M decide (as the buttons say); 1–9 only choose the exclusion reason E uses; U or Ctrl+Z undo
the last decisions one by one. No single key excludes a record the user has not chosen to exclude.

Why a view only: the window and ``kmds-desktop literature screen`` must mean the same by every decision,
so this module renders :meth:`ScreeningSession.view`, its progress, stopping report and PRISMA flow, and
forwards every key and click to the session; it decides nothing itself. The session announces its changes
(:mod:`kmds_desktop.app.events`; a training's scores from the training's thread); they reach the GUI thread
through one signal (queued when they come from another thread), so the next record is drawn at once and
never waits for a training. The training itself (:meth:`ScreeningSession.train`) runs on the one job runner
when the session asks for it (``TRAINING_WANTED``).
"""

from __future__ import annotations

import contextlib
import html
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QGridLayout,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QSplitter,
    QTabWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.app import last_folders
from kmds_desktop.app import screening as events
from kmds_desktop.app.events import Change
from kmds_desktop.app.screening import DECISION_ACTIONS, KEYS, ScreeningSession
from kmds_desktop.app.screening_start import close_session
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.screening.decided import DecidedList
from kmds_desktop.ui.screening.scores_agreement import AgreementPage, ScoresPage
from kmds_desktop.ui.screening.stopping_flow import FlowPage, StoppingPage
from kmds_desktop.ui.screening.widgets import EXPORTS, SHORTCUTS, OrderBar, record_html, split_keywords
from kmds_desktop.ui.shell import file_dialogs


class _Events(QObject):
    """Carries the session's events to the GUI thread (a queued call when sent from another thread)."""

    arrived = Signal(object)  # a Change


class ScreeningWindow(QWidget):
    """A window over one screening session (see the module docstring)."""

    def __init__(self, session: ScreeningSession | None = None, *, jobs: Any = None,
                 parent: QWidget | None = None, score_backend: Any = None, encoder: Any = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        # a window on its own (tests, scripts) trains on a runner of its own, and its Scores page, given
        # no runner, scores in the foreground; the app passes its runner, so both run on workers
        self._own_jobs = jobs is None
        self.jobs = JobRunner(self) if jobs is None else jobs
        self._trainings = 0
        #: The key of the record on screen, as last rendered (what a decision key decides).
        self._shown_key: tuple[str, str] | None = None
        self.scores = ScoresPage(jobs=jobs, settings_fn=score_backend, encoder=encoder)
        self.agreement = AgreementPage()
        self.session: ScreeningSession | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._closed = False
        self._events = _Events(self)
        self._events.arrived.connect(self._on_event)
        self.setWindowTitle("Screening")
        self.resize(1400, 900)
        self._build()
        for seq, key in SHORTCUTS.items():
            shortcut = QShortcut(QKeySequence(seq), self)
            shortcut.activated.connect(lambda key=key: self.press(key))
        if session is not None:
            self.set_session(session)
        else:
            self.record_view.setHtml("<p>Reading the records…</p>")
            self._set_enabled(False)

    # -- layout ------------------------------------------------------------------------------------------
    def _build(self) -> None:
        self.position_label = QLabel()
        self.position_label.setStyleSheet("font-weight: bold")
        self.order_bar = OrderBar()  # the order, and whether the model scores feed the model
        self.order_combo, self.scores_check = self.order_bar.combo, self.order_bar.scores_check
        self.export_button = QPushButton("Export included")
        menu = QMenu(self.export_button)
        for text, fmt, _suffix in EXPORTS:
            menu.addAction(f"Included records as {text}", lambda fmt=fmt: self.export_included(fmt))
        self.export_button.setMenu(menu)
        top = QHBoxLayout()
        top.addWidget(self.position_label, 1)
        top.addWidget(self.order_bar)
        top.addWidget(self.export_button)

        self.tabs = QTabWidget()
        self.tabs.addTab(self._screen_tab(), "Screen")
        self.stopping = StoppingPage()
        self.stopping.changed.connect(self._render_all)
        self.flow = FlowPage()
        self.tabs.addTab(self.stopping, "Stopping")
        self.tabs.addTab(self.flow, "PRISMA flow")
        self.tabs.addTab(self.scores, "Scores")
        self.tabs.addTab(self.agreement, "Two screeners")
        self.tabs.currentChanged.connect(lambda _i: self._refresh_pages())
        self.progress_label = QLabel()
        self.progress_label.setStyleSheet("font-size: 14px; padding: 4px")
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.order_bar.check_label)  # full width under the order, shown when it speaks
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self.progress_label)

    def _screen_tab(self) -> QWidget:
        self.decided_list = DecidedList()
        self.decided_label = self.decided_list.label
        self.decided_list.chosen.connect(self._go_to)
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addWidget(self.decided_label)
        lv.addWidget(self.decided_list, 1)

        self.record_view = QTextBrowser()
        self.record_view.setOpenExternalLinks(True)
        self.ordered_label = QLabel()
        self.ordered_label.setWordWrap(True)
        self.why_button = QPushButton("Why ranked high?")
        self.why_button.setCheckable(True)
        self.why_button.toggled.connect(lambda _on: self._render_scores())
        self.why_label = QLabel()
        self.why_label.setWordWrap(True)
        self.marks_check = QCheckBox("Highlight")
        self.marks_check.setChecked(True)
        self.marks_check.setToolTip(
            "Blue: the search rows' terms; green: include keywords; red: exclude keywords"
        )
        self.marks_check.toggled.connect(lambda _on: self._render_record())
        self.include_words = QLineEdit()
        self.include_words.setPlaceholderText("include keywords (green), comma separated")
        self.exclude_words = QLineEdit()
        self.exclude_words.setPlaceholderText("exclude keywords (red), comma separated")
        for edit in (self.include_words, self.exclude_words):
            edit.editingFinished.connect(self._keywords_changed)
        marks = QHBoxLayout()
        marks.addWidget(self.marks_check)
        # Labelled: once typed, a field's placeholder no longer says which colour it is.
        marks.addWidget(QLabel("<span style='background:#c8f0c8'>&nbsp;Include words:&nbsp;</span>"))
        marks.addWidget(self.include_words, 1)
        marks.addWidget(QLabel("<span style='background:#f8c8c8'>&nbsp;Exclude words:&nbsp;</span>"))
        marks.addWidget(self.exclude_words, 1)
        why = QHBoxLayout()
        why.addWidget(self.ordered_label, 1)
        why.addWidget(self.why_button)
        centre = QWidget()
        cv = QVBoxLayout(centre)
        cv.setContentsMargins(0, 0, 0, 0)
        cv.addLayout(marks)
        cv.addWidget(self.record_view, 1)
        cv.addLayout(why)
        cv.addWidget(self.why_label)

        self.decision_label = QLabel()
        self.decision_label.setWordWrap(True)
        self.include_button = QPushButton("Include (I)")
        self.exclude_button = QPushButton("Exclude (E)")
        self.maybe_button = QPushButton("Maybe (M)")
        self.include_button.setStyleSheet("background: #c8f0c8; padding: 8px")
        self.exclude_button.setStyleSheet("background: #f8c8c8; padding: 8px")
        self.maybe_button.setStyleSheet("background: #f0e6b8; padding: 8px")
        self.include_button.clicked.connect(lambda: self._decide("include"))
        self.exclude_button.clicked.connect(lambda: self._decide("exclude"))
        self.maybe_button.clicked.connect(lambda: self._decide("maybe"))
        self.reasons_list = QListWidget()
        self.reasons_list.setToolTip("Keys 1–9 choose a reason (they decide nothing); E and the Exclude "
                                     "button exclude with the reason chosen here")
        self.reasons_list.currentItemChanged.connect(self._reason_chosen)
        self.edit_reasons_button = QPushButton("Edit reasons…")
        self.edit_reasons_button.clicked.connect(self.edit_reasons)
        self.note_edit = QLineEdit()
        self.note_edit.setPlaceholderText("note (saved with the decision)")
        self.undo_button = QPushButton("Undo (U, Ctrl+Z)")
        self.undo_button.setToolTip("Take back the last decision; again for the one before. The record "
                                    "comes back on screen, and the records after it in their order")
        self.back_button = QPushButton("◀ Back (←)")
        self.forward_button = QPushButton("Forward (→) ▶")
        self.undo_button.clicked.connect(lambda: self.press("u"))
        self.back_button.clicked.connect(lambda: self.press("left"))
        self.forward_button.clicked.connect(lambda: self.press("right"))
        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        rv.addWidget(self.decision_label)
        rv.addWidget(self.include_button)
        rv.addWidget(self.exclude_button)
        rv.addWidget(self.maybe_button)
        rv.addWidget(QLabel("Exclusion reason (keys 1–9 choose):"))
        rv.addWidget(self.reasons_list, 1)
        rv.addWidget(self.edit_reasons_button)
        rv.addWidget(QLabel("Note:"))
        rv.addWidget(self.note_edit)
        nav = QGridLayout()
        nav.addWidget(self.back_button, 0, 0)
        nav.addWidget(self.forward_button, 0, 1)
        nav.addWidget(self.undo_button, 1, 0, 1, 2)
        rv.addLayout(nav)

        split = QSplitter(Qt.Orientation.Horizontal)
        for w, stretch in ((left, 1), (centre, 4), (right, 1)):
            split.addWidget(w)
            split.setStretchFactor(split.count() - 1, stretch)
        split.setSizes([300, 900, 300])
        return split

    # -- the session -------------------------------------------------------------------------------------
    def set_session(self, session: ScreeningSession) -> None:
        """Show ``session`` (from the worker that opened it); a window closed meanwhile closes it."""
        if self._closed:
            self._close_session(session)
            return
        self.session = session
        self._unsubscribe = session.subscribe(self._events.arrived.emit)
        self.setWindowTitle(f"Screening — {session.review.name}")
        if session.training_wanted:  # asked for before anyone listened (opened on a worker)
            self._train()
        self.order_bar.set_session(session)
        self.stopping.set_session(session)
        self.flow.session = self.scores.session = self.agreement.session = session
        words = session.highlight_words()
        self.include_words.setText(", ".join(words["include"]))
        self.exclude_words.setText(", ".join(words["exclude"]))
        self._set_enabled(True)
        self._render_all()

    def show_error(self, exc: BaseException) -> None:
        self.record_view.setHtml(f"<p><b>Cannot open the screening:</b> {exc}</p>")

    def _set_enabled(self, on: bool) -> None:
        for w in (self.include_button, self.exclude_button, self.maybe_button, self.undo_button,
                  self.back_button, self.forward_button, self.export_button, self.order_bar,
                  self.edit_reasons_button, self.stopping, self.flow):
            w.setEnabled(on)

    def _train(self) -> None:
        """Run the session's training job at once, each request under its own kind: one finding another
        running leaves it the work (:meth:`ScreeningSession.train`), and none waits on the GUI thread to
        start (a test or script waiting for the training there would wait for ever)."""
        if (session := self.session) is not None:
            self._trainings += 1
            self.jobs.submit(f"screening.train:{id(session):x}:{self._trainings}", session.train,
                             label="Learning the screening order", busy_cursor=False)

    def _on_event(self, change: Change) -> None:
        event = change.kind
        if self.session is None:
            return
        if event == events.TRAINING_WANTED:
            self._train()
        elif event == events.SCORES_TRAINED:
            self._render_scores()
        elif event == events.MODEL_SCORES_CHANGED:
            self._render_scores()
            self.order_bar.render()
            if self.tabs.currentWidget() is self.scores:
                self.scores.render()
        elif event == events.RECORD_SHOWN:
            self._render_record(new=True)
        elif event == events.REASON_CHOSEN:
            self._render_reasons(self.session.chosen_reason())
        else:
            self._render_all()

    # -- actions: each goes to the session ----------------------------------------------------------------
    def press(self, key: str) -> bool:
        """A key, as the session knows it; a decision key (I, E, M) decides with the note typed and the
        reason chosen; a number key only chooses a reason (the session's :meth:`~ScreeningSession.press`)."""
        session = self.session
        if session is None:
            return False
        if KEYS.get(key) in DECISION_ACTIONS:
            return self._decide(KEYS[key])
        return session.press(key)

    def _decide(self, decision: str, reason: str = "") -> bool:
        session = self.session
        if session is None or session.current is None:
            return False
        if decision == "exclude" and not reason:
            item = self.reasons_list.currentItem()
            reason = str(item.data(Qt.ItemDataRole.UserRole)) if item is not None else session.chosen_reason()
        # the record this view shows: the queue may have moved on from a worker since it was rendered
        session.decide(decision, reason=reason, note=self.note_edit.text().strip(), shown=self._shown_key)
        return True

    def _reason_chosen(self, item: QListWidgetItem | None, _previous: QListWidgetItem | None = None) -> None:
        """A reason clicked or reached with the arrow keys becomes the one E and Exclude use."""
        if self.session is not None and item is not None:
            self.session.choose_reason(str(item.data(Qt.ItemDataRole.UserRole)))

    def _go_to(self, key: tuple[str, str]) -> None:
        if self.session is not None:
            self.session.go_to(key)

    def _keywords_changed(self) -> None:
        session = self.session
        if session is None:
            return
        session.set_highlight_words(split_keywords(self.include_words.text()),
                                    split_keywords(self.exclude_words.text()))
        self._render_record()

    def edit_reasons(self, _checked: bool = False, reasons: Sequence[str] | None = None) -> None:
        """Edit the review's exclusion reasons (one a line); decisions keep the reason they were given."""
        if self.session is None:
            return
        if reasons is None:
            text, ok = QInputDialog.getMultiLineText(
                self, "Exclusion reasons", "One reason a line (keys 1–9 choose the first nine):",
                "\n".join(self.session.review.reasons),
            )
            if not ok:
                return
            reasons = [line.strip() for line in text.splitlines() if line.strip()]
        self.session.set_reasons(reasons)
        self._render_record()

    def export_included(self, fmt: str, path: str | Path | None = None) -> Path | None:
        """Write the included records with their decisions (the session's exports)."""
        if self.session is None:
            return None
        suffix = next(s for _t, f, s in EXPORTS if f == fmt)
        path = path or file_dialogs.save_file(self, last_folders.EXPORT, "Export included records",
                                              f"included{suffix}", f"{fmt} (*{suffix})")
        if not path:
            return None
        written = self.session.export(path, fmt, "included")
        self.progress_label.setText(f"Included records written to {written}")
        return written

    # -- rendering -----------------------------------------------------------------------------------------
    def _render_all(self) -> None:
        self._render_record(new=True)
        if self.session is not None:
            self.decided_list.show_decided(self.session)
        self.order_bar.render()  # a decision may pass or fail the scores' check
        self._refresh_pages()

    def _refresh_pages(self) -> None:
        if self.session is None:
            return
        self.progress_label.setText(self.session.progress().line())
        page = self.tabs.currentWidget()
        if page in (self.stopping, self.flow, self.scores, self.agreement):
            page.render()

    def _render_record(self, new: bool = False) -> None:
        session = self.session
        if session is None:
            return
        self.progress_label.setText(session.progress().line())
        view = session.view()
        self._shown_key = None if view is None else view.record.key
        # The reason E and the Exclude button will use (a decided record's own reason is in its label).
        self._render_reasons(session.chosen_reason())
        can_decide = view is not None
        for w in (self.include_button, self.exclude_button, self.maybe_button):
            w.setEnabled(can_decide)
        self.back_button.setEnabled(bool(session.decided_keys()))
        self.forward_button.setEnabled(view is not None and view.decision is not None)
        if view is None:
            self.position_label.setText("Every record is screened")
            self.record_view.setHtml("<h2>Every record is screened.</h2><p>Go back to a decided record to "
                                     "change it, or export the included records.</p>")
            self.decision_label.setText("")
            self._render_scores()
            return
        words = session.highlight_words()
        self.record_view.setHtml(record_html(view.record, include=words["include"], exclude=words["exclude"],
                                             marks_on=self.marks_check.isChecked()))
        self.position_label.setText(view.position[:1].upper() + view.position[1:])
        d = view.decision
        if d is None:
            self.decision_label.setText("Not decided yet")
        else:
            detail = f" — {d.reason}" if d.reason else ""
            self.decision_label.setText(f"<b>Decided: {d.decision}{detail}</b>"
                                        + (f"<br>Note: {d.note}" if d.note else "")
                                        + "<br>Decide again to change it")
        if new:
            self.note_edit.setText(d.note if d is not None else "")
        self._render_scores()
        self.decided_list.select(session)

    def _render_scores(self) -> None:
        """The score, what chose the record and, on request, its top terms (a training may just have
        finished: the record on screen stays, only these lines change)."""
        session = self.session
        view = session.view() if session is not None else None
        if view is None:
            self.ordered_label.setText("")
            self.why_label.setText("")
            return
        how = view.ordered_by or "order"
        rated = "".join(f"<br>{html.escape(s.text())}" for s in session.model_scores(view.record.key))
        if view.score is None:
            self.ordered_label.setText(f"Chosen by {how}{rated}")
        elif how == "model score":
            self.ordered_label.setText(f"Chosen by model score ({view.score:.2f}){rated}")
        else:
            self.ordered_label.setText(f"Chosen by {how} · model score {view.score:.2f}{rated}")
        if not self.why_button.isChecked():
            self.why_label.setText("")
        elif view.why:
            # The contributions are small numbers whose scale says little; their order says why.
            self.why_label.setText("Ranked high for these terms, strongest first: "
                                   + ", ".join(t for t, _w in view.why))
            self.why_label.setToolTip("\n".join(f"{t}: {w:.4f}" for t, w in view.why))
        elif view.score is not None:
            self.why_label.setText("No term of this record adds to its score: the model ranks it low.")
        else:
            self.why_label.setText("No model yet: it trains after the first include and the first exclude.")

    def _render_reasons(self, chosen: str) -> None:
        """The reasons with their keys; the one E and the Exclude button use is selected and named.
        Signals stay blocked: selecting the session's own choice is no new choice (and the list is not
        rebuilt under its own signal when the user picks a reason)."""
        reasons = self.session.review.reasons if self.session is not None else []
        listed = self.reasons_list
        shown = [listed.item(row).data(Qt.ItemDataRole.UserRole) for row in range(listed.count())]
        self.reasons_list.blockSignals(True)
        try:
            if shown != list(reasons):
                self.reasons_list.clear()
                for n, reason in enumerate(reasons, start=1):
                    item = QListWidgetItem(f"{n}  {reason}" if n <= 9 else f"    {reason}")
                    item.setData(Qt.ItemDataRole.UserRole, reason)
                    self.reasons_list.addItem(item)
            row = reasons.index(chosen) if chosen in reasons else -1
            self.reasons_list.setCurrentRow(row)
        finally:
            self.reasons_list.blockSignals(False)
        self.exclude_button.setText(f"Exclude (E): {chosen}" if chosen else "Exclude (E)")

    # -- closing -------------------------------------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        self._closed = True
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self.session is not None:
            self._close_session(self.session)
            self.session = None
        super().closeEvent(event)

    def _close_session(self, session: ScreeningSession) -> None:
        """Stop the session's training off the GUI thread (a training can take seconds to finish); a
        window's own runner stops first (its training ends with it)."""
        if self._own_jobs:
            self.jobs.shutdown()
        if self._own_jobs or self.jobs.submit(
            "screening.close", close_session, session, pass_progress=False, policy="queue", busy_cursor=False
        ) is None:
            with contextlib.suppress(Exception):
                close_session(session)
