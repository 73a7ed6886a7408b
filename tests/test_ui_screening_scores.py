"""The Scores tab while a scoring run goes on: each record's score appears in the table as the model
gives it (the session's ``model_scores`` event per record), and Cancel stops the run between records
(the request in flight is aborted; no later record is asked). The model is a scripted Ollama server on
127.0.0.1 that answers one record each time the test lets it, so every step is seen, not timed."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import shiboken6
from PySide6.QtCore import Qt
from support.fake_ollama import ModelScript

from kmds_desktop.app.screening_start import open_for_documents
from kmds_desktop.llm.ollama_backend import OllamaBackend

QUESTION = "cystic fibrosis lung function in adults"
RECORDS = 6


def documents() -> list[dict]:
    return [
        {"id": 100 + i, "source_name": "pubmed", "external_id": str(31000000 + i),
         "title": f"Lung function record {i}", "abstract": f"Adults with cystic fibrosis, study {i}.",
         "authors": ["Smith J"], "year": 2020, "publication": "Thorax", "rank": i + 1}
        for i in range(RECORDS)
    ]


@pytest.fixture()
def gate():
    """One permit per reply the scripted model may send; released in full at the end, so no server
    thread is left waiting."""
    permits = threading.Semaphore(0)
    yield permits
    for _ in range(RECORDS * 2):
        permits.release()


@pytest.fixture()
def window(qtbot, tmp_path: Path, fake_ollama, gate):
    from kmds_desktop.ui.jobs.runner import JobRunner
    from kmds_desktop.ui.screening.window import ScreeningWindow

    def reply(_prompt: str, _body: dict) -> str:
        gate.acquire()
        return '{"score": 4, "reason": "Adults with cystic fibrosis."}'

    fake_ollama.models["judge"] = ModelScript(replies=[reply])
    session = open_for_documents(documents(), question=QUESTION, origin="search A",
                                 store_path=tmp_path / "screening.sqlite3")
    backend = OllamaBackend(fake_ollama.url, "judge", timeout=60)
    jobs = JobRunner()
    win = ScreeningWindow(session, jobs=jobs, score_backend=lambda: (backend, ["judge"]))
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    yield win
    jobs.cancel_all()
    for _ in range(RECORDS * 2):
        gate.release()
    qtbot.waitUntil(lambda: not jobs.is_busy(), timeout=20_000)
    if shiboken6.isValid(win):  # qtbot may have closed and deleted it already
        win.close()
    jobs.shutdown()


def scored_rows(win) -> int:
    table = win.scores.table
    return sum(1 for row in range(table.rowCount()) if table.item(row, 2) and table.item(row, 2).text())


def test_scores_appear_row_by_row_and_cancel_stops_between_records(qtbot, window, fake_ollama, gate) -> None:
    window.tabs.setCurrentWidget(window.scores)
    page = window.scores
    qtbot.mouseClick(page.llm_button, Qt.MouseButton.LeftButton)
    assert page.cancel_button.isEnabled() and not page.llm_button.isEnabled()
    for n in (1, 2):
        gate.release()  # the model answers one more record
        qtbot.waitUntil(lambda n=n: scored_rows(window) == n, timeout=20_000)
        assert page.cancel_button.isEnabled()  # shown while the run goes on, not at its end
        row = next(r for r in range(page.table.rowCount()) if page.table.item(r, 2).text())
        assert "judge: 4/5 — Adults with cystic fibrosis." in page.table.item(row, 3).text()
    qtbot.mouseClick(page.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: page.status.text().startswith("Scoring cancelled"), timeout=20_000)
    asked = len(fake_ollama.completion_requests())
    assert asked <= 3  # the two answered and at most the one in flight, aborted: no later record asked
    assert scored_rows(window) == 2 and page.llm_button.isEnabled() and not page.cancel_button.isEnabled()
    assert window.session.decisions == {}  # scores never decide
    # Scoring again goes on from there: only the records without a score are asked.
    for _ in range(RECORDS):
        gate.release()
    qtbot.mouseClick(page.llm_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: page.status.text().startswith("Scoring finished"), timeout=20_000)
    assert scored_rows(window) == RECORDS and "2 already scored (cached)" in page.status.text()


def test_scoring_by_similarity_embeds_on_a_worker_and_the_record_read_is_the_one_decided(
        qtbot, tmp_path: Path) -> None:
    """"Score by similarity" may embed every record through the index process: with the app's runner it
    runs on a worker, the page saying so meanwhile. A decision key decides the record the view showed,
    even where the queue moved on from a worker (the scores changed the order) before the view caught up."""
    import numpy as np

    from kmds_desktop.ui.jobs.runner import JobRunner
    from kmds_desktop.ui.screening.window import ScreeningWindow

    threads: list[str] = []

    def encoder(texts):
        threads.append(threading.current_thread().name)
        return [np.array([1.0, float(len(t) % 7), 0.5], dtype=np.float32) for t in texts]

    session = open_for_documents(documents(), question=QUESTION, origin="search A",
                                 store_path=tmp_path / "screening.sqlite3")
    jobs = JobRunner()
    win = ScreeningWindow(session, jobs=jobs, encoder=encoder)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    try:
        win.tabs.setCurrentWidget(win.scores)
        qtbot.mouseClick(win.scores.similarity_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "scored" in win.scores.status.text(), timeout=20_000)
        assert threads and threading.main_thread().name not in threads
        assert scored_rows(win) == RECORDS

        shown = win._shown_key  # the record the view rendered last
        other = next(r for r in session.records if r.key != shown)
        with session._lock:  # the queue moves on from a worker, before the view hears of it
            session._current = session._index[other.key]
        win.tabs.setCurrentIndex(0)
        qtbot.keyClick(win, Qt.Key.Key_I)
        assert shown in session.decisions and other.key not in session.decisions
    finally:
        qtbot.waitUntil(lambda: not jobs.is_busy(), timeout=20_000)
        jobs.shutdown()
