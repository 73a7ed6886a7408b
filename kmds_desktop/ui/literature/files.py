"""The literature panel's file actions: import literature, embed documents, export documents and
the search log.

A mixin of :class:`~kmds_desktop.ui.literature.panel.LiteraturePanel`: each action asks for a file
name where needed and runs the application layer's function on a worker (which files import, what
is embedded and how documents are written are :mod:`kmds_desktop.app.literature_data`'s and the
export module's rules).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kmds_desktop import __version__
from kmds_desktop.app import last_folders
from kmds_desktop.app import literature_data as lj
from kmds_desktop.app import presentation as export_mod
from kmds_desktop.app.messages import user_message
from kmds_desktop.app.search_log import write_search_log
from kmds_desktop.ui.jobs.runner import Job
from kmds_desktop.ui.literature.jobs import KINDS
from kmds_desktop.ui.shell import file_dialogs

if TYPE_CHECKING:
    from kmds_desktop.ui.literature.panel import LiteraturePanel

LITERATURE_FILES = "Literature files (*.xml *.xml.gz *.jsonl *.jsonl.gz *.json *.ndjson);;All files (*)"


class LiteratureFiles:
    """Import, embed and export of the literature panel (see the module docstring)."""

    # --- import -----------------------------------------------------------------------------------
    def import_files_dialog(self: LiteraturePanel) -> Job | None:
        paths = file_dialogs.open_files(self, last_folders.LITERATURE, "Import literature", LITERATURE_FILES)
        return self.import_files(paths) if paths else None

    def import_folder_dialog(self: LiteraturePanel) -> Job | None:
        """File > Import literature folder: a folder such as the PubMed baseline, file by file."""
        folder = file_dialogs.folder(self, last_folders.LITERATURE, "Import a literature folder")
        return self.import_files([folder]) if folder else None

    def import_files(self: LiteraturePanel, paths: Sequence[str | Path]) -> Job | None:
        """Import MEDLINE/PubMed XML, JSONL or PubMedQA JSON files, or folders of them (the PubMed
        baseline: name order, resumable, one progress line), on a worker (progress, Cancel)."""
        files = [str(p) for p in paths]
        wrong = [p for p in files if not lj.importable(p)]
        files = [p for p in files if lj.importable(p)]
        if wrong:
            self.show_message(
                f"Not a literature file (expected {', '.join(lj.IMPORT_SUFFIXES)}, or a folder of them): "
                + ", ".join(wrong), "warning",
            )
        if not files:
            return None
        if self._working():
            self.show_message("Wait for the running search or import to finish, or cancel it.", "warning")
            return None
        holder: dict[str, Job | None] = {}

        def start(db: Any) -> None:
            names = ", ".join(Path(p).name for p in files)
            job = self.jobs.submit(
                KINDS["import"], lj.import_literature, db, files, label=f"Importing {names}", policy="refuse",
                on_progress=lambda d, t, m: self._set_progress(f"Importing: {m}"),  # m counts files, MB
                on_result=self._on_imported,
                on_error=lambda exc: (self._set_progress("Import failed."),
                                      self._show_error(exc, "Import failed"), self.refresh_status()),
                on_cancelled=lambda: (
                    self._set_progress("Import cancelled; files finished before it are kept (a folder's "
                                       "next import goes on from there)."),
                    self.refresh_status(),
                ),
            )
            if job is not None:
                self._work_job = job
                self._set_progress(f"Importing {names}")
            holder["job"] = self._watch(job)

        self._with_database(start)
        return holder.get("job")

    def _on_imported(self: LiteraturePanel, report: Any) -> None:
        self._set_progress("Import finished.")
        self.show_message(lj.import_summary(report), "info")
        self.refresh_status()
        if self.settings.retrieval.embed_after_import:
            if self.embedding:  # it counted its documents when it began: one more run when it ends
                self._embed_again = True
            else:
                self.embed_documents()

    # --- embedding --------------------------------------------------------------------------------
    def embed_documents(self: LiteraturePanel) -> Job | None:
        """Embed new or changed documents in the background (semantic rows use them; searches never
        wait for it). Through the session's encoder, so the window's process never loads torch.

        The job is in the window's one progress area (its Cancel stops it after the batch in flight;
        the batches written are kept and the next run goes on from there); the status line counts the
        documents with vectors when it ends.
        """
        if self._embed_job is not None and not self._embed_job.done:
            self.show_message("Documents are being embedded already (see the progress area).", "info")
            return None

        def start(db: Any) -> None:
            job = self.jobs.submit(
                KINDS["embed"], lj.embed_literature, db, self.session.embedding_model, self.session.encoder,
                self.settings.retrieval,
                label="Embedding documents for semantic rows", policy="refuse", busy_cursor=False,
                on_progress=lambda d, t, m: self._set_progress(f"Embedding for semantic rows: {m}"),
                on_result=self._embedded,
                on_error=lambda exc: self.show_message(
                    user_message(exc, "Documents were not embedded (full-text rows still work)"), "warning"),
                on_cancelled=lambda: (
                    setattr(self, "_embed_again", False),  # a Cancel is not followed by another run
                    self._set_progress(
                        "Embedding cancelled; the documents embedded so far keep their vectors, and the "
                        "next run (Embed documents, or the next import) goes on from there.")),
                on_finished=self._embed_finished,
            )
            self._embed_job = job
            self._update_buttons()

        self._with_database(start)
        return self._embed_job

    def _embedded(self: LiteraturePanel, rep: Any) -> None:
        if not rep.embedded and not rep.remaining:  # a file imported again ("Embedded 0 documents")
            self._set_progress("Every document already has a vector for semantic rows.")
            return
        self._set_progress(f"Embedded {export_mod.plural(rep.embedded, 'document')} for semantic rows"
                           + (f" ({rep.remaining:,} left for the next run)" if rep.remaining else ""))

    def _embed_finished(self: LiteraturePanel) -> None:
        self._embed_job = None
        self._update_buttons()
        self.refresh_status()
        if self._embed_again:  # an import finished while it ran
            self._embed_again = False
            self.embed_documents()

    @property
    def embedding(self: LiteraturePanel) -> bool:
        return self._embed_job is not None and not self._embed_job.done

    def _embed_tooltip(self: LiteraturePanel) -> str:
        if lj.everything_embedded(self.vectors):
            return lj.EVERYTHING_EMBEDDED
        own = self.database_vectors
        if own and own.get("with_vectors"):
            return (f"Semantic rows search {own['described']} (nothing to embed while its model is on the "
                    "Ollama server). This embeds with the app's model into a table of its own, which needs "
                    f"'{lj.EXTERNAL_OPT_IN}' in Preferences > Retrieval")
        vectors = lj.describe_vectors(self.vectors)
        return ("Embed the documents that have no vector yet, in the background, for semantic rows"
                + (f" (now: {vectors})" if vectors else ""))

    # --- the top-k index ------------------------------------------------------------------------
    def build_fast_index(self: LiteraturePanel) -> Job | None:
        """Build the top-k index in the background (File > Build fast search index): full-text rows
        then rank and count in time that follows the rows asked for, not their matches. Until it is
        finished, searches run in PostgreSQL as before; Cancel keeps the batches done and the next
        build goes on from there."""
        if self._topk_job is not None and not self._topk_job.done:
            self.show_message("The fast search index is being built already (see the progress area).", "info")
            return None

        def start(db: Any) -> None:
            job = self.jobs.submit(
                KINDS["topk"], lj.build_topk_index, db,
                label="Building the fast search index", policy="refuse", busy_cursor=False,
                on_progress=lambda d, t, m: self._set_progress(f"Fast search index: {m}"),
                on_result=lambda state: (
                    self._set_progress(f"Fast search index ready: {state.documents:,} documents. Full-text "
                                       "rows now rank by BM25 from it."),
                    self.show_message("Fast search index ready: full-text rows and counts use it.", "info")),
                on_error=lambda exc: self.show_message(
                    user_message(exc, "The fast search index was not built (searches run in PostgreSQL as "
                                      "before)"), "warning"),
                on_cancelled=lambda: self._set_progress(
                    "Fast search index cancelled; the documents indexed so far are kept and the next build "
                    "goes on from there. Searches run in PostgreSQL until it is finished."),
                on_finished=self._topk_finished,
            )
            self._topk_job = job

        self._with_database(start)
        return self._topk_job

    def _topk_finished(self: LiteraturePanel) -> None:
        self._topk_job = None
        self.refresh_status()

    # --- export -----------------------------------------------------------------------------------
    def _ask_path(self: LiteraturePanel, title: str, suggested: str, filters: str) -> str | None:
        path = file_dialogs.save_file(self, last_folders.EXPORT, title, suggested, filters)
        return path or None

    def export(self: LiteraturePanel, what: str) -> Job | None:
        """The Export menu's choice: ``"log"`` (the search log) or a document format."""
        return self.export_log() if what == "log" else self.export_documents(what)

    def export_documents(self: LiteraturePanel, fmt: str, path: str | Path | None = None) -> Job | None:
        """Write the documents table as CSV, RIS or BibTeX (on a worker)."""
        key = {"bib": "bibtex"}.get(fmt.lower(), fmt.lower())
        if key not in export_mod.DOCUMENT_FORMATS:
            self.show_message(f"Unknown export format {fmt!r}.", "warning")
            return None
        if not self.has_documents():
            self.show_message("There are no documents to export: run the ticked queries first.", "warning")
            return None
        suffix = export_mod.DOCUMENT_FORMATS[key]
        if path is None:
            path = self._ask_path("Export documents", f"literature{suffix}", f"{key.upper()} (*{suffix})")
            if path is None:
                return None
        docs = self.documents.documents()
        count = export_mod.plural(len(docs), "document")
        return self.jobs.submit(
            KINDS["export"], lj.write_export, export_mod.export_documents, docs, str(path), key,
            label=f"Exporting {count}", policy="queue", busy_cursor=False,
            on_result=lambda p: self._set_progress(f"Exported {count} to {p}"),
            on_error=lambda exc: self._show_error(exc, f"Cannot write {path}"),
        )

    def search_log(self: LiteraturePanel) -> dict[str, Any]:
        """The search log of the last run: the same document ``literature search --json`` prints."""
        return self.session.search_log(app_version=__version__)

    def export_log(self: LiteraturePanel, path: str | Path | None = None) -> Job | None:
        """Write the search log as JSON so the search can be reproduced (on any copy of the literature)."""
        if self.session.last_run is None:
            self.show_message("Run a search first: the log records the queries as they ran.", "warning")
            return None
        if path is None:
            path = self._ask_path("Export search log", "search-log.json", "JSON (*.json)")
            if path is None:
                return None
        return self.jobs.submit(
            KINDS["export"], lj.write_export, write_search_log, self.search_log(), str(path),
            label="Exporting the search log", policy="queue", busy_cursor=False,
            on_result=lambda p: self._set_progress(f"Search log written to {p}"),
            on_error=lambda exc: self._show_error(exc, f"Cannot write {path}"),
        )
