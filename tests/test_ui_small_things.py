"""The small things a new user met, each kept on the real widgets (pytest-qt, offscreen) where the window
shows it: the Ask state line names the KB open now; file dialogs start where their kind last ended; the
route editor's Workflow field; the Embed button and the semantic row's count after an import; the
screening record marks no filler words; counts of two read "both"; an attempt's label is no query.

Real parts: the main window and its panels, the shipped KBs, PostgreSQL with pgvector (a fresh database
per test), the shipped embedding model, the settings file in a private data folder.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QFileDialog

from kmds_desktop.app import workspace
from kmds_desktop.app.literature_data import EVERYTHING_EMBEDDED
from kmds_desktop.config import Settings, load_settings
from kmds_desktop.literature.store.vectors import embed_documents, vector_status
from kmds_desktop.ui.literature.panel import LiteraturePanel
from kmds_desktop.ui.literature.review_model import ReviewModel

ANSWER_TIMEOUT = 120_000  # the first question loads the embedding model
WAIT = 180_000
LEFT = Qt.MouseButton.LeftButton


def _offline_window(qtbot, make_window, kb_path: Path):
    settings = Settings()
    settings.llm.backend = "offline"
    window = make_window(settings)
    with qtbot.waitSignal(window.kb_loaded, timeout=30_000):
        window.open_kb(kb_path)
    return window


def _ask(qtbot, panel, question: str) -> Any:
    qtbot.mouseClick(panel.question, LEFT)
    panel.question.selectAll()
    qtbot.keyClicks(panel.question, question)
    with qtbot.waitSignal(panel.answer_finished, timeout=ANSWER_TIMEOUT) as sig:
        qtbot.mouseClick(panel.ask_button, LEFT)
    return sig.args[0]


# --- 1. the Ask state line names the KB open now ------------------------------------------------------
def test_the_state_line_names_the_kb_open_now_after_a_second_switch(qtbot, make_window, kmds_data):
    """Asked of A, then B opened, then C: the line said "B is open now" while C was open."""
    a = kmds_data / "example_analytics_kb_app_workflow.xml"
    b = kmds_data / "example_ml_kb_exp_workflow.xml"
    c = kmds_data / "test_kb_app_workflow.xml"
    window = _offline_window(qtbot, make_window, a)
    panel = window.ask
    assert _ask(qtbot, panel, "What data quality problems were found?").results

    with qtbot.waitSignal(window.kb_loaded, timeout=30_000):
        window.open_kb(b)
    assert f"about {a.name}; {b.name} is open now" in panel.state.text()

    with qtbot.waitSignal(window.kb_loaded, timeout=30_000):
        window.open_kb(c)
    assert window.kb.path.name == c.name
    assert f"{c.name} is open now" in panel.state.text(), panel.state.text()
    assert b.name not in panel.state.text()

    _ask(qtbot, panel, "Which observations were recorded?")  # a new answer: the note is over
    with qtbot.waitSignal(window.kb_loaded, timeout=30_000):
        window.open_kb(a)
    assert f"about {c.name}; {a.name} is open now" in panel.state.text()


# --- 3. file dialogs start where their kind last ended -----------------------------------------------
def _answer_file_dialog(answer) -> dict[str, str]:
    """Wait for the modal file dialog a click opens, note the folder it starts in, then ``answer`` it."""
    seen: dict[str, str] = {}

    def poll() -> None:
        dialog = QApplication.activeModalWidget()
        if isinstance(dialog, QFileDialog) and dialog.isVisible():
            seen["folder"] = str(Path(dialog.directory().absolutePath()).resolve())
            answer(dialog)
        else:
            QTimer.singleShot(20, poll)

    QTimer.singleShot(0, poll)
    return seen


def _choose(path: Path):
    def answer(dialog: QFileDialog) -> None:
        dialog.selectFile(str(path))
        dialog.accept()
    return answer


def _cancel(dialog: QFileDialog) -> None:
    dialog.reject()


def test_file_dialogs_start_in_the_folder_their_kind_last_used(qtbot, make_window, kmds_data, tmp_path,
                                                              data_home):
    kb_folder = tmp_path / "my kbs"
    kb_folder.mkdir()
    mine = kb_folder / "mine.xml"
    shutil.copyfile(kmds_data / "test_kb_app_workflow.xml", mine)
    window = _offline_window(qtbot, make_window, kmds_data / "example_analytics_kb_app_workflow.xml")
    assert window.settings.ui.last_folders == {}

    # File > Open: the first time in the open KB's folder (nothing remembered yet); the user goes to theirs.
    seen = _answer_file_dialog(_choose(mine))
    with qtbot.waitSignal(window.kb_loaded, timeout=30_000):
        window.open_kb_dialog()
    assert seen["folder"] == str(kmds_data.resolve())
    assert window.kb.path.name == "mine.xml"
    assert window.settings.ui.last_folders["kb"] == str(kb_folder)

    # Another kind does not start there: the literature import starts in the home folder.
    seen = _answer_file_dialog(_cancel)
    assert window.literature.import_files_dialog() is None
    assert seen["folder"] == str(Path.home().resolve())

    # The next KB dialog starts where the last one ended, and so does one after a restart.
    seen = _answer_file_dialog(_cancel)
    window.open_kb_dialog()
    assert seen["folder"] == str(kb_folder.resolve())
    saved = load_settings(data_home / "settings.json")
    assert saved.ui.last_folders["kb"] == str(kb_folder)
    again = make_window(saved)
    seen = _answer_file_dialog(_cancel)
    again.open_kb_dialog()
    assert seen["folder"] == str(kb_folder.resolve())

    # A remembered folder that has gone is not offered: home again.
    shutil.rmtree(kb_folder)
    again.session.kb = None  # no KB open: the workspace session holds the open KB
    seen = _answer_file_dialog(_cancel)
    again.open_kb_dialog()
    assert seen["folder"] == str(Path.home().resolve())


# --- 7. the route editor's Workflow field --------------------------------------------------------------
def test_the_route_editor_narrows_a_rerun_to_one_workflow(qtbot, make_window, kmds_data):
    window = _offline_window(qtbot, make_window, workspace.installed_demo_path())
    panel = window.ask
    editor = panel.route_editor
    combo = editor.workflow
    assert [combo.itemText(i) for i in range(combo.count())] == [
        "any", "penguin species classification", "penguin body mass regression"]

    first = _ask(qtbot, panel, "List all observations")
    workflows = {w for r in first.results for w in r.get("workflows") or []}
    assert {"penguin species classification", "penguin body mass regression"} <= workflows
    assert combo.currentText() == "any"

    combo.setCurrentIndex(combo.findText("penguin body mass regression"))
    with qtbot.waitSignal(panel.answer_finished, timeout=ANSWER_TIMEOUT) as sig:
        qtbot.mouseClick(editor.rerun_button, LEFT)
    narrowed = sig.args[0]
    assert narrowed.results and narrowed.route.filters.workflow == "penguin body mass regression"
    assert all("penguin body mass regression" in r.get("workflows") for r in narrowed.results)
    assert combo.currentText() == "penguin body mass regression"  # the field shows the route that ran
    assert "Filters: workflow 'penguin body mass regression'" in editor.summary.toolTip()

    # Another KB: its own workflows, and "any" again (the demo's workflow would find nothing there).
    with qtbot.waitSignal(window.kb_loaded, timeout=30_000):
        window.open_kb(kmds_data / "test_kb_app_workflow.xml")
    assert [combo.itemText(i) for i in range(combo.count())] == ["any", "test application workflow"]
    assert combo.currentIndex() == 0


# --- 5 and 6. after an import: the semantic row's count, and Embed only when something lacks a vector ----
def _corpus_files(literature_data: Path, tmp_path: Path, first: int, second: int) -> tuple[Path, Path, str]:
    lines = (literature_data / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines[:first + second]]
    one, two = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    one.write_text("".join(json.dumps(r) + "\n" for r in records[:first]), encoding="utf-8")
    two.write_text("".join(json.dumps(r) + "\n" for r in records[first:]), encoding="utf-8")
    return one, two, records[2]["title"]


def _matches(panel: LiteraturePanel, row: int) -> str:
    return panel.review.index(row, ReviewModel.COL_MATCHES).data()


def test_after_an_import_the_rows_counts_follow_and_embed_is_offered_only_when_needed(
        qtbot, jobs, pg_empty_database, literature_data: Path, tmp_path: Path, data_home: Path) -> None:
    db = pg_empty_database
    first, second, title = _corpus_files(literature_data, tmp_path, 8, 4)
    db.import_files([first])
    assert embed_documents(db).embedded == 8
    settings = Settings()
    settings.retrieval.embed_after_import = False  # Embed is the user's click here
    panel = LiteraturePanel(settings, jobs, database=db)
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitUntil(lambda: panel.session.documents_in_database == 8, timeout=WAIT)
    assert not panel.embed_button.isEnabled(), "every document has a vector: nothing to embed"
    assert panel.embed_button.toolTip() == EVERYTHING_EMBEDDED

    panel.question.setText(title)
    qtbot.mouseClick(panel.semantic_button, LEFT)
    panel.review.add_hand_written("cell | protein")
    qtbot.waitUntil(lambda: _matches(panel, 1) != "", timeout=WAIT)  # the full-text row is counted
    full_text_before = _matches(panel, 1)
    qtbot.mouseClick(panel.run_button, LEFT)
    qtbot.waitUntil(lambda: panel.session.last_run is not None and not panel._working(), timeout=WAIT)
    assert _matches(panel, 0) == "8"  # the semantic row searched the 8 documents with a vector

    panel.import_files([second])  # File > Import literature asks for the file; this is its answer
    qtbot.waitUntil(lambda: panel.session.documents_in_database == 12, timeout=WAIT)
    qtbot.waitUntil(panel.embed_button.isEnabled, timeout=WAIT)  # 4 new documents lack a vector
    assert panel.embed_button.toolTip() != EVERYTHING_EMBEDDED
    expected_full_text = str(db.count_matches("cell | protein"))
    qtbot.waitUntil(lambda: _matches(panel, 1) == expected_full_text, timeout=WAIT)  # counted again
    assert int(expected_full_text) >= int(full_text_before)

    qtbot.mouseClick(panel.embed_button, LEFT)
    qtbot.waitUntil(lambda: vector_status(db)["with_vectors"] == 12, timeout=WAIT)
    qtbot.waitUntil(lambda: _matches(panel, 0) == "12", timeout=WAIT)  # the semantic row's count follows
    qtbot.waitUntil(lambda: not panel.embedding and not panel.embed_button.isEnabled(), timeout=WAIT)
    assert panel.embed_button.toolTip() == EVERYTHING_EMBEDDED


# --- 4. the screening record marks the rows' terms, never filler words ---------------------------------
def test_the_screening_record_marks_no_filler_words(qtbot):
    from types import SimpleNamespace

    from PySide6.QtWidgets import QTextBrowser

    from kmds_desktop.ui.screening.widgets import ROW_COLOUR, record_html

    record = SimpleNamespace(
        title="The effect of the drug on the lungs and the airways in cystic fibrosis",
        abstract="Which of these patients with fibrosis were treated from the start, and for how long?",
        authors=["Smith J"], year=2020, journal="Thorax", doi="", pmid="",
        found_by=["semantic: What is the effect of the drug on the lungs of children with fibrosis?",
                  "#3 row 2: cystic AND fibros:* OR (airway* AND NOT asthma)"])
    page = record_html(record)
    mark = rf'<span style="background-color:{ROW_COLOUR}">([^<]+)</span>'
    marked = {m.lower() for m in re.findall(mark, page)}
    assert {"fibrosis", "cystic", "drug", "lungs", "airways", "effect"} <= marked
    filler = {"the", "of", "and", "on", "in", "which", "these", "with", "from", "for", "how", "what"}
    assert not marked & filler
    view = QTextBrowser()  # as the screening view shows it
    qtbot.addWidget(view)
    view.setHtml(page)
    assert "cystic fibrosis" in view.toPlainText()


# --- 2. two of something read "both" ------------------------------------------------------------------
def test_two_matching_records_read_both():
    from kmds_desktop.ask.answers import offline_heading
    from kmds_desktop.literature.retrieval.semantic import VectorCoverage

    assert "here are both matching observations" in offline_heading(2, listing=True)
    assert "all 2" not in offline_heading(2, listing=True)
    assert "here is the one matching observation" in offline_heading(1, listing=True)
    assert "all 3 matching observations" in offline_heading(3, listing=True)
    both = "the semantic row searched both documents (every one has a vector)"
    assert VectorCoverage(2, 2).sentence() == both
    assert VectorCoverage(1, 1).sentence().startswith("the semantic row searched the one document")
    assert VectorCoverage(12, 12).sentence().startswith("the semantic row searched all 12 documents")


# --- 9. an attempt's label is no part of the query ----------------------------------------------------
def test_an_attempts_label_is_read_as_a_label_not_as_the_query():
    from kmds_desktop.literature.queries.query_cleaning import clean_query_with_reason

    for reply in ("Query (attempt 2): aspirin | stroke", "(attempt 2) aspirin | stroke",
                  "Attempt 2: aspirin | stroke", "Broader variant (attempt 2):\naspirin | stroke",
                  "aspirin | stroke (attempt 2)"):
        assert clean_query_with_reason(reply)[0] == "aspirin | stroke", reply
    assert clean_query_with_reason("variant:* & brca1")[0] == "variant:* & brca1"  # a word, not a label
    assert clean_query_with_reason("attempt & suicide")[0] == "attempt & suicide"


# --- 8. a known paper that spells out the row's abbreviation does not "lack" it ------------------------
def test_a_known_paper_that_spells_out_an_abbreviation_does_not_lack_it(pg_empty_database, tmp_path):
    """The check the history window shows (``known_check_text``): a paper titled "Cystic fibrosis …" was
    said to lack "CF" even where the row ORs CF with "cystic fibrosis"; an abbreviation is satisfied by
    its long form (and the long form by the abbreviation), and what is really missing is named alone."""
    from kmds_desktop.literature.strategy.history import SearchHistory
    from kmds_desktop.literature.strategy.known_papers import parse_identifiers
    from kmds_desktop.literature.strategy.search_report import known_check_text
    from kmds_desktop.literature.strategy.workbench import SearchWorkbench

    titles = {"k:1": "Cystic fibrosis and sputum calcium in children",
              "k:2": "CF airway inflammation in adults",
              "k:3": "Sputum of CF patients: mucus viscosity",
              "k:4": "Gardening for beginners"}
    corpus = tmp_path / "cf.jsonl"
    corpus.write_text("".join(json.dumps({"id": k, "source": "test", "title": v}) + "\n"
                              for k, v in titles.items()))
    pg_empty_database.import_files([corpus])
    history = SearchHistory(tmp_path / "history.sqlite3")
    try:
        bench = SearchWorkbench(history, pg_empty_database)
        hand = {"kind": "hand-written"}
        bench.run("cf", [("(CF | cystic <-> fibrosis) & mucus", hand), ("CF & sputum", hand),
                         ("cystic <-> fibrosis & inflammation", hand)], max_rows=50)
        check = bench.check_known(parse_identifiers("k:1 k:2"), [1])
        why = {m.status.document.external_id: {r["row"]: r for r in m.rows} for m in check.missed}
        assert set(why) == {"k:1", "k:2"}
        assert why["k:1"]["#1.1"]["missing_words"] == ["mucus"]  # not "CF": its long form is there
        assert why["k:1"]["#1.2"]["missing_words"] == []  # "Cystic fibrosis" is CF ...
        assert why["k:1"]["#1.2"]["written_otherwise"] == ['CF as "cystic fibrosis"']  # ... in another form
        assert why["k:2"]["#1.3"]["missing_words"] == []  # and "cystic fibrosis" is CF
        assert why["k:2"]["#1.3"]["written_otherwise"] == ['"cystic fibrosis" as "CF"']
        text = known_check_text(check, whole=True)
        assert "lacks CF" not in text and "lacks cystic" not in text
        assert "#1.1: lacks mucus" in text
        assert '#1.2: writes CF as "cystic fibrosis", a form the row lacks' in text
    finally:
        history.close()
