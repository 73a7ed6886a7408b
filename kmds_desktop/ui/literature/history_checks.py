"""The search history window's lower half: known papers, the row overlap, documents and the report.

:class:`SetChecks` is a widget given the search history (a
:class:`~kmds_desktop.literature.strategy.workbench.SearchWorkbench`), the window's job runner and
where the known papers' text is kept (the literature session's
:class:`~kmds_desktop.app.literature.KnownPapersInput`). Each action is about a set the caller names;
what it has to say goes out through :attr:`SetChecks.status`. The check, the overlap, the documents
export and the report are the application layer's use-cases
(:func:`~kmds_desktop.app.strategy.check_known_papers`, :func:`~kmds_desktop.app.strategy.searches_overlap`,
:func:`~kmds_desktop.app.strategy.export_set_documents`, :func:`~kmds_desktop.app.strategy.write_set_report`),
the same ones ``kmds-desktop literature check | overlap | report`` call; each runs on a worker.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.app import last_folders
from kmds_desktop.app.literature import KnownPapersInput
from kmds_desktop.app.messages import describe_error
from kmds_desktop.app.presentation import KnownCheck, SearchWorkbench, known_check_text, plural
from kmds_desktop.app.strategy import (
    KnownPapersCheck,
    check_known_papers,
    export_set_documents,
    searches_overlap,
    write_set_report,
)
from kmds_desktop.ui.ask.markdown_render import to_html
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.shell import file_dialogs

KINDS = {"list": "history.list", "count": "history.count", "combine": "history.write",
         "check": "history.check", "report": "history.report", "rerun": "history.rerun"}

NO_DATABASE = "Open the literature database first (run a search in the literature panel)."


def simple_job(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` for :meth:`JobRunner.submit`: it takes no progress/cancel arguments (its other
    keyword arguments pass through)."""

    def run(*args: Any, progress: Any = None, cancel: Any = None, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return run


def _overlap_text(workbench: SearchWorkbench, number: int) -> str:
    """The row overlap of a search, or of the searches a combination was made from."""
    return searches_overlap(workbench.history, [number]).text()


class SetChecks(QGroupBox):
    """Known papers and the check view, with the overlap, documents and report of a set."""

    #: A line for the window's status (an action's result or why it did not run).
    status = Signal(str)

    def __init__(self, workbench: SearchWorkbench, jobs: JobRunner, known: KnownPapersInput,
                 parent: QWidget | None = None) -> None:
        super().__init__("Known papers", parent)
        self.workbench = workbench
        self.jobs = jobs
        self.known = known
        self.last_check: KnownCheck | None = None
        self._check_set: int | None = None
        self.last_report: Path | None = None
        self.last_documents: Path | None = None
        #: The set the check view's result (known papers or row overlap) is about (None: nothing shown).
        self.shown_for: int | None = None
        #: The set selected in the history, as the last selection change said (None: not told yet).
        self.selected: int | None = None
        #: The row overlap as the CLI prints it (Markdown), kept beside the rendered table.
        self.overlap_markdown = ""

        self.known_edit = QPlainTextEdit()
        self.known_edit.setPlaceholderText("Papers the strategy must find: PMIDs, DOIs or source ids "
                                           "(cf:139), one per line, or load a RIS / BibTeX file")
        self.known_edit.setMaximumHeight(90)
        self.known_edit.setPlainText(self.known.text)
        if self.known.file:
            self.known_edit.setPlaceholderText(f"Known papers from {Path(self.known.file).name}")
        self.known_edit.textChanged.connect(self._known_edited)
        self.load_known_button = QPushButton("Load RIS / BibTeX…")
        self.check_button = QPushButton("Check the selected set")
        self.load_known_button.clicked.connect(lambda _checked=False: self.load_known_file())
        # Rich text: the row overlap is a table (its Markdown pipes were unreadable as plain text).
        self.check_view = QTextEdit()
        self.check_view.setReadOnly(True)
        self.check_view.setPlaceholderText("Which known papers are in the database, which sets and rows "
                                           "find them, and why the misses are missed.")
        layout = QVBoxLayout(self)
        layout.addWidget(self.known_edit)
        buttons = QHBoxLayout()
        buttons.addWidget(self.load_known_button)
        buttons.addWidget(self.check_button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        layout.addWidget(self.check_view, 1)

    def _failed(self, what: str) -> Callable[[BaseException], None]:
        def show(exc: BaseException) -> None:
            self.status.emit(f"{what}: {describe_error(exc)}")

        return show

    def clear_result(self, number: int | None) -> bool:
        """Another set (``number``) is selected: a check or overlap of the one before goes. True when
        something was cleared."""
        self.selected = number
        if self.shown_for is None or number is None or number == self.shown_for:
            return False
        self.shown_for = None
        self.check_view.clear()
        self.overlap_markdown = ""
        return True

    # --- known papers -----------------------------------------------------------------------------
    @property
    def known_file(self) -> str:
        """The RIS / BibTeX file the known papers are read from ("" for the pasted text)."""
        return self.known.file

    @known_file.setter
    def known_file(self, path: str) -> None:
        self.known.file = path

    def _known_edited(self) -> None:
        self.known.text = self.known_edit.toPlainText()

    def load_known_file(self, path: str | None = None) -> None:
        if path is None:
            path = file_dialogs.open_file(self, last_folders.KNOWN_PAPERS, "Known papers",
                                          "References (*.ris *.bib *.txt);;All files (*)")
            if not path:
                return
        self.known_file = path
        self.known_edit.setPlainText("")
        self.known_edit.setPlaceholderText(f"Known papers from {Path(path).name}")
        self.status.emit(f"Known papers will be read from {Path(path).name}")

    def check_known(self, number: int) -> Any:
        """Check the known papers against set ``number``."""
        text = self.known_edit.toPlainText()
        if text.strip():
            self.known_file = ""
        if not text.strip() and not self.known_file:
            self.status.emit("Paste known papers or load a RIS / BibTeX file first.")
            return None
        if self.workbench.database is None:
            self.status.emit(NO_DATABASE)
            return None
        return self.jobs.submit(KINDS["check"], simple_job(check_known_papers), self.workbench,
                                file=self.known_file, text=text, sets=[number], strict=False,
                                policy="refuse", label="Checking known papers",
                                on_result=lambda answer: self._checked(number, answer),
                                on_error=self._failed("The known papers cannot be checked"))

    def _elsewhere(self, number: int, what: str) -> bool:
        """Whether another set than ``number`` was selected while its job ran: its result is not shown
        under that one (it read as the other set's); the status line says so."""
        if self.selected is None or self.selected == number:
            return False
        self.status.emit(f"The {what} of #{number} finished while #{self.selected} was selected: select "
                         f"#{number} and run it again to see it.")
        return True

    def _checked(self, number: int, answer: KnownPapersCheck) -> None:
        if self._elsewhere(number, "known-papers check"):
            return
        check = answer.check
        self.last_check = check
        self._check_set = number
        self.shown_for = number
        unread = answer.unread_report()
        text = known_check_text(check, whole=True)  # whole texts: the view wraps them
        self.check_view.setPlainText((f"{unread}\n\n" if unread else "") + text)
        recall = check.sets[-1].recall if check.sets else None
        last = check.sets[-1]
        skipped = answer.unread
        unread_note = f"; {plural(skipped, 'pasted item')} not read (listed in the check)" if skipped else ""
        self.status.emit(f"#{number} finds {last.found} of {last.in_database} known papers in the database"
                         + (f" (recall {recall:.1%})" if recall is not None else "") + unread_note)

    # --- overlap ----------------------------------------------------------------------------------
    def show_overlap(self, number: int) -> Any:
        """Compare the rows of set ``number`` (or of the searches a combination was made from)."""
        return self.jobs.submit(KINDS["check"], simple_job(_overlap_text), self.workbench, number,
                                policy="refuse", label="Comparing the rows", busy_cursor=False,
                                on_result=lambda text: self._show_overlap(text, number),
                                on_error=self._failed("No overlap to show"))

    def _show_overlap(self, text: str, number: int | None = None) -> None:
        """Show the overlap's Markdown tables as tables (cells ruled, numbers readable)."""
        if number is not None and self._elsewhere(number, "row overlap"):
            return
        self.overlap_markdown = text
        self.shown_for = number
        html = to_html(text).replace("<table>", '<table border="1" cellspacing="0" cellpadding="4">')
        self.check_view.setHtml(html)

    # --- documents --------------------------------------------------------------------------------
    def _save_path(self, path: str | None, title: str, suggested: str, filters: str,
                   suffixes: tuple[str, ...]) -> str | None:
        """``path``, or the one the user picks; without a known suffix the first is added."""
        if path is None:
            path = file_dialogs.save_file(self, last_folders.EXPORT, title, suggested, filters)
            if not path:
                return None
        return path if Path(path).suffix.lower() in suffixes else f"{path}{suffixes[0]}"

    def export_documents(self, number: int, path: str | None = None) -> Any:
        """Fetch set ``number``'s documents and write them as RIS, BibTeX or CSV (by the suffix)."""
        path = self._save_path(path, "Export documents", f"set-{number}.ris",
                               "RIS (*.ris);;BibTeX (*.bib);;CSV (*.csv)", (".ris", ".bib", ".csv"))
        if path is None:
            return None
        if self.workbench.database is None:
            self.status.emit(NO_DATABASE)
            return None
        return self.jobs.submit(KINDS["report"], simple_job(export_set_documents), self.workbench,
                                number, path, policy="queue", label="Exporting documents",
                                on_result=self._documents_done,
                                on_error=self._failed("The documents cannot be exported"))

    def _documents_done(self, written: tuple[Path, int]) -> None:
        path, count = written
        self.last_documents = Path(path)
        self.status.emit(f"{plural(count, 'document')} written to {path}")

    # --- the report -------------------------------------------------------------------------------
    def export_report(self, number: int, path: str | None = None) -> Any:
        """Write set ``number``'s search report (with the last check when it was about this set)."""
        path = self._save_path(path, "Export search report", f"search-report-{number}.md",
                               "Markdown (*.md);;JSON (*.json)", (".md", ".json"))
        if path is None:
            return None
        check = self.last_check if self._check_set == number else None
        return self.jobs.submit(KINDS["report"], simple_job(write_set_report), self.workbench, number,
                                check, path, policy="queue", label="Writing the report",
                                on_result=self._reported,
                                on_error=self._failed("The report cannot be written"))

    def _reported(self, path: Path) -> None:
        self.last_report = Path(path)
        self.status.emit(f"Report written to {path}")
