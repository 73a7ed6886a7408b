"""Click journeys in the Evidence view, real widgets over a real store of three shared PDFs: a question
typed and searched, a passage clicked and shown on its page with the passage marked; an answer's [n]
clicked and its page shown with the quote marked; the answer exported as Markdown; the questions
kept in the data folder; and the window's dock with File's PDF import running with progress."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor
from support.fulltext import link_pdfs

from kmds_desktop.app.evidence import EvidenceSession
from kmds_desktop.app.evidence_pages import QuestionHistory, find_span
from kmds_desktop.ui.evidence import EvidenceView

PDFS = ["pnas.0403760101.pdf", "14712598.2019.1685489.pdf", "j.bpj.2021.11.1119.pdf"]
QUESTION = ("How many Gly-X-Y repeats are in the collagenous domain of the adiponectin paralog encoded by "
            "C1QTNF1 in mice?")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("evidence-ui")
    folder = link_pdfs(PDFS, root / "papers")
    path = root / "fulltext" / "fulltext.sqlite"
    with EvidenceSession(path) as session:
        report = session.import_folder(folder)
    assert report.count("imported") == 3, report.summary()
    return path


@pytest.fixture()
def kb_copy(tmp_path: Path, kmds_data: Path) -> Path:
    """A copy of a shared KB to file evidence into (the shared file is never written)."""
    path = tmp_path / "kb.xml"
    path.write_bytes((kmds_data / "example_ml_kb_exp_workflow.xml").read_bytes())
    return path


@pytest.fixture()
def view(qtbot, jobs, store_path: Path):
    session = EvidenceSession(store_path)
    widget = EvidenceView(jobs, session)
    qtbot.addWidget(widget)
    widget.resize(1400, 900)
    widget.show()
    qtbot.waitUntil(lambda: not jobs.is_busy(), timeout=30_000)  # the reviews listed for the scope, on show
    yield widget
    jobs.shutdown()
    session.close()


def _search(qtbot, view: EvidenceView, question: str) -> None:
    qtbot.keyClicks(view.questions.line, question)
    qtbot.mouseClick(view.questions.find_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.passages.count() > 0, timeout=60_000)


def test_a_clicked_passage_opens_on_its_page_marked(qtbot, view: EvidenceView, store_path: Path) -> None:
    _search(qtbot, view, QUESTION)
    hit = view.passages.hit(0)
    assert Path(hit.file).name == "pnas.0403760101.pdf"  # the paper that answers it ranks first
    item = view.passages.item(0)
    assert f"p. {hit.pages}" in item.text()
    with qtbot.waitSignal(view.page_shown, timeout=30_000) as shown:
        qtbot.mouseClick(view.passages.viewport(), Qt.MouseButton.LeftButton,
                         pos=view.passages.visualItemRect(item).center())
    page = shown.args[0]
    assert view.page.page_no == hit.start_page == page.page_no
    rects = view.page.highlight_rects
    assert rects and all(r.width() > 0 and r.height() > 0 for r in rects)
    assert f"page {hit.start_page} of 6" in view.page.title.text()
    assert not view.page.scene.itemsBoundingRect().isEmpty()
    with qtbot.waitSignal(view.page_shown, timeout=30_000):  # the next page, for the context
        qtbot.mouseClick(view.page.next_button, Qt.MouseButton.LeftButton)
    assert view.page.page_no == hit.start_page + 1 and view.page.highlight_rects == []
    assert view.page.previous_button.isEnabled()
    # the question is kept in the data folder, newest first, and listed
    assert QuestionHistory(store_path.parent).questions()[0] == QUESTION
    assert view.questions.history.item(0).text() == QUESTION


def test_an_answers_citation_clicked_opens_its_page(qtbot, view: EvidenceView, tmp_path: Path) -> None:
    qtbot.keyClicks(view.questions.line, QUESTION)
    qtbot.mouseClick(view.questions.answer_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.answer.answer is not None, timeout=60_000)
    answer = view.answer.answer
    assert answer.answered and answer.sources
    source = answer.sources[0]
    browser = view.answer.browser
    found = browser.document().find(f"[{source.number}]")
    assert not found.isNull()
    cursor = QTextCursor(browser.document())
    cursor.setPosition(found.selectionStart() + 1)
    with qtbot.waitSignal(view.page_shown, timeout=30_000):
        qtbot.mouseClick(browser.viewport(), Qt.MouseButton.LeftButton,
                         pos=browser.cursorRect(cursor).center())
    assert view.page.page_no == source.pages[0]
    assert view.page.highlight_rects  # the quote is marked on the page it is cited on
    target = tmp_path / "answer.md"
    assert view.answer.export_button.isEnabled() and view.export_answer(target)
    markdown = target.read_text(encoding="utf-8")
    assert f"## {QUESTION}" in markdown and f"[{source.number}]" in markdown and "> " in markdown


def test_an_empty_question_is_refused_with_what_to_do(qtbot, view: EvidenceView) -> None:
    with qtbot.waitSignal(view.message) as said:
        qtbot.mouseClick(view.questions.find_button, Qt.MouseButton.LeftButton)
    assert said.args[0] == "warning" and "Type a question" in said.args[1]
    assert view.passages.count() == 0 and not view.jobs.is_busy()


def test_the_highlight_survives_cleaning() -> None:
    page = "The colla-\r\ngenous domain has 22 Gly\u2013X\u2013Y repeats, and the ﬁrst one is short."
    span = find_span(page, "The collagenous domain has 22 Gly-X-Y repeats, and the first one is short.")
    assert span == (0, len(page) - 2)  # from "T" to the last letter before the full stop
    assert find_span(page, "nothing of the kind is printed on this page at all") is None


def test_the_window_docks_evidence_and_imports_pdfs_with_progress(make_window, qtbot, tmp_path: Path,
                                                                   data_home: Path, kb_copy: Path) -> None:
    window = make_window()
    names = [a.objectName() for a in window.findChildren(type(window.open_action))]
    assert "importPdfs" in names and "importZotero" in names and "showEvidence" in names
    assert window.evidence_dock.isHidden()
    window.evidence_dock.show()
    folder = link_pdfs(["j.bpj.2021.11.1119.pdf"], tmp_path / "pdfs")
    with qtbot.waitSignal(window.evidence.papers_changed, timeout=120_000) as imported:
        assert window.evidence.import_pdfs(folder) is not None  # a job on the window's runner
    assert imported.args[0].count("imported") == 1
    assert "1 imported" in window.evidence.status.text()
    # the window's literature database was not opened (this test starts no PostgreSQL): the import says
    # its PDFs were not matched to records rather than starting a database nobody asked for
    assert "records not matched: the literature database is not open" in window.evidence.status.text()
    assert (data_home / "fulltext" / "fulltext.sqlite").is_file()

    # a claim judged in the dock, filed under the observation selected in the window's KB browser
    from kmds_desktop.app.verdicts import Judge
    from kmds_desktop.kb.evidence_links import evidence_links

    with qtbot.waitSignal(window.kb_loaded, timeout=30_000):
        window.open_kb(kb_copy)
    observation = window.kb.observations[1]
    assert window.browser.select_observation(observation.iri)
    window.evidence.judge_factory = lambda: Judge(None, "offline")
    qtbot.keyClicks(window.evidence.questions.line,
                    "ProCharTS absorbance increases with time in HBV capsids as they assemble.")
    qtbot.mouseClick(window.evidence.verdict.judge_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.evidence.verdict.verdict is not None, timeout=60_000)
    assert window.evidence.verdict.verdict.verdict == "supported"
    other = window.kb.observations[2]
    assert window.browser.select_observation(other.iri)  # the line follows the KB browser's selection
    assert window.evidence.verdict.target.text() == f"Files under: {other.name}"
    assert window.browser.select_observation(observation.iri)
    assert window.evidence.verdict.target.text() == f"Files under: {observation.name}"
    qtbot.mouseClick(window.evidence.verdict.file_button, Qt.MouseButton.LeftButton)
    links = evidence_links(window.kb, observation.iri)
    assert [(link.doi, link.relation, link.pages) for link in links] == [
        ("10.1016/j.bpj.2021.11.1119", "supports", (1,))]
    assert window.kb.dirty  # the window's Save keeps the links


def test_a_pdf_changed_since_the_import_is_not_opened(qtbot, jobs, tmp_path: Path) -> None:
    folder = link_pdfs(["j.bpj.2021.11.1119.pdf"], tmp_path / "one")
    with EvidenceSession(tmp_path / "store" / "fulltext.sqlite") as session:
        session.import_folder(folder)
        paper = session.papers()[0]
        view = EvidenceView(jobs, session)
        qtbot.addWidget(view)
        with qtbot.waitSignal(view.page_shown, timeout=30_000):
            view.show_page(paper.id, 1, "")
        assert view.page.page_no == 1 and view.page.highlight_rects == []
        with open(paper.path, "ab") as fh:  # bytes the bounded reader has not seen
            fh.write(b"\n% appended\n")
        with qtbot.waitSignal(view.message, timeout=30_000) as said:
            view.show_page(paper.id, 1, "")
        assert said.args[0] == "error" and "changed or moved since it was imported" in said.args[1]
        jobs.shutdown()


def test_an_import_shows_the_records_made_from_its_pdfs(qtbot, jobs, tmp_path: Path,
                                                        pg_empty_database) -> None:
    """With the literature database open, File \u2192 Import PDFs\u2026 matches the PDFs to its records; a PDF
    none matches gets a record made from it, and the status line says how many were made."""
    folder = link_pdfs(["j.bpj.2021.11.1119.pdf"], tmp_path / "pdfs")
    with EvidenceSession(tmp_path / "store" / "fulltext.sqlite") as session:
        view = EvidenceView(jobs, session)
        qtbot.addWidget(view)
        view.with_database = lambda then, failed: then(pg_empty_database)
        with qtbot.waitSignal(view.papers_changed, timeout=120_000) as imported:
            assert view.import_pdfs(folder) is not None
        assert imported.args[0].records.new_records == 1
        assert "1 new record made from PDFs" in view.status.text()
        paper = session.papers()[0]
        assert paper.record_match == "created" and paper.record_id is not None
        with qtbot.waitSignal(view.page_shown, timeout=30_000):
            view.show_page(paper.id, 1, "")
        assert view.record.label.text() == f"Record: {paper.record_id} (made from this PDF)"
        with qtbot.waitSignal(view.papers_changed, timeout=120_000):
            view.import_pdfs(folder)
        assert "0 new records made from PDFs (1 made before)" in view.status.text()
        jobs.shutdown()


CLAIM = "The collagenous domain of mCTRP1 has 14 Gly-X-Y repeats."


def test_a_verdict_judged_in_the_view_is_filed_under_the_selected_observation(
        qtbot, view: EvidenceView, kb_copy: Path) -> None:
    from kmds_desktop.app.verdicts import Judge
    from kmds_desktop.kb import load_kb, save_kb
    from kmds_desktop.kb.evidence_links import evidence_links

    kb = load_kb(kb_copy)
    observation = kb.observations[0]
    view.kb_target = lambda: (kb, observation)
    view.judge_factory = lambda: Judge(None, "offline")
    assert not view.verdict.file_button.isEnabled()
    qtbot.keyClicks(view.questions.line, CLAIM)
    qtbot.mouseClick(view.verdict.judge_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.verdict.verdict is not None, timeout=60_000)
    result = view.verdict.verdict
    assert result.verdict == "supported"
    supporting = [d for d in result.documents if d.stance == "supports"]
    assert [d.doi for d in supporting] == ["10.1073/pnas.0403760101"]
    assert "14, 34, 23" in view.verdict.browser.toPlainText()
    assert observation.name in view.verdict.target.text()
    with qtbot.waitSignal(view.evidence_filed) as filed:
        qtbot.mouseClick(view.verdict.file_button, Qt.MouseButton.LeftButton)
    assert filed.args == [str(observation.iri)]
    assert kb.dirty  # filed into the open KB: the window's Save keeps it
    save_kb(kb)
    links = evidence_links(load_kb(kb_copy), observation.iri)
    assert [(link.doi, link.relation, link.pages) for link in links] == [
        ("10.1073/pnas.0403760101", "supports", supporting[0].pages)]
    assert links[0].quote_status == "verified"


def test_nothing_filed_without_a_selected_observation(qtbot, view: EvidenceView) -> None:
    from kmds_desktop.app.verdicts import Judge

    view.kb_target = lambda: (None, None)
    view.judge_factory = lambda: Judge(None, "offline")
    qtbot.keyClicks(view.questions.line, CLAIM)
    qtbot.mouseClick(view.verdict.judge_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.verdict.verdict is not None, timeout=60_000)
    with qtbot.waitSignal(view.message) as said:
        qtbot.mouseClick(view.verdict.file_button, Qt.MouseButton.LeftButton)
    assert said.args[0] == "warning" and "Select the observation" in said.args[1]


def test_a_search_reads_only_a_reviews_included_records_and_a_record_is_corrected_by_hand(
        qtbot, jobs, store_path: Path, data_home: Path) -> None:
    from kmds_desktop.literature.reviews.store import ReviewStore
    from kmds_desktop.literature.screening.records import ScreeningRecord

    session = EvidenceSession(store_path)
    papers = {Path(p.path).name: p for p in session.papers()}
    pnas, other = papers["pnas.0403760101.pdf"], papers["14712598.2019.1685489.pdf"]
    session.store.pin_record(pnas.id, 7001, ("pubmed", "15044725"))
    session.store.pin_record(other.id, 7002, ("pubmed", "31714820"))
    reviews = ReviewStore()
    reviews.create_review("adipokines")
    reviews.add_records("adipokines", [ScreeningRecord("pubmed", "15044725", title="CTRPs"),
                                       ScreeningRecord("pubmed", "31714820", title="IL-2")], origin="test")
    reviews.decide("adipokines", ("pubmed", "15044725"), "include")
    reviews.decide("adipokines", ("pubmed", "31714820"), "exclude", reason="wrong population")
    reviews.close()
    widget = EvidenceView(jobs, session)
    qtbot.addWidget(widget)
    widget.show()
    try:
        qtbot.waitUntil(lambda: widget.scope.combo.count() == 2, timeout=30_000)
        question = "How is bempegaldesleukin designed to overcome Treg affinity for IL-2?"
        _search(qtbot, widget, question)
        assert Path(widget.passages.hit(0).file).name == "14712598.2019.1685489.pdf"  # all papers read
        widget.scope.combo.setCurrentIndex(1)  # "Included in review: adipokines"
        widget.passages.clear()
        qtbot.mouseClick(widget.questions.find_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: widget.passages.count() > 0, timeout=60_000)
        shown = {widget.passages.hit(i).paper_id for i in range(widget.passages.count())}
        assert shown == {pnas.id}  # the excluded record's paper is not read

        # the shown page's record, corrected by hand and given back to the matcher
        with qtbot.waitSignal(widget.page_shown, timeout=30_000):
            qtbot.mouseClick(widget.passages.viewport(), Qt.MouseButton.LeftButton,
                             pos=widget.passages.visualItemRect(widget.passages.item(0)).center())
        assert "7001 (set by hand)" in widget.record.label.text()
        widget.record.record_edit.clear()
        qtbot.keyClicks(widget.record.record_edit, "7003")
        qtbot.mouseClick(widget.record.set_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "7003" in widget.record.label.text(), timeout=30_000)
        assert (session.store.paper(pnas.id).record_id, session.store.paper(pnas.id).record_match) == (
            7003, "manual")
        qtbot.mouseClick(widget.record.clear_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "not matched" in widget.record.label.text(), timeout=30_000)
        assert session.store.paper(pnas.id).record_match is None
    finally:
        jobs.shutdown()
        session.close()
