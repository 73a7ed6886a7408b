"""The search history window's lower half: known papers, the row overlap, documents and the report.

Part of :class:`~kmds_desktop.ui.literature.search_history.SearchHistoryDialog`. The check, the overlap, the
documents export and the report are the application layer's use-cases
(:func:`~kmds_desktop.app.strategy.check_known_papers`, :func:`~kmds_desktop.app.strategy.searches_overlap`,
:func:`~kmds_desktop.app.strategy.export_set_documents`, :func:`~kmds_desktop.app.strategy.write_set_report`),
the same ones ``kmds-desktop literature check | overlap | report`` call; each runs on a worker.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kmds_desktop.app import last_folders
from kmds_desktop.app.presentation import SearchWorkbench, known_check_text, plural
from kmds_desktop.app.strategy import (
    KnownPapersCheck,
    check_known_papers,
    export_set_documents,
    searches_overlap,
    write_set_report,
)
from kmds_desktop.ui.ask.markdown_render import to_html
from kmds_desktop.ui.shell import file_dialogs

if TYPE_CHECKING:
    from kmds_desktop.ui.literature.search_history import SearchHistoryDialog

KINDS = {"list": "history.list", "count": "history.count", "combine": "history.write",
         "check": "history.check", "report": "history.report", "rerun": "history.rerun"}


def simple_job(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` for :meth:`JobRunner.submit`: it takes no progress/cancel arguments (its other
    keyword arguments pass through)."""

    def run(*args: Any, progress: Any = None, cancel: Any = None, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return run


def _overlap_text(workbench: SearchWorkbench, number: int) -> str:
    """The row overlap of a search, or of the searches a combination was made from."""
    return searches_overlap(workbench.history, [number]).text()


class HistoryChecks:
    """Known papers, overlap and exports of the search history window (see the module docstring)."""

    # --- known papers -----------------------------------------------------------------------------
    @property
    def known_file(self: SearchHistoryDialog) -> str:
        """The RIS / BibTeX file the known papers are read from ("" for the pasted text)."""
        return self.known.file

    @known_file.setter
    def known_file(self: SearchHistoryDialog, path: str) -> None:
        self.known.file = path

    def _known_edited(self: SearchHistoryDialog) -> None:
        self.known.text = self.known_edit.toPlainText()

    def load_known_file(self: SearchHistoryDialog, path: str | None = None) -> None:
        if path is None:
            path = file_dialogs.open_file(self, last_folders.KNOWN_PAPERS, "Known papers",
                                          "References (*.ris *.bib *.txt);;All files (*)")
            if not path:
                return
        self.known_file = path
        self.known_edit.setPlainText("")
        self.known_edit.setPlaceholderText(f"Known papers from {Path(path).name}")
        self._set_status(f"Known papers will be read from {Path(path).name}")

    def check_known(self: SearchHistoryDialog) -> Any:
        saved = self._selected()
        if saved is None:
            return None
        text = self.known_edit.toPlainText()
        if text.strip():
            self.known_file = ""
        if not text.strip() and not self.known_file:
            self._set_status("Paste known papers or load a RIS / BibTeX file first.")
            return None
        if self._database() is None:
            self._set_status("Open the literature database first (run a search in the literature panel).")
            return None
        number = saved.number
        return self.jobs.submit(KINDS["check"], simple_job(check_known_papers), self.workbench,
                                file=self.known_file, text=text, sets=[number], strict=False,
                                policy="refuse", label="Checking known papers",
                                on_result=lambda answer: self._checked(number, answer),
                                on_error=self._failed("The known papers cannot be checked"))

    def _checked(self: SearchHistoryDialog, number: int, answer: KnownPapersCheck) -> None:
        check = answer.check
        self.last_check = check
        self._check_set = number
        self._shown_for = number
        unread = answer.unread_report()
        text = known_check_text(check, whole=True)  # whole texts: the view wraps them
        self.check_view.setPlainText((f"{unread}\n\n" if unread else "") + text)
        recall = check.sets[-1].recall if check.sets else None
        last = check.sets[-1]
        skipped = answer.unread
        unread_note = f"; {plural(skipped, 'pasted item')} not read (listed in the check)" if skipped else ""
        self._set_status(f"#{number} finds {last.found} of {last.in_database} known papers in the database"
                         + (f" (recall {recall:.1%})" if recall is not None else "") + unread_note)

    # --- overlap ----------------------------------------------------------------------------------
    def show_overlap(self: SearchHistoryDialog) -> Any:
        saved = self._selected()
        if saved is None:
            return None
        return self.jobs.submit(KINDS["check"], simple_job(_overlap_text), self.workbench, saved.number,
                                policy="refuse", label="Comparing the rows", busy_cursor=False,
                                on_result=lambda text, n=saved.number: self._show_overlap(text, n),
                                on_error=self._failed("No overlap to show"))

    def _show_overlap(self: SearchHistoryDialog, text: str, number: int | None = None) -> None:
        """Show the overlap's Markdown tables as tables (cells ruled, numbers readable)."""
        self.overlap_markdown = text
        self._shown_for = number
        html = to_html(text).replace("<table>", '<table border="1" cellspacing="0" cellpadding="4">')
        self.check_view.setHtml(html)

    # --- documents --------------------------------------------------------------------------------
    def _save_path(self: SearchHistoryDialog, path: str | None, title: str, suggested: str, filters: str,
                   suffixes: tuple[str, ...]) -> str | None:
        """``path``, or the one the user picks; without a known suffix the first is added."""
        if path is None:
            path = file_dialogs.save_file(self, last_folders.EXPORT, title, suggested, filters)
            if not path:
                return None
        return path if Path(path).suffix.lower() in suffixes else f"{path}{suffixes[0]}"

    def export_documents(self: SearchHistoryDialog, path: str | None = None) -> Any:
        """Fetch the selected set's documents and write them as RIS, BibTeX or CSV (by the suffix)."""
        saved = self._selected()
        if saved is None:
            return None
        path = self._save_path(path, "Export documents", f"set-{saved.number}.ris",
                               "RIS (*.ris);;BibTeX (*.bib);;CSV (*.csv)", (".ris", ".bib", ".csv"))
        if path is None:
            return None
        if self._database() is None:
            self._set_status("Open the literature database first (run a search in the literature panel).")
            return None
        return self.jobs.submit(KINDS["report"], simple_job(export_set_documents), self.workbench,
                                saved.number, path, policy="queue", label="Exporting documents",
                                on_result=self._documents_done,
                                on_error=self._failed("The documents cannot be exported"))

    def _documents_done(self: SearchHistoryDialog, written: tuple[Path, int]) -> None:
        path, count = written
        self.last_documents = Path(path)
        self._set_status(f"{plural(count, 'document')} written to {path}")

    # --- the report -------------------------------------------------------------------------------
    def export_report(self: SearchHistoryDialog, path: str | None = None) -> Any:
        saved = self._selected()
        if saved is None:
            return None
        path = self._save_path(path, "Export search report", f"search-report-{saved.number}.md",
                               "Markdown (*.md);;JSON (*.json)", (".md", ".json"))
        if path is None:
            return None
        check = self.last_check if self._check_set == saved.number else None
        return self.jobs.submit(KINDS["report"], simple_job(write_set_report), self.workbench, saved.number,
                                check, path, policy="queue", label="Writing the report",
                                on_result=self._reported,
                                on_error=self._failed("The report cannot be written"))

    def _reported(self: SearchHistoryDialog, path: Path) -> None:
        self.last_report = Path(path)
        self._set_status(f"Report written to {path}")

