"""The screening window, driven through its real widgets and keys: decisions land in the session's
store, survive a new session on the same data folder, match the PRISMA diagram, and the next record
never waits for a training."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from kmds_desktop.app import screening as app_screening
from kmds_desktop.app.screening_start import close_session, open_for_documents, open_store_session

QUESTION = "cystic fibrosis lung function in adults"
TOPICS = [
    ("Cystic fibrosis lung function decline in adults", "Adults with cystic fibrosis lost lung function."),
    ("Mouse model of airway inflammation", "Mice were given an airway irritant in vitro."),
    ("Inhaled therapy for cystic fibrosis", "A trial of inhaled therapy improved FEV1 in adults."),
    ("Diabetes in older people", "A cohort of older people with diabetes."),
    ("Sweat chloride testing in infants", "Newborn screening for cystic fibrosis by sweat chloride."),
    ("Exercise and lung function in cystic fibrosis", "Exercise training in adults with cystic fibrosis."),
]


def documents(n: int = 6) -> list[dict]:
    docs = []
    for i in range(n):
        title, abstract = TOPICS[i % len(TOPICS)]
        docs.append({
            "id": 100 + i, "source_name": "pubmed", "external_id": str(31000000 + i),
            "title": f"{title} ({i})", "abstract": abstract, "authors": ["Smith J", "Jones K"],
            "year": 2020 + i % 4, "publication": "Thorax", "rank": i + 1,
            "found_by": ["cystic & fibrosis"] if "fibrosis" in title.lower() else ["lung & function"],
        })
    return docs


@pytest.fixture()
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "screening" / "screening.sqlite3"


@pytest.fixture()
def window(qtbot, store_path):
    from kmds_desktop.ui.screening.window import ScreeningWindow

    session = open_for_documents(documents(), question=QUESTION, origin="search A", store_path=store_path)
    win = ScreeningWindow(session)
    qtbot.addWidget(win)
    win.resize(1600, 1000)
    win.show()
    qtbot.waitExposed(win)
    win.activateWindow()
    yield win
    win.close()


def key(qtbot, win, k) -> None:
    """One key press as a user makes it: to the widget with focus (the window when none has)."""
    target = win.focusWidget() or win
    qtbot.keyClick(target, k)


def title_on_screen(win) -> str:
    return win.session.view().record.title


def test_keyboard_journey_decisions_in_the_store(qtbot, window, store_path):
    s = window.session
    reasons = s.review.reasons
    first = title_on_screen(window)
    assert first in window.record_view.toPlainText()
    key(qtbot, window, Qt.Key.Key_I)
    second = title_on_screen(window)
    assert second != first and second in window.record_view.toPlainText()
    key(qtbot, window, Qt.Key.Key_2)  # the second reason: chosen, nothing decided
    assert title_on_screen(window) == second and window.session.view().decision is None
    key(qtbot, window, Qt.Key.Key_E)  # exclude with it
    key(qtbot, window, Qt.Key.Key_U)  # undo: the second record comes back, undecided
    assert title_on_screen(window) == second and window.session.view().decision is None
    assert "Not decided" in window.decision_label.text()
    key(qtbot, window, Qt.Key.Key_1)  # exclude it with the first reason instead
    key(qtbot, window, Qt.Key.Key_E)
    assert title_on_screen(window) not in (first, second) and window.session.view().decision is None
    key(qtbot, window, Qt.Key.Key_Left)  # back: the last decided (the second)
    key(qtbot, window, Qt.Key.Key_Left)  # back again: the first
    assert title_on_screen(window) == first
    assert window.decided_list.currentItem().text().endswith(first)
    key(qtbot, window, Qt.Key.Key_3)  # change the first to an exclude (third reason)
    key(qtbot, window, Qt.Key.Key_E)
    assert title_on_screen(window) == second  # the next decided record, still browsing
    key(qtbot, window, Qt.Key.Key_Right)  # forward past the last decided: the queue again
    assert window.session.view().decision is None
    third = title_on_screen(window)
    key(qtbot, window, Qt.Key.Key_M)

    by_title = {r.key: r.title for r in s.records}
    stored = {by_title[k]: (d.decision, d.reason) for k, d in s.store.decisions(s.review.id).items()}
    assert stored[first] == ("exclude", reasons[2])
    assert stored[second] == ("exclude", reasons[0])
    assert stored[third][0] == "maybe"
    assert len(stored) == 3
    assert window.progress_label.text() == "3 of 6 screened · 0 included · 3 since the last include"
    assert window.decided_label.text() == "Decided (3)"


def test_buttons_note_and_decided_list(qtbot, window):
    s = window.session
    window.note_edit.setText("adults only")
    qtbot.mouseClick(window.include_button, Qt.MouseButton.LeftButton)
    window.reasons_list.setCurrentRow(4)
    qtbot.mouseClick(window.exclude_button, Qt.MouseButton.LeftButton)
    first_key = s.decided_keys()[0]
    assert s.decisions[first_key].note == "adults only"
    assert s.decisions[s.decided_keys()[1]].reason == s.review.reasons[4]
    assert window.note_edit.text() == ""  # a new record: an empty note
    item = window.decided_list.item(0)
    qtbot.mouseClick(window.decided_list.viewport(), Qt.MouseButton.LeftButton,
                     pos=window.decided_list.visualItemRect(item).center())
    assert s.current.key == first_key
    assert window.note_edit.text() == "adults only"
    assert "Decided: include" in window.decision_label.text()


def test_a_new_session_on_the_same_folder_finds_every_decision(qtbot, window, store_path):
    from kmds_desktop.ui.screening.window import ScreeningWindow

    for k in (Qt.Key.Key_I, Qt.Key.Key_2, Qt.Key.Key_E, Qt.Key.Key_M, Qt.Key.Key_I):
        key(qtbot, window, k)
    old = window.session
    made = {k: (d.decision, d.reason) for k, d in old.decisions.items()}
    # The app is killed: the old session is never closed; a new one opens the same data folder.
    again = open_store_session(old.review.id, store_path)
    try:
        assert {k: (d.decision, d.reason) for k, d in again.decisions.items()} == made
        assert again.decided_keys() == old.decided_keys()
        win2 = ScreeningWindow(again)
        qtbot.addWidget(win2)
        assert win2.progress_label.text() == old.progress().line()
        assert win2.decided_list.count() == 4
        assert again.current is not None and again.current.key not in made
        # Opening the same run again adds nothing and counts nothing twice.
        again2 = open_for_documents(documents(), question=QUESTION, origin="search A", store_path=store_path)
        assert len(again2.records) == 6 and again2.flow().identified == 6
        close_session(again2)
        win2.session = None
    finally:
        close_session(again)


def test_flow_diagram_numbers_equal_the_decisions(qtbot, window, tmp_path):
    keys = Qt.Key
    for k in (keys.Key_I, keys.Key_1, keys.Key_E, keys.Key_E, keys.Key_3, keys.Key_E, keys.Key_M):
        key(qtbot, window, k)
    s = window.session
    window.tabs.setCurrentWidget(window.flow)
    svg = window.flow.flow_view.svg
    decisions = list(s.store.decisions(s.review.id).values())
    included = sum(d.decision == "include" for d in decisions)
    excluded = sum(d.decision == "exclude" for d in decisions)
    assert f"Records included (n = {included})" in svg and included == 1
    assert f"Records excluded (n = {excluded})" in svg and excluded == 3
    assert f"{s.review.reasons[0]} (n = 2)" in svg and f"{s.review.reasons[2]} (n = 1)" in svg
    assert "Marked maybe (n = 1)" in svg
    assert "Records identified (n = 6)" in svg and "Not yet screened (n = 1)" in svg
    assert window.flow.save("svg", tmp_path / "flow.svg").read_text(encoding="utf-8") == svg
    png = window.flow.save("png", tmp_path / "flow.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Deciding while the diagram is shown redraws it.
    key(qtbot, window, Qt.Key.Key_I)
    assert "Records included (n = 2)" in window.flow.flow_view.svg


def test_stopping_report_with_the_chosen_rule(qtbot, window):
    for k in (Qt.Key.Key_I, Qt.Key.Key_1, Qt.Key.Key_E, Qt.Key.Key_E):
        key(qtbot, window, k)
    window.tabs.setCurrentWidget(window.stopping)
    text = window.stopping.report_label.text()
    assert "consecutive" in text.lower() and "not met" in text
    window.stopping.consecutive_spin.setValue(2)
    assert "MET" in window.stopping.report_label.text()
    window.stopping.rule_combo.setCurrentIndex(1)
    window.stopping.render()
    qtbot.mouseClick(window.stopping.sample_button, Qt.MouseButton.LeftButton)
    assert window.session.sample_check() is not None
    assert window.session.view().ordered_by == "random sample"


def test_export_included_records(qtbot, window, tmp_path):
    key(qtbot, window, Qt.Key.Key_I)
    key(qtbot, window, Qt.Key.Key_E)
    included = window.session.decided_keys()[0]
    title = next(r.title for r in window.session.records if r.key == included)
    for fmt, suffix in (("ris", ".ris"), ("bibtex", ".bib"), ("csv", ".csv")):
        text = window.export_included(fmt, tmp_path / f"inc{suffix}").read_text(encoding="utf-8")
        assert title in text
        assert len([r for r in window.session.records if r.title in text]) == 1


def test_highlights_and_order(qtbot, window):
    window.include_words.setText("adults")
    window.exclude_words.setText("mice")
    window.include_words.editingFinished.emit()
    html = window.record_view.toHtml()
    assert "#c8f0c8" in html or "#dbe9ff" in html
    assert window.session.review.settings["keywords"] == {"include": ["adults"], "exclude": ["mice"]}
    window.marks_check.setChecked(False)
    assert "#c8f0c8" not in window.record_view.toHtml() and "#dbe9ff" not in window.record_view.toHtml()
    window.order_combo.setCurrentIndex(2)
    window.order_combo.activated.emit(2)
    assert window.session.order.value == "random"
    assert "random order" in window.ordered_label.text()


def test_ticking_model_scores_in_active_learning_changes_the_order(qtbot, window):
    """The check box beside the order lets the LLM scores feed the model: with a 5 for the diabetes
    record (and the include) and 1 for the rest, that record comes next; unticked, the text's order."""
    s = window.session
    assert not window.scores_check.isChecked() and window.scores_check.isEnabled()
    key(qtbot, window, Qt.Key.Key_I)  # "Cystic fibrosis lung function decline in adults (0)"
    key(qtbot, window, Qt.Key.Key_E)  # "Mouse model of airway inflammation (1)"
    assert s.wait_for_training(timeout=20)
    s.set_order("active")  # go on from the trained order
    before = title_on_screen(window)
    assert not before.startswith("Diabetes")
    for rec in s.records:
        high = rec.title.startswith(("Diabetes", "Cystic fibrosis lung function decline"))
        s.store.set_model_score("judge", QUESTION, rec.key, 5 if high else 1, "judged")
    s.model_scores_changed()
    qtbot.waitUntil(lambda: "LLM scores for 6 of 6 records" in window.scores_check.toolTip(), timeout=5_000)
    decided = dict(s.decisions)
    qtbot.mouseClick(window.scores_check, Qt.MouseButton.LeftButton)
    assert window.scores_check.isChecked() and s.scores_in_model
    qtbot.waitUntil(lambda: window.record_view.toPlainText().startswith("Diabetes"), timeout=10_000)
    assert title_on_screen(window).startswith("Diabetes") and s.decisions == decided  # never decides
    window.why_button.setChecked(True)
    assert "LLM score (1–5)" in window.why_label.text()
    qtbot.mouseClick(window.scores_check, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: title_on_screen(window) == before, timeout=10_000)
    assert not s.scores_in_model and s.review.settings["model_scores_in_order"] is False
    # once ticked or unticked, a click gives the choice back to the check (it could not be undone)
    button = window.order_bar.automatic_button
    assert button.isVisible()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert s.scores_choice is None and "model_scores_in_order" not in s.review.settings
    assert not button.isVisible()


def test_next_record_without_waiting_for_training(qtbot, window, monkeypatch):
    gate = threading.Event()
    real_train = app_screening.train

    def slow_train(*args, **kwargs):
        gate.wait(20)
        return real_train(*args, **kwargs)

    monkeypatch.setattr(app_screening, "train", slow_train)
    s = window.session
    key(qtbot, window, Qt.Key.Key_I)
    key(qtbot, window, Qt.Key.Key_E)  # one include, one exclude: a training starts and is held
    before = title_on_screen(window)
    key(qtbot, window, Qt.Key.Key_I)
    assert title_on_screen(window) != before  # shown at once, the training still held
    assert title_on_screen(window) in window.record_view.toPlainText()
    assert not s.wait_for_training(timeout=0.05)
    window.why_button.setChecked(True)
    gate.set()
    assert s.wait_for_training(timeout=20)
    qtbot.waitUntil(lambda: "model score" in window.ordered_label.text(), timeout=10_000)
    assert window.why_label.text().startswith(("Ranked high for these terms", "No term of this record"))
    while s.view().why == [] and s.current is not None:  # a record the model ranks high shows its terms
        key(qtbot, window, Qt.Key.Key_I)
        assert s.wait_for_training(timeout=20)
    qtbot.waitUntil(lambda: "Ranked high for these terms" in window.why_label.text(), timeout=10_000)


def test_training_is_a_job_on_the_window_runner(qtbot, store_path):
    """The window runs the session's training on the job runner it is given (no thread of the session's
    own); the next record never waits for it, and the trained order follows when it ends."""
    from kmds_desktop.ui.jobs.runner import JobRunner
    from kmds_desktop.ui.screening.window import ScreeningWindow

    jobs = JobRunner()
    started: list[str] = []
    jobs.job_started.connect(lambda job: started.append(job.kind))
    session = open_for_documents(documents(), question=QUESTION, origin="search A", store_path=store_path)
    win = ScreeningWindow(session, jobs=jobs)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    win.activateWindow()
    try:
        before = threading.active_count()
        qtbot.mouseClick(win.include_button, Qt.MouseButton.LeftButton)
        qtbot.mouseClick(win.exclude_button, Qt.MouseButton.LeftButton)  # a model can learn now
        assert len(session.decisions) == 2
        assert len(started) >= 2 and all(kind.startswith("screening.train:") for kind in started)
        assert session.wait_for_training(timeout=20)
        session.set_order("active")
        qtbot.waitUntil(lambda: "Chosen by model score" in win.ordered_label.text(), timeout=10_000)
        qtbot.waitUntil(lambda: not jobs.is_busy(), timeout=10_000)
        assert threading.active_count() <= before  # the jobs' threads have ended: none of its own
        win.close()
        qtbot.waitUntil(lambda: not jobs.is_busy(), timeout=20_000)
    finally:
        jobs.shutdown()


def test_screen_these_results_from_the_literature_panel(qtbot, store_path):
    from types import SimpleNamespace

    from kmds_desktop.config import Settings
    from kmds_desktop.ui.jobs.runner import JobRunner
    from kmds_desktop.ui.literature.panel import LiteraturePanel

    jobs = JobRunner()
    panel = LiteraturePanel(Settings(), jobs, database=object(), open_on_start=False)
    qtbot.addWidget(panel)
    try:
        assert not panel.screen_button.isEnabled()
        panel.session.question = QUESTION
        panel.session.documents = documents()
        panel.session.last_run = SimpleNamespace(finished_at="2024-05-01T10:00:00Z",
                                                 plan=SimpleNamespace(question=QUESTION))
        panel._update_buttons()
        assert panel.screen_button.isEnabled()
        win = panel.screen_results(store_path=store_path)
        assert "Reading the records" in win.record_view.toPlainText()  # shown at once, filled by the worker
        qtbot.waitUntil(lambda: win.session is not None, timeout=20_000)
        s = win.session
        assert len(s.records) == 6 and s.records[0].found_by == ["cystic & fibrosis"]
        assert s.records[0].rank == 1 and s.review.question == QUESTION
        assert "#dbe9ff" in win.record_view.toHtml()  # the row's terms are marked
        assert win.progress_label.text() == "0 of 6 screened · 0 included · 0 since the last include"
        win.close()
        qtbot.waitUntil(lambda: not jobs.is_busy(), timeout=20_000)
    finally:
        jobs.shutdown()
