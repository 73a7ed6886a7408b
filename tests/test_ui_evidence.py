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
def view(qtbot, jobs, store_path: Path):
    session = EvidenceSession(store_path)
    widget = EvidenceView(jobs, session)
    qtbot.addWidget(widget)
    widget.resize(1400, 900)
    widget.show()
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
                                                                   data_home: Path) -> None:
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
    assert (data_home / "fulltext" / "fulltext.sqlite").is_file()


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
