"""Import, embedding, the fast search index and exports of the literature view, on workers.

A part given the session, the window's job runner and the database link. Each action runs the
application layer's function on a worker (which files import, what is embedded and how documents are
written are :mod:`kmds_desktop.app.literature_data`'s and the export module's rules); a file dialog
opens over the ``owner`` widget the caller gives. After an import it reads the database's status again
through the link (the session keeps the counts) and, when the settings say so, embeds the new
documents. What it has to say goes out as signals.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from kmds_desktop import __version__
from kmds_desktop.app import last_folders
from kmds_desktop.app import literature_data as lj
from kmds_desktop.app import presentation as export_mod
from kmds_desktop.app.literature import LiteratureSession
from kmds_desktop.app.messages import user_message
from kmds_desktop.app.search_log import write_search_log
from kmds_desktop.ui.jobs.job import Job
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.literature.database import KINDS, DatabaseLink
from kmds_desktop.ui.shell import file_dialogs

LITERATURE_FILES = "Literature files (*.xml *.xml.gz *.jsonl *.jsonl.gz *.json *.ndjson);;All files (*)"


class LiteratureFiles(QObject):
    """Import, embedding, the fast search index and exports (see the module docstring)."""

    message = Signal(str, str)  # level, text
    progress = Signal(str)
    #: An import or an embedding run started or ended (what the buttons offer may change).
    state_changed = Signal()

    def __init__(self, session: LiteratureSession, jobs: JobRunner, link: DatabaseLink,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.jobs = jobs
        self.link = link
        self._import_job: Job | None = None
        self._embed_job: Job | None = None
        self._embed_again = False  # an import finished while embedding ran: one more run after it
        self._topk_job: Job | None = None

    @property
    def importing(self) -> bool:
        """An import is under way."""
        return self._import_job is not None and not self._import_job.done

    def cancel_import(self) -> None:
        """Cancel the running import (files finished before it are kept)."""
        if self._import_job is not None and self.importing:
            self._import_job.cancel()

    def _watch(self, job: Job | None) -> Job | None:
        if job is not None:
            for signal in (job.result, job.error, job.cancelled, job.finished):
                signal.connect(lambda *_args: self.state_changed.emit())
        self.state_changed.emit()
        return job

    # --- import -----------------------------------------------------------------------------------
    def import_files(self, paths: Sequence[str | Path], *, busy: bool = False) -> Job | None:
        """Import MEDLINE/PubMed XML, JSONL or PubMedQA JSON files, or folders of them (the PubMed
        baseline: name order, resumable, one progress line), on a worker (progress, Cancel). ``busy``:
        the caller's search or import is running (one at a time): nothing starts, the message says so."""
        files = [str(p) for p in paths]
        wrong = [p for p in files if not lj.importable(p)]
        files = [p for p in files if lj.importable(p)]
        if wrong:
            self.message.emit(
                "warning",
                f"Not a literature file (expected {', '.join(lj.IMPORT_SUFFIXES)}, or a folder of them): "
                + ", ".join(wrong),
            )
        if not files:
            return None
        if busy or self.importing:
            self.message.emit("warning", "Wait for the running search or import to finish, or cancel it.")
            return None
        holder: dict[str, Job | None] = {}

        def start(db: Any) -> None:
            names = ", ".join(Path(p).name for p in files)
            job = self.jobs.submit(
                KINDS["import"], lj.import_literature, db, files, label=f"Importing {names}", policy="refuse",
                on_progress=lambda d, t, m: self.progress.emit(f"Importing: {m}"),  # m counts files, MB
                on_result=self._on_imported,
                on_error=lambda exc: (self.progress.emit("Import failed."),
                                      self.message.emit("error", user_message(exc, "Import failed")),
                                      self.link.refresh_status()),
                on_cancelled=lambda: (
                    self.progress.emit("Import cancelled; files finished before it are kept (a folder's "
                                       "next import goes on from there)."),
                    self.link.refresh_status(),
                ),
            )
            if job is not None:
                self._import_job = job
                self.progress.emit(f"Importing {names}")
            holder["job"] = self._watch(job)

        self.link.with_database(start)
        return holder.get("job")

    def _on_imported(self, report: Any) -> None:
        self.progress.emit("Import finished.")
        self.message.emit("info", lj.import_summary(report))
        self.link.refresh_status()
        if self.session.retrieval.embed_after_import:
            if self.embedding:  # it counted its documents when it began: one more run when it ends
                self._embed_again = True
            else:
                self.embed_documents()

    # --- embedding --------------------------------------------------------------------------------
    def embed_documents(self) -> Job | None:
        """Embed new or changed documents in the background (semantic rows use them; searches never
        wait for it). Through the session's encoder, so the window's process never loads torch.

        The job is in the window's one progress area (its Cancel stops it after the batch in flight;
        the batches written are kept and the next run goes on from there); the status line counts the
        documents with vectors when it ends.
        """
        if self._embed_job is not None and not self._embed_job.done:
            self.message.emit("info", "Documents are being embedded already (see the progress area).")
            return None

        def start(db: Any) -> None:
            job = self.jobs.submit(
                KINDS["embed"], lj.embed_literature, db, self.session.embedding_model, self.session.encoder,
                self.session.retrieval,
                label="Embedding documents for semantic rows", policy="refuse", busy_cursor=False,
                on_progress=lambda d, t, m: self.progress.emit(f"Embedding for semantic rows: {m}"),
                on_result=self.embedded,
                on_error=lambda exc: self.message.emit(
                    "warning", user_message(exc, "Documents were not embedded (full-text rows still work)")),
                on_cancelled=lambda: (
                    setattr(self, "_embed_again", False),  # a Cancel is not followed by another run
                    self.progress.emit(
                        "Embedding cancelled; the documents embedded so far keep their vectors, and the "
                        "next run (Embed documents, or the next import) goes on from there.")),
                on_finished=self._embed_finished,
            )
            self._embed_job = job
            self.state_changed.emit()

        self.link.with_database(start)
        return self._embed_job

    def embedded(self, rep: Any) -> None:
        """Say what an embedding run did (its report: ``embedded``, ``remaining``)."""
        if not rep.embedded and not rep.remaining:  # a file imported again ("Embedded 0 documents")
            self.progress.emit("Every document already has a vector for semantic rows.")
            return
        self.progress.emit(f"Embedded {export_mod.plural(rep.embedded, 'document')} for semantic rows"
                           + (f" ({rep.remaining:,} left for the next run)" if rep.remaining else ""))

    def _embed_finished(self) -> None:
        self._embed_job = None
        self.state_changed.emit()
        self.link.refresh_status()
        if self._embed_again:  # an import finished while it ran
            self._embed_again = False
            self.embed_documents()

    @property
    def embedding(self) -> bool:
        """An embedding run is under way."""
        return self._embed_job is not None and not self._embed_job.done

    # --- the top-k index ------------------------------------------------------------------------
    def build_fast_index(self) -> Job | None:
        """Build the top-k index in the background (File > Build fast search index): full-text rows
        then rank and count in time that follows the rows asked for, not their matches. Until it is
        finished, searches run in PostgreSQL as before; Cancel keeps the batches done and the next
        build goes on from there."""
        if self._topk_job is not None and not self._topk_job.done:
            self.message.emit("info", "The fast search index is being built already (see the progress area).")
            return None

        def start(db: Any) -> None:
            job = self.jobs.submit(
                KINDS["topk"], lj.build_topk_index, db,
                label="Building the fast search index", policy="refuse", busy_cursor=False,
                on_progress=lambda d, t, m: self.progress.emit(f"Fast search index: {m}"),
                on_result=lambda state: (
                    self.progress.emit(f"Fast search index ready: {state.documents:,} documents. Full-text "
                                       "rows now rank by BM25 from it."),
                    self.message.emit("info", "Fast search index ready: full-text rows and counts use it.")),
                on_error=lambda exc: self.message.emit(
                    "warning", user_message(exc, "The fast search index was not built (searches run in "
                                                 "PostgreSQL as before)")),
                on_cancelled=lambda: self.progress.emit(
                    "Fast search index cancelled; the documents indexed so far are kept and the next build "
                    "goes on from there. Searches run in PostgreSQL until it is finished."),
                on_finished=self._topk_finished,
            )
            self._topk_job = job

        self.link.with_database(start)
        return self._topk_job

    def _topk_finished(self) -> None:
        self._topk_job = None
        self.link.refresh_status()

    # --- export -----------------------------------------------------------------------------------
    def import_files_dialog(self, owner: QWidget) -> Job | None:
        """Ask ``owner``'s user for literature files and import them."""
        paths = file_dialogs.open_files(owner, last_folders.LITERATURE, "Import literature", LITERATURE_FILES)
        return self.import_files(paths) if paths else None

    def import_folder_dialog(self, owner: QWidget) -> Job | None:
        """Ask for a folder such as the PubMed baseline and import it file by file."""
        folder = file_dialogs.folder(owner, last_folders.LITERATURE, "Import a literature folder")
        return self.import_files([folder]) if folder else None

    def export_documents(self, owner: QWidget, fmt: str, documents: Sequence[Any],
                         path: str | Path | None = None) -> Job | None:
        """Write ``documents`` (the results table's) as CSV, RIS or BibTeX, on a worker; without a
        ``path`` ``owner``'s user picks the file."""
        key = {"bib": "bibtex"}.get(fmt.lower(), fmt.lower())
        if key not in export_mod.DOCUMENT_FORMATS:
            self.message.emit("warning", f"Unknown export format {fmt!r}.")
            return None
        if not documents:
            self.message.emit("warning", "There are no documents to export: run the ticked queries first.")
            return None
        suffix = export_mod.DOCUMENT_FORMATS[key]
        if path is None:
            path = file_dialogs.save_file(owner, last_folders.EXPORT, "Export documents",
                                          f"literature{suffix}", f"{key.upper()} (*{suffix})") or None
            if path is None:
                return None
        count = export_mod.plural(len(documents), "document")
        return self.jobs.submit(
            KINDS["export"], lj.write_export, export_mod.export_documents, list(documents), str(path), key,
            label=f"Exporting {count}", policy="queue", busy_cursor=False,
            on_result=lambda p: self.progress.emit(f"Exported {count} to {p}"),
            on_error=lambda exc: self.message.emit("error", user_message(exc, f"Cannot write {path}")),
        )

    def search_log(self) -> dict[str, Any]:
        """The search log of the last run: the same document ``literature search --json`` prints."""
        return self.session.search_log(app_version=__version__)

    def export_log(self, owner: QWidget, path: str | Path | None = None) -> Job | None:
        """Write the search log as JSON so the search can be reproduced (on any copy of the literature);
        without a ``path`` ``owner``'s user picks the file."""
        if self.session.last_run is None:
            self.message.emit("warning", "Run a search first: the log records the queries as they ran.")
            return None
        if path is None:
            path = file_dialogs.save_file(owner, last_folders.EXPORT, "Export search log", "search-log.json",
                                          "JSON (*.json)") or None
            if path is None:
                return None
        return self.jobs.submit(
            KINDS["export"], lj.write_export, write_search_log, self.search_log(), str(path),
            label="Exporting the search log", policy="queue", busy_cursor=False,
            on_result=lambda p: self.progress.emit(f"Search log written to {p}"),
            on_error=lambda exc: self.message.emit("error", user_message(exc, f"Cannot write {path}")),
        )
