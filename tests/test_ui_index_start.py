"""The index process that stops at start, as the window shows it: the reason the child gave is in the
message the user reads, and stays in the log the message names after the app has recovered.

Real child processes: the window's index process is started with a ``chromadb`` on its path that
fails at import, once by raising (a traceback) and once by printing why and ending at once, without
Python's clean-up, as a native library's fatal error does (its standard output to the log was held in
a buffer, and the log was empty). Then the path is fixed and the next question starts a good one.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from kmds_desktop.config import Settings
from kmds_desktop.index import index_process

WAIT = 120_000  # the good index process loads ChromaDB and the embedding model
LEFT = Qt.MouseButton.LeftButton
REASON = "chromadb: the sqlite3 library is too old (3.31.1 < 3.35.0)"
BROKEN = {
    "raises": f"raise ImportError({REASON!r})\n",
    "exits": f"import os\nprint({REASON!r})\nos._exit(1)\n",
}


@pytest.fixture()
def broken_chromadb(tmp_path, monkeypatch):
    """Put a failing ``chromadb`` first on the index process's path; returns a function that takes
    it away again. The test runner's own PYTHONUNBUFFERED would hide a lost buffer: it goes."""
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)

    def install(how: str) -> None:
        package = tmp_path / how / "chromadb"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(BROKEN[how], encoding="utf-8")
        monkeypatch.setenv("PYTHONPATH", str(package.parent))

    yield install, lambda: monkeypatch.delenv("PYTHONPATH", raising=False)
    index_process.stop_all()


def _ask(qtbot, window, question: str) -> None:
    panel = window.ask
    qtbot.mouseClick(panel.question, LEFT)
    panel.question.selectAll()
    qtbot.keyClicks(panel.question, question)
    qtbot.mouseClick(panel.ask_button, LEFT)


@pytest.mark.parametrize("how", sorted(BROKEN))
def test_an_index_process_that_fails_at_import_says_why(qtbot, make_window, kmds_data, data_home,
                                                        broken_chromadb, how):
    install, repair = broken_chromadb
    install(how)
    settings = Settings()
    settings.llm.backend = "offline"
    window = make_window(settings, index=None, auto_index=False)  # the app's own index process
    with qtbot.waitSignal(window.kb_loaded, timeout=30_000):
        window.open_kb(kmds_data / "example_analytics_kb_app_workflow.xml")

    _ask(qtbot, window, "What data quality problems were found?")
    panel = window.ask
    qtbot.waitUntil(lambda: not window.jobs.is_busy("ask"), timeout=WAIT)
    shown = window.messages.label.text()
    assert window.messages.isVisible() and "stopped at start (exit status 1)" in shown, shown
    assert REASON in shown, shown  # what the child said, not only its exit status
    assert panel.state.text() == "The question could not be answered."
    log = data_home / "index" / index_process.LOG_FILE
    assert f"see {log}" in shown

    if how != "exits":
        return
    repair()  # the app recovers: the next question starts a good index process
    with qtbot.waitSignal(panel.answer_finished, timeout=WAIT):
        _ask(qtbot, window, "What data quality problems were found?")
    assert panel.results.rowCount() > 0
    assert not window.messages.isVisible()
    # The log the message named still says why the first start failed (it was rewritten, empty).
    text = log.read_text(encoding="utf-8")
    assert REASON in text and text.count("--- index process starting") == 2, text


def test_the_reason_is_read_from_what_the_child_wrote():
    """A traceback gives its exception, a crash faulthandler's line, anything else its last lines."""
    traceback = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
                 "    import chromadb\nModuleNotFoundError: No module named 'chromadb'\n")
    assert index_process.start_reason(traceback) == "ModuleNotFoundError: No module named 'chromadb'"
    crash = ("Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n"
             "  File \"chromadb/api.py\", line 9 in open\n")
    assert index_process.start_reason(crash) == "Fatal Python error: Segmentation fault"
    assert index_process.start_reason("one\ntwo\nthree\nfour\n") == "two | three | four"
    assert index_process.start_reason("\n \n") == ""
