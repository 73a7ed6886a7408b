"""The question/answer panel on the real orchestrator: offline, fake Ollama (streaming), citations."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QTextDocument
from support.fake_ollama import ModelScript

from kmds_desktop.config import Settings
from kmds_desktop.ui.ask.panel import ResultsModel, answer_html

ANSWER_TIMEOUT = 120_000  # the first question loads the embedding model


@pytest.fixture()
def kb_path(kmds_data):
    return kmds_data / "example_analytics_kb_app_workflow.xml"


def _ollama_settings(fake_ollama, model: str) -> Settings:
    """Default settings with the scripted Ollama server's ``model`` as the LLM."""
    settings = Settings()
    settings.llm.backend = "ollama"
    settings.llm.ollama_host = fake_ollama.url
    settings.llm.ollama_model = model
    return settings


def _window(qtbot, make_window, kb_path, settings):
    window = make_window(settings)
    with qtbot.waitSignal(window.kb_loaded, timeout=30_000):
        window.open_kb(kb_path)
    return window


def _ask(qtbot, window, question):
    window.ask.question.setPlainText(question)
    with qtbot.waitSignal(window.ask.answer_finished, timeout=ANSWER_TIMEOUT) as sig:
        qtbot.keyClick(window.ask.question, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    return sig.args[0]


def _click_citation(qtbot, browser_view, n):
    """Click the visible "[n]" link in the answer view with the mouse."""
    cursor = browser_view.document().find(f"[{n}]", 0, QTextDocument.FindFlag.FindCaseSensitively)
    assert not cursor.isNull(), browser_view.toPlainText()
    cursor.setPosition(cursor.selectionStart() + 1)
    rect = browser_view.cursorRect(cursor)
    point = QPoint(rect.center().x() + 2, rect.center().y())
    qtbot.mouseClick(browser_view.viewport(), Qt.MouseButton.LeftButton, pos=point)


def test_offline_answer_citations_route_and_table(qtbot, make_window, kb_path):
    settings = Settings()
    settings.llm.backend = "offline"
    window = _window(qtbot, make_window, kb_path, settings)
    result = _ask(qtbot, window, "What data quality problems were found?")

    panel = window.ask
    assert result.backend == "offline" and result.results
    assert panel.results.rowCount() == len(result.results)
    assert "[1]" in panel.answer.toPlainText()
    assert "offline" in panel.route_editor.summary.text()
    assert result.intent_class in panel.route_editor.summary.text()
    assert panel.question.history[-1] == "What data quality problems were found?"

    _click_citation(qtbot, panel.answer, 1)
    assert window.browser.current_iri() == result.results[0]["iri"]
    assert result.results[0]["obs_type"] in window.browser.details.toPlainText()

    last = len(result.results)
    panel.table.doubleClicked.emit(panel.results.index(last - 1, 0))
    assert window.browser.current_iri() == result.results[last - 1]["iri"]

    # The question stays in the box next to its answer; the finding column stays readable.
    assert panel.question.toPlainText() == "What data quality problems were found?"
    widths = [panel.table.columnWidth(c) for c in range(panel.results.columnCount())]
    assert widths[1] >= panel.table.viewport().width() // 4, widths
    assert widths[4] <= 140, widths  # a long workflow name is capped (type and category are whole)
    window.splitter.setSizes([500, 380, 500])  # a narrow centre panel: the finding still gets room
    qtbot.waitUntil(lambda: panel.table.columnWidth(1) >= panel.table.viewport().width() // 3)


def test_edit_route_and_rerun(qtbot, make_window, kb_path):
    settings = Settings()
    settings.llm.backend = "offline"
    window = _window(qtbot, make_window, kb_path, settings)
    _ask(qtbot, window, "Which observations describe the data?")
    editor = window.ask.route_editor
    editor.template.setCurrentIndex(editor.template.findData("model_selection_search"))
    editor.obs_type.setText("Model Selection Observation")
    with qtbot.waitSignal(window.ask.answer_finished, timeout=ANSWER_TIMEOUT) as sig:
        editor.rerun_button.click()
    result = sig.args[0]
    assert result.intent_class == "model_selection_search" and result.fallback_reason is None
    assert result.route.filters.obs_type_filter == "Model Selection Observation"
    assert {r["category"] for r in result.results} == {"model_selection"}
    assert "Route edited by the user" in editor.summary.text()

    editor.seq_min.setValue(5)
    editor.seq_max.setValue(2)
    editor.rerun_button.click()
    assert editor.error.isVisible() and "empty" in editor.error.text()


def test_rerun_without_an_edit_gives_the_same_records_and_says_why_as_before(
        qtbot, make_window, kb_path, fake_ollama):
    """The LLM's route (with a workflow filter the editor has no field for) re-run unchanged runs the
    same route: the same records, its own explanation, not "Route edited by the user"."""
    route = {"intent_class": "exploratory_search",
             "filters": {"obs_type_filter": "Data Quality Observation", "workflow": "ITSM"},
             "explanation": "The question asks about data quality."}
    fake_ollama.models["fake-llm"] = ModelScript(replies=[json.dumps(route), "Problems [1]."])
    settings = _ollama_settings(fake_ollama, "fake-llm")
    window = _window(qtbot, make_window, kb_path, settings)
    first = _ask(qtbot, window, "What problems were found in the data?")
    editor = window.ask.route_editor
    assert editor.template.currentData() == first.route.intent_class
    with qtbot.waitSignal(window.ask.answer_finished, timeout=ANSWER_TIMEOUT) as sig:
        qtbot.mouseClick(editor.rerun_button, Qt.MouseButton.LeftButton)
    again = sig.args[0]
    assert [r["iri"] for r in again.results] == [r["iri"] for r in first.results]
    assert again.route.filters.workflow == first.route.filters.workflow
    assert "Route edited by the user" not in editor.summary.text()
    assert "asks about data quality" in editor.summary.text()


def test_rerun_of_the_offline_router_s_route_finds_what_it_found(qtbot, make_window):
    """Offline, "how were rows with missing values handled?" is read as exploratory from its meaning
    and answered from the data representation record too; Re-run without an edit gives the same
    records (run as a fence on exploratory records, it lost that record)."""
    demo = Path(__file__).resolve().parent.parent / "resources" / "demo_kb.xml"
    settings = Settings()
    settings.llm.backend = "offline"
    window = _window(qtbot, make_window, demo, settings)
    first = _ask(qtbot, window, "How were rows with missing values handled?")
    assert first.route.from_offline_router and "data_representation" in {r["category"] for r in first.results}
    editor = window.ask.route_editor
    with qtbot.waitSignal(window.ask.answer_finished, timeout=ANSWER_TIMEOUT) as sig:
        qtbot.mouseClick(editor.rerun_button, Qt.MouseButton.LeftButton)
    again = sig.args[0]
    assert [r["iri"] for r in again.results] == [r["iri"] for r in first.results]
    assert "Route edited by the user" not in editor.summary.text()


def test_fake_ollama_streams_the_answer_and_shows_the_backend(qtbot, make_window, kb_path, fake_ollama):
    route = {"intent_class": "exploratory_search", "filters": {"obs_type_filter": "Data Quality Observation"},
             "explanation": "The question asks about data quality."}
    answer = ("Timestamps had **inconsistent formats** [1], and the resolution time had to be derived [2]. "
              "Both shaped the data preparation.")
    script = ModelScript(replies=[json.dumps(route), answer], chunk_size=6, delay=0.05)
    fake_ollama.models["fake-llm"] = script
    settings = _ollama_settings(fake_ollama, "fake-llm")
    window = _window(qtbot, make_window, kb_path, settings)
    pieces = []
    window.ask.question.setPlainText("What data quality issues were there?")
    job = window.ask.ask()
    job.chunk.connect(pieces.append)
    with qtbot.waitSignal(window.ask.answer_finished, timeout=ANSWER_TIMEOUT) as sig:
        pass
    result = sig.args[0]
    assert result.backend == "ollama" and result.synthesis == "llm"
    assert result.intent_class == "exploratory_search"
    assert "data quality" in window.ask.route_editor.summary.text().lower()
    text_pieces = [p for p in pieces if isinstance(p, str)]
    assert len(text_pieces) >= 2 and "".join(text_pieces) == answer  # streamed, in order
    assert "inconsistent formats" in window.ask.answer.toPlainText()
    assert len(fake_ollama.completion_requests()) == 2
    _click_citation(qtbot, window.ask.answer, 1)
    assert window.browser.current_iri() == result.results[0]["iri"]


def test_unreachable_ollama_falls_back_and_says_why(qtbot, make_window, kb_path):
    settings = Settings()
    settings.llm.backend = "ollama"
    settings.llm.ollama_host = "http://127.0.0.1:9"  # nothing listens there
    window = _window(qtbot, make_window, kb_path, settings)
    result = _ask(qtbot, window, "Which models were selected?")
    assert result.fallback_reason and result.results
    assert result.intent_class == "model_selection_search"  # the offline router's route, the model's floor
    summary = window.ask.route_editor.summary.text()
    assert "Fell back to the offline router" in summary
    assert summary.count("Fell back to") == 1 and "Offline router:" in summary  # said once, and its reading
    assert "Cannot reach" not in summary and "Cannot reach" in window.ask.state.text()  # the cause, once
    assert "Fell back to the offline router (see Route)" in window.ask.state.text()
    assert window.ask.answer.toPlainText().strip()


def test_question_history_up_down(qtbot):
    from kmds_desktop.ui.ask.panel import QuestionEdit

    box = QuestionEdit()
    qtbot.addWidget(box)
    box.history = ["first question", "second question"]
    box.setPlainText("draft")
    qtbot.keyClick(box, Qt.Key.Key_Up)
    assert box.toPlainText() == "second question"
    qtbot.keyClick(box, Qt.Key.Key_Up)
    assert box.toPlainText() == "first question"
    qtbot.keyClick(box, Qt.Key.Key_Down)
    qtbot.keyClick(box, Qt.Key.Key_Down)
    assert box.toPlainText() == "draft"

    # After asking, the box still shows the question just asked: Up goes to the one before it.
    box.add_to_history("third question")
    box.setPlainText("third question")
    qtbot.keyClick(box, Qt.Key.Key_Up)
    assert box.toPlainText() == "second question"
    qtbot.keyClick(box, Qt.Key.Key_Down)
    assert box.toPlainText() == "third question"


def test_results_model_passes_qtmodeltester(qtmodeltester):
    model = ResultsModel()
    model.set_results([
        {"iri": "x#a", "finding": "A finding\nsecond line", "obs_type": "T", "category": "exploratory",
         "workflow_name": "wf", "finding_seq": 1, "score": 0.5},
        {"iri": "x#b", "finding": "", "obs_type": "T", "category": "model_selection", "workflow_name": "",
         "finding_seq": None, "score": None},
    ])
    qtmodeltester.check(model, force_py=True)


def test_answer_html_links_only_valid_citations():
    out = answer_html("See [1] and [3], not [0].", 2)
    assert 'href="cite:1"' in out and 'href="cite:3"' not in out and "[0]" in out


def test_answer_html_separates_lists_from_text():
    out = answer_html("Relevance Observation:\n- one [1]\n- two [2]\nData:\n- three [3]", 3)
    assert out.count("<ul>") == 2 and "<p>Data:</p>" in out


def test_cancel_from_the_progress_strip_stops_a_slow_model(qtbot, make_window, kb_path, fake_ollama):
    route = {"intent_class": "all_observations_search", "filters": {}, "explanation": "All."}
    fake_ollama.models["slow-llm"] = ModelScript(replies=[json.dumps(route), "late answer [1]"], delay=30)
    settings = _ollama_settings(fake_ollama, "slow-llm")
    window = _window(qtbot, make_window, kb_path, settings)
    window.ask.question.setPlainText("Everything please")
    job = window.ask.ask()
    qtbot.waitUntil(lambda: window.progress_strip.row_for("ask") is not None, timeout=10_000)
    assert window.progress_strip.isVisible()
    qtbot.waitUntil(lambda: len(fake_ollama.requests_for("/api/chat")) >= 1, timeout=60_000)
    # the model answers after 30 s: the job ends well before, so the request was aborted, not waited out
    with qtbot.waitSignal(job.finished, timeout=20_000):
        window.progress_strip.row_for("ask").cancel_button.click()
    assert not fake_ollama.requests_for("/api/chat")[-1].end, "the model had not answered"
    assert job.state == "cancelled" and window.ask.state.text() == "Cancelled."
    assert window.progress_strip.row_for("ask") is None


def _click_menu_path(qtbot, window, *titles: str) -> None:
    """Open the menu bar's menu ``titles[0]`` and click through its (sub)menu entries, as a user does."""
    bar = window.menuBar()
    action = next(a for a in bar.actions() if a.text() == titles[0])
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.actionGeometry(action).center())
    for title in titles[1:]:
        menu = action.menu()
        qtbot.waitUntil(menu.isVisible, timeout=5_000)
        action = next(a for a in menu.actions() if a.text() == title)
        qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())


def test_journey_ask_then_open_another_kb(qtbot, make_window, kb_path, kmds_data):
    """An answer about one KB does not stay on screen once another KB is open: its records and
    citations are cleared and the state line says why; asking again answers from the new KB."""
    other = kmds_data / "example_ml_kb_exp_workflow.xml"
    settings = Settings()
    settings.llm.backend = "offline"
    settings.ui.recent_files = [str(other)]
    window = _window(qtbot, make_window, kb_path, settings)
    panel = window.ask

    qtbot.mouseClick(panel.question, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(panel.question, "What data quality problems were found?")
    with qtbot.waitSignal(panel.answer_finished, timeout=ANSWER_TIMEOUT) as first:
        qtbot.mouseClick(panel.ask_button, Qt.MouseButton.LeftButton)
    before = first.args[0]
    assert before.results and "[1]" in panel.answer.toPlainText()
    old_iris = {r["iri"] for r in before.results}

    with qtbot.waitSignal(window.kb_loaded, timeout=30_000):
        _click_menu_path(qtbot, window, "&File", "Open &recent", str(other))
    assert window.kb.path.name == other.name
    assert panel.answer.toPlainText() == "" and panel.results.rowCount() == 0
    assert not panel.route_editor.rerun_button.isEnabled()
    assert other.name in panel.state.text()  # the state line names the KB now open

    panel.question.selectAll()
    qtbot.keyClicks(panel.question, "Which models were compared?")
    with qtbot.waitSignal(panel.answer_finished, timeout=ANSWER_TIMEOUT) as second:
        qtbot.mouseClick(panel.ask_button, Qt.MouseButton.LeftButton)
    after = second.args[0]
    assert after.results and not ({r["iri"] for r in after.results} & old_iris)
    _click_citation(qtbot, panel.answer, 1)
    assert window.browser.current_iri() == after.results[0]["iri"]
    assert window.messages.current is None or "not in the open" not in window.messages.current.text


def test_an_answer_still_running_when_another_kb_opens_is_dropped(qtbot, make_window, kb_path, kmds_data,
                                                                   fake_ollama):
    fake_ollama.models["slow"] = ModelScript(replies=["never shown"], delay=8)
    settings = _ollama_settings(fake_ollama, "slow")
    window = _window(qtbot, make_window, kb_path, settings)
    panel = window.ask
    job = panel.ask("What data quality problems were found?")
    assert job is not None
    with qtbot.waitSignal(window.kb_loaded, timeout=30_000):
        window.open_kb(kmds_data / "example_ml_kb_exp_workflow.xml")
    qtbot.waitUntil(lambda: job.done, timeout=ANSWER_TIMEOUT)
    assert job.state == "cancelled"
    assert panel.result is None and panel.results.rowCount() == 0 and panel.answer.toPlainText() == ""
    assert "Cancelled" not in panel.state.text()  # it was not the user's cancel


def _fits(table, col: int, text: str) -> bool:
    """Whether ``text`` is readable whole in ``col``: on one line, or on the two lines of a wrapped row."""
    metrics = table.fontMetrics()
    width = table.columnWidth(col) - 6  # the delegate's margins
    if metrics.horizontalAdvance(text) <= width:
        return True
    words = text.split()
    two_lines = table.wordWrap() and table.rowHeight(0) >= 2 * metrics.lineSpacing()
    return two_lines and any(max(metrics.horizontalAdvance(" ".join(words[:i])),
                                 metrics.horizontalAdvance(" ".join(words[i:]))) <= width
                             for i in range(1, len(words)))


def test_answer_route_box_and_record_columns_show_their_whole_text(qtbot, make_window, kb_path):
    """After an answer clicked for in the full window: the Route box's last line (the backend) is not
    cut, its whole text is in the tooltip, the state line counts records in agreement, and the type
    and category columns show whole words ("Data Quality Observation", not "Data Q…")."""
    settings = Settings()
    settings.llm.backend = "offline"
    window = _window(qtbot, make_window, kb_path, settings)
    window.resize(1600, 1000)
    window.show()
    panel = window.ask
    qtbot.mouseClick(panel.question, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(panel.question, "What data quality problems were found?")
    with qtbot.waitSignal(panel.answer_finished, timeout=ANSWER_TIMEOUT) as sig:
        qtbot.mouseClick(panel.ask_button, Qt.MouseButton.LeftButton)
    result = sig.args[0]
    qtbot.wait(100)  # the splitter and the table settle

    summary = panel.route_editor.summary
    qtbot.waitUntil(lambda: summary.height() >= summary.heightForWidth(summary.width()))
    assert "Backend: offline · answer:" in summary.toolTip(), summary.toolTip()
    n = len(result.results)
    assert panel.state.text().endswith(f"; {n} record{'' if n == 1 else 's'}."), panel.state.text()

    table, model = panel.table, panel.results
    for row in range(model.rowCount()):
        for col in (2, 3):
            text = model.index(row, col).data()
            assert _fits(table, col, text), (text, table.columnWidth(col))
    assert table.columnWidth(1) >= table.viewport().width() // 4  # the finding keeps its room
    window.splitter.setSizes([500, 380, 500])  # narrow: whole words on two lines, or capped with tooltips
    qtbot.waitUntil(lambda: table.columnWidth(1) >= table.viewport().width() // 3)
    assert model.index(0, 2).data(Qt.ItemDataRole.ToolTipRole) == model.index(0, 2).data()


def test_another_kb_resets_the_route_editors_filters(qtbot, make_window, kb_path, kmds_data):
    """Filters typed into the route editor for one KB are gone once another KB opens (from the menu):
    a re-run there must not be narrowed by the previous KB's type or keyword."""
    other = kmds_data / "example_ml_kb_exp_workflow.xml"
    settings = Settings()
    settings.llm.backend = "offline"
    settings.ui.recent_files = [str(other)]
    window = _window(qtbot, make_window, kb_path, settings)
    panel = window.ask
    editor = panel.route_editor
    qtbot.mouseClick(panel.question, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(panel.question, "What data quality problems were found?")
    with qtbot.waitSignal(panel.answer_finished, timeout=ANSWER_TIMEOUT):
        qtbot.mouseClick(panel.ask_button, Qt.MouseButton.LeftButton)
    assert editor.obs_type.text()  # the route's type filter is shown
    editor.keyword.setFocus()
    qtbot.keyClicks(editor.keyword, "timestamps")
    editor.seq_min.setValue(2)

    with qtbot.waitSignal(window.kb_loaded, timeout=30_000):
        _click_menu_path(qtbot, window, "&File", "Open &recent", str(other))
    assert editor.obs_type.text() == "" and editor.keyword.text() == ""
    assert editor.seq_min.value() == -1 and editor.seq_max.value() == -1
    assert editor.template.currentIndex() == 0 and not editor.rerun_button.isEnabled()
    assert editor.summary.toolTip() == ""


def test_the_llm_status_follows_the_server_through_each_answer(qtbot, make_window, kb_path, fake_ollama):
    """"ready" while the model answers; "not answering" once it fails, without waiting for a probe;
    and the line under the quoted fallback never says the LLM answered."""
    route = {"intent_class": "exploratory_search", "filters": {"obs_type_filter": "Data Quality Observation"},
             "explanation": "The question asks about data quality."}
    fake_ollama.models["fake-llm"] = ModelScript(replies=[json.dumps(route), "Problems [1]."],
                                                 statuses=[200, 200, 500])
    settings = _ollama_settings(fake_ollama, "fake-llm")
    window = _window(qtbot, make_window, kb_path, settings)
    good = _ask(qtbot, window, "What data quality issues were there?")
    assert good.synthesis == "llm"
    assert window.llm_status.text() == "LLM: ollama · fake-llm (ready)"
    failed = _ask(qtbot, window, "Which data quality problems were found?")
    assert failed.synthesis == "extractive"
    assert window.llm_status.text() == "LLM: ollama · fake-llm (not answering)"
    state = window.ask.state.text()
    assert "Answered by" not in state and "did not answer" in state


def test_a_new_question_clears_the_old_records_and_a_banner_ends_with_its_event(
        qtbot, make_window, kb_path, fake_ollama):
    route = {"intent_class": "exploratory_search", "filters": {"obs_type_filter": "Data Quality Observation"},
             "explanation": "The question asks about data quality."}
    fake_ollama.models["slow-llm"] = ModelScript(replies=[json.dumps(route), "Problems [1]."], delay=1.5)
    settings = _ollama_settings(fake_ollama, "slow-llm")
    window = _window(qtbot, make_window, kb_path, settings)
    panel = window.ask
    first = _ask(qtbot, window, "What data quality issues were there?")
    assert panel.results.rowCount() == len(first.results) > 0
    panel.question.setPlainText("Which models were compared?")
    qtbot.keyClick(panel.question, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    # while the slow model works, nothing of the first answer is left beside the new question
    assert panel.results.rowCount() == 0
    assert "Choosing how to search" in panel.route_editor.summary.text()
    assert not panel.route_editor.rerun_button.isEnabled()
    # asking again meanwhile is refused with a banner...
    qtbot.keyClick(panel.question, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert window.messages.isVisible() and "still running" in window.messages.label.text()
    # ...that ends with the answer it was about
    with qtbot.waitSignal(panel.answer_finished, timeout=ANSWER_TIMEOUT):
        pass
    assert not window.messages.isVisible()
    # a message about something else stays
    window.messages.show_message("Literature: 3 documents could not be read.", "warning", topic="literature")
    _ask(qtbot, window, "What data quality issues were there?")
    assert window.messages.isVisible() and "Literature" in window.messages.label.text()


def _waiting_reply(release):
    """A scripted reply that comes only once ``release`` is set (a model still thinking)."""
    def reply(_prompt, _body):
        release.wait(60)
        return "late answer [1]"
    return reply


def test_cancel_while_the_answer_is_written_says_cancelled_in_the_route_box(
        qtbot, make_window, kb_path, fake_ollama):
    """The Route box never names an answer that was not given: while the model writes it says so,
    and after Cancel it names the route that was chosen and that the answer was cancelled (it said
    "answer: offline", as if an offline answer had been given)."""
    release = threading.Event()
    route = {"intent_class": "model_selection_search", "filters": {}, "explanation": "Models were compared."}
    fake_ollama.models["slow-writer"] = ModelScript(replies=[json.dumps(route), _waiting_reply(release)])
    window = _window(qtbot, make_window, kb_path, _ollama_settings(fake_ollama, "slow-writer"))
    panel = window.ask
    summary = panel.route_editor.summary
    try:
        qtbot.mouseClick(panel.question, Qt.MouseButton.LeftButton)
        qtbot.keyClicks(panel.question, "Which model was selected and why?")
        qtbot.mouseClick(panel.ask_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "being written" in summary.text(), timeout=ANSWER_TIMEOUT)
        assert "model_selection_search" in summary.text() and "offline" not in summary.text()
        with qtbot.waitSignal(panel.job.finished, timeout=20_000):
            qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
    finally:
        release.set()
    text = _plain_text(summary)
    assert panel.state.text() == "Cancelled."
    assert "answer: cancelled" in text, text
    assert "model_selection_search" in text  # the route that had been chosen
    assert "offline" not in text and "llm" not in text.split("answer:")[1], text
    assert panel.route_editor.summary.toolTip().endswith("answer: cancelled")


def test_cancel_before_a_route_is_chosen_says_so_in_the_route_box(qtbot, make_window, kb_path, fake_ollama):
    release = threading.Event()
    fake_ollama.models["slow-router"] = ModelScript(replies=[_waiting_reply(release)])
    window = _window(qtbot, make_window, kb_path, _ollama_settings(fake_ollama, "slow-router"))
    panel = window.ask
    try:
        qtbot.mouseClick(panel.question, Qt.MouseButton.LeftButton)
        qtbot.keyClicks(panel.question, "Which model was selected and why?")
        qtbot.keyClick(panel.question, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        qtbot.waitUntil(lambda: len(fake_ollama.requests_for("/api/chat")) >= 1, timeout=ANSWER_TIMEOUT)
        with qtbot.waitSignal(panel.job.finished, timeout=20_000):
            qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
    finally:
        release.set()
    text = _plain_text(panel.route_editor.summary)
    assert text.startswith("Cancelled before a route was chosen"), text
    assert "Choosing how to search" not in text and "answer:" not in text
    assert not panel.route_editor.rerun_button.isEnabled()


def _plain_text(label) -> str:
    doc = QTextDocument()
    doc.setHtml(label.text())
    return " ".join(doc.toPlainText().split())


def test_a_streamed_answer_that_states_nothing_becomes_the_records_the_model_read(
        qtbot, make_window, kb_path, fake_ollama):
    """A 1.5B model answered some questions with only "[1]": the window ends on the records the model read,
    in their own words and clickable, and the line under the answer says so (``ask/answer_check.py``)."""
    route = {"intent_class": "exploratory_search", "filters": {"obs_type_filter": "Data Quality Observation"}}
    fake_ollama.models["fake-llm"] = ModelScript(replies=[json.dumps(route), "[1]"])
    window = _window(qtbot, make_window, kb_path, _ollama_settings(fake_ollama, "fake-llm"))
    result = _ask(qtbot, window, "What data quality issues were there?")
    shown = window.ask.answer.toPlainText()
    assert result.synthesis == "llm"
    assert shown.startswith("The model wrote no statement (only \u201c[1]\u201d)")
    for n in result.given_records:
        assert " ".join(result.results[n - 1]["finding"].split()[:5]) in " ".join(shown.split())
    assert "The records the model read are shown in their own words" in shown
    _click_citation(qtbot, window.ask.answer, result.given_records[-1])
    assert window.browser.current_iri() == result.results[result.given_records[-1] - 1]["iri"]


def test_a_model_route_far_from_the_question_runs_free_text_and_the_other_route_is_a_click_away(
        qtbot, make_window, fake_ollama):
    """The 1.5B model sent "why was island left out of the features?" to modelling choices, whose records
    are far from the question: the window answers from the free-text search, the Route box says why, and
    **Use the other route** runs the model's route."""
    demo = Path(__file__).resolve().parent.parent / "resources" / "demo_kb.xml"
    route = {"intent_class": "modelling_choice_search", "listing": False}
    fake_ollama.models["fake-llm"] = ModelScript(
        replies=[lambda prompt, body: json.dumps(route) if "Reply with one JSON object" in prompt
                 else "Island is a proxy for species, so it was left out [1]."])
    window = _window(qtbot, make_window, demo, _ollama_settings(fake_ollama, "fake-llm"))
    result = _ask(qtbot, window, "Why was island left out of the features?")
    editor = window.ask.route_editor
    assert result.intent_class == "semantic_search"
    assert "Ran the free-text search over the model's template modelling choice" in editor.summary.toolTip()
    assert "island is left out of the features" in result.results[0]["finding"]
    assert "Island is a proxy for species" in window.ask.answer.toPlainText()
    assert editor.other_button.isVisibleTo(editor)
    with qtbot.waitSignal(window.ask.answer_finished, timeout=ANSWER_TIMEOUT) as sig:
        qtbot.mouseClick(editor.other_button, Qt.MouseButton.LeftButton)
    again = sig.args[0]
    assert again.intent_class == "modelling_choice_search"
    assert "modelling_choice_search" in editor.summary.text()


def test_an_edit_while_the_answer_is_written_is_said_under_it_and_ask_waits_for_the_answer(
        qtbot, make_window, kb_path, fake_ollama):
    """The KB edited while the model writes: Ask stays off until the answer ends (an edit or saved
    Preferences turned it on mid-answer), and the line under the finished answer says a cited record
    may have changed (the note was dropped for an answer still running)."""
    from kmds_desktop.app.ask import STALE_NOTE

    route = '{"intent_class": "exploratory_search", "filters": {}}'
    fake_ollama.models["slow"] = ModelScript(replies=[route, "Two data quality issues were recorded [1]."],
                                             delay=1.5)
    window = _window(qtbot, make_window, kb_path, _ollama_settings(fake_ollama, "slow"))
    panel = window.ask
    job = panel.ask("What data quality problems were found?")
    assert job is not None and not panel.ask_button.isEnabled()
    window.session.edited()  # as the KB browser's edit announces it
    assert not panel.ask_button.isEnabled()  # still answering
    qtbot.waitUntil(lambda: job.done, timeout=ANSWER_TIMEOUT)
    assert job.state == "done", job.state
    assert panel.state.text().endswith(STALE_NOTE.strip()) and panel.ask_button.isEnabled()
