"""Defects a first-time user's run at 1600x1000 showed (``scripts/first_run.py``), each on the real window."""

from __future__ import annotations

import threading

from PySide6.QtCore import Qt

from kmds_desktop.config import Settings
from kmds_desktop.literature.store.loading import FileReport, ImportReport

WAIT = 10_000


def _blocked(release: threading.Event, *, progress=None, cancel=None):
    release.wait(WAIT / 1000)


def test_the_first_starts_status_line_is_elided_never_cut_mid_letter(qtbot, make_window):
    settings = Settings()
    settings.llm.backend = "offline"
    window = make_window(settings)
    window.resize(1600, 1000)
    window.llm_status.setText("LLM: offline (no LLM; answers are extractive)")
    window.lit_status.setText("Literature: 1,239 documents, 0 with vectors, 1,239 to embed")
    window.kb_status.setText("KB: demo_kb.xml — 2 workflows, 42 observations")
    release = threading.Event()
    try:
        window.jobs.submit("index.build", _blocked, release, label="Indexing the knowledge base")
        window.jobs.submit("warm-up", _blocked, release, label="Loading the embedding model")
        strip = window.progress_strip
        qtbot.waitUntil(lambda: len(strip.rows()) == 2 and strip.isVisible(), timeout=WAIT)
        qtbot.wait(50)
        label = strip.label
        full = "2 tasks: Loading the embedding model · Indexing the knowledge base"
        assert label.text() == full  # the whole line stays the label's text (and the tooltip has each job)
        shown = label.shown_text() if hasattr(label, "shown_text") else label.text()
        assert label.fontMetrics().horizontalAdvance(shown) <= label.contentsRect().width()
        assert shown == full or shown.endswith("…")
        for other in (window.llm_status, window.lit_status, window.kb_status):  # the other lines stay whole
            assert other.fontMetrics().horizontalAdvance(other.text()) <= other.contentsRect().width()
    finally:
        release.set()


def test_an_import_summary_groups_thousands_like_its_record_count():
    report = ImportReport([FileReport("corpus.jsonl", "jsonl", records=1239, unchanged=1239, inserted=1200,
                                      updated=1001)])
    assert report.summary() == ("1 file: 1,239 records, 1,200 new, 1,001 updated, 1,239 unchanged, "
                                "0 skipped")


def test_an_empty_error_column_leaves_the_room_to_the_queries(qtbot, make_window):
    from kmds_desktop.ui.literature.review_model import ReviewModel
    from kmds_desktop.ui.literature.sections import ERROR_MIN_WIDTH

    window = make_window()
    window.resize(1600, 1000)
    panel = window.literature
    panel.add_query("sweat & chloride & adult")
    panel.add_query("(sweat <-> chloride & (diagnose | diagnostic)) | (cystic <-> fibrosis & adults)")
    qtbot.wait(100)
    view = panel.review_view
    notes = [panel.review.index(r, ReviewModel.COL_ERROR).data() for r in range(panel.review.rowCount())]
    assert not any(notes)
    error = view.columnWidth(ReviewModel.COL_ERROR)
    header = view.horizontalHeader()
    assert error < ERROR_MIN_WIDTH
    assert error >= header.fontMetrics().horizontalAdvance("Error")
    assert view.columnWidth(ReviewModel.COL_QUERY) > 3 * error

    # A note (here: the check's, the window has no database): the column widens, as far as the
    # query keeps the widest column (the whole note is in the cell's tooltip).
    qtbot.waitUntil(lambda: bool(panel.review.index(0, ReviewModel.COL_ERROR).data()), timeout=WAIT)
    qtbot.waitUntil(lambda: view.columnWidth(ReviewModel.COL_ERROR) > error, timeout=WAIT)
    cell = panel.review.index(0, ReviewModel.COL_ERROR)
    assert cell.data(Qt.ItemDataRole.ToolTipRole) == cell.data()
    assert view.columnWidth(ReviewModel.COL_QUERY) > view.columnWidth(ReviewModel.COL_ERROR)
    # with the window's width (Wide), the note has its minimum at least
    qtbot.mouseClick(panel.wide_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.columnWidth(ReviewModel.COL_ERROR) >= ERROR_MIN_WIDTH, timeout=WAIT)


def test_every_preferences_tab_shows_its_checkboxes_and_fields_whole(qtbot, make_window):
    from PySide6.QtWidgets import QCheckBox, QComboBox, QLineEdit

    window = make_window()
    window.resize(1600, 1000)
    window.open_preferences()
    dialog = window.active_dialog
    qtbot.waitUntil(dialog.isVisible, timeout=WAIT)
    for index in range(dialog.tabs.count()):
        dialog.tabs.setCurrentIndex(index)
        qtbot.wait(50)
        page = dialog.tabs.currentWidget()
        right = page.mapToGlobal(page.rect().topRight()).x()
        widgets = page.findChildren(QCheckBox) + page.findChildren(QComboBox) + page.findChildren(QLineEdit)
        for widget in widgets:
            if not widget.isVisible() or isinstance(widget.parent(), QComboBox):
                continue
            name = widget.text() if isinstance(widget, QCheckBox) else widget.objectName()
            where = dialog.tabs.tabText(index)
            if isinstance(widget, QCheckBox):  # its text does not wrap: all of it must fit
                assert widget.width() >= widget.sizeHint().width(), (where, name)
            assert widget.mapToGlobal(widget.rect().topRight()).x() <= right, (where, name)
    dialog.reject()


def test_new_search_leaves_no_export_and_no_message_of_the_previous_search(qtbot, make_window):
    from PySide6.QtCore import Qt

    window = make_window()
    panel = window.literature
    panel.session.documents = [{"id": 1, "title": "Sweat testing for cystic fibrosis", "source": "cf",
                                "external_id": "1", "rank": 1, "found_by": ["sweat & chloride"]}]
    panel.results.show_documents(panel.session.documents, "1 document from 1 of 1 query")
    panel._update_buttons()
    panel.show_message("Generated: 3 queries from 1 of 1 model", "info")
    assert panel.export_button.isEnabled() and window.messages.isVisible()

    qtbot.mouseClick(panel.new_search_button, Qt.MouseButton.LeftButton)
    assert panel.documents.rowCount() == 0
    assert not panel.export_button.isEnabled()
    assert not window.messages.isVisible()  # the old search's message went with it
    window.messages.show_message("Preferences saved.", "info")  # a message about anything else stays
    qtbot.mouseClick(panel.new_search_button, Qt.MouseButton.LeftButton)
    assert window.messages.isVisible()


def test_a_short_source_leaves_its_room_to_the_titles(qtbot, make_window):
    from kmds_desktop.ui.literature.documents_model import DocumentsModel

    window = make_window()
    window.resize(1600, 1000)
    panel = window.literature
    docs = [{"id": n, "title": f"Pancreatic function and digestion in cystic fibrosis, part {n}",
             "source": "CF", "external_id": str(n), "rank": n, "journal": "Adv Pediatr", "year": 1978,
             "found_by": ["semantic: What is the effect of pancreatic enzyme therapy on growth?"]}
            for n in range(1, 4)]
    panel.results.show_documents(docs, "3 documents from 1 of 1 query")
    qtbot.wait(50)
    view = panel.documents_view
    source = view.columnWidth(DocumentsModel.COL_SOURCE)
    header = view.horizontalHeader()
    assert source <= header.sectionSizeHint(DocumentsModel.COL_SOURCE) + 4  # the header's width, not 100 px
    assert view.columnWidth(DocumentsModel.COL_TITLE) >= view.columnWidth(DocumentsModel.COL_FOUND_BY) - 10


def test_an_embedding_with_nothing_to_embed_says_so(qtbot, make_window):
    from types import SimpleNamespace

    panel = make_window().literature
    panel.files.embedded(SimpleNamespace(embedded=0, remaining=0))  # what the job reports after a re-import
    assert panel.progress_label.text() == "Every document already has a vector for semantic rows."
    panel.files.embedded(SimpleNamespace(embedded=1, remaining=2))
    assert panel.progress_label.text() == "Embedded 1 document for semantic rows (2 left for the next run)"
