"""GUI-thread costs that froze the window while jobs ran (bench/ui_stall.py): each is checked here."""

from __future__ import annotations

import sys
import time

from PySide6.QtCore import Qt

from kmds_desktop.ui.ask import markdown_render
from kmds_desktop.ui.ask.panel import answer_html
from kmds_desktop.ui.jobs.runner import GUI_SWITCH_INTERVAL_S, JobRunner


def test_a_long_answer_line_renders_in_linear_time() -> None:
    """The list-spacing pattern once backtracked quadratically: 60 ms for a 3 kB line, minutes for 30 kB."""
    line = " ".join(f"Finding {i} shows a **pattern** in the data [{i % 5 + 1}]." for i in range(600))
    answer_html("warm the converter", 5)
    started = time.perf_counter()
    out = answer_html(line + "\nMore text after it.", 5)
    assert time.perf_counter() - started < 1.0
    assert out.count('href="cite:') == 600
    spaced = answer_html(line[:200] + "\n- an item [1]\n- another [2]\nAfter the list.", 5)
    assert "<ul>" in spaced and spaced.index("<ul>") > spaced.index("Finding 0")


def test_the_markdown_converter_can_be_built_ahead(monkeypatch) -> None:
    monkeypatch.setattr(markdown_render, "_converter", None)
    markdown_render.prepare()
    built = markdown_render._converter
    assert built is not None
    assert "<strong>bold</strong>" in markdown_render.to_html("**bold**")
    assert markdown_render._converter is built  # used as is, not built again on the GUI thread


def test_a_job_runner_shortens_the_gil_switch_interval(qtbot) -> None:
    saved = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        runner = JobRunner()
        assert sys.getswitchinterval() <= GUI_SWITCH_INTERVAL_S
        runner.shutdown()
    finally:
        sys.setswitchinterval(saved)


def test_workers_render_with_their_own_converter(monkeypatch) -> None:
    """Answers are rendered on the worker that wrote them; the GUI thread's converter is not shared."""
    import threading

    monkeypatch.setattr(markdown_render, "_converter", None)
    monkeypatch.setattr(markdown_render, "_worker_converter", None)
    out: list[str] = []
    worker = threading.Thread(target=lambda: out.append(answer_html("A **finding** [1].", 1)))
    worker.start()
    worker.join(30)
    assert 'href="cite:1"' in out[0] and "<strong>finding</strong>" in out[0]
    assert markdown_render._worker_converter is not None
    assert markdown_render._converter is None  # the GUI thread's own converter was not touched


def test_fitting_the_results_table_reads_each_cell_once(qtbot) -> None:
    """Columns sized to their contents by Qt re-read every cell and role at each layout change
    (1,000 model calls, 8-25 ms per answer on the GUI thread); the panel measures the text itself."""
    from kmds_desktop.ui.ask.panel import AskPanel

    runner = JobRunner()
    panel = AskPanel(runner)
    qtbot.addWidget(panel)
    panel.resize(900, 600)
    panel.show()
    rows = [
        {"finding": "A finding " * 20, "obs_type": f"Type {i}", "category": "exploratory",
         "workflow_name": f"Workflow {i}", "finding_seq": i, "score": 0.5, "iri": f"urn:x#{i}"}
        for i in range(10)
    ]
    panel.results.set_results(rows)
    calls = []
    original = panel.results.data
    panel.results.data = lambda *args: calls.append(args) or original(*args)  # type: ignore[method-assign]
    panel._fit_columns()
    panel.table.setColumnWidth(2, 60)  # any later layout change must not re-read the cells
    assert 0 < len(calls) <= 6 * len(rows)
    widths = [panel.table.columnWidth(c) for c in range(7)]
    assert all(w > 0 for w in widths) and widths[1] > max(widths[2:])
    runner.shutdown()


def test_the_finished_answer_does_not_reload_the_records_shown_when_retrieved(qtbot) -> None:
    """The records arrive twice (when retrieved, then with the answer): the table is reset once."""
    from kmds_desktop.ui.ask.panel import ResultsModel

    model = ResultsModel()
    rows = [{"finding": "f", "obs_type": "t", "iri": "urn:x#1"}]
    with qtbot.waitSignal(model.modelReset, timeout=1000):
        assert model.set_results(rows) is True
    resets = []
    model.modelReset.connect(lambda: resets.append(1))
    assert model.set_results([dict(r) for r in rows]) is False
    assert model.set_results(rows + [{"finding": "g", "iri": "urn:x#2"}]) is True
    assert resets == [1] and model.rowCount() == 2


def test_painting_the_records_table_runs_no_python(qtbot) -> None:
    """Each call from a paint into Python waits for the GIL behind a busy worker (about ten roles per
    visible cell): the records are held by Qt's item model, so a repaint calls no Python code."""
    from kmds_desktop.ui.ask.panel import AskPanel

    runner = JobRunner()
    panel = AskPanel(runner)
    qtbot.addWidget(panel)
    panel.resize(900, 600)
    panel.show()
    rows = [
        {"finding": f"Finding {i}\nmore", "obs_type": f"Type {i}", "category": "exploratory",
         "workflow_name": f"Workflow {i}", "finding_seq": i, "score": 0.5, "iri": f"urn:x#{i}"}
        for i in range(12)
    ]
    panel.results.set_results(rows)
    qtbot.waitExposed(panel)
    calls: list[str] = []

    def profile(frame, event, _arg):
        if event == "call":
            calls.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        panel.table.viewport().grab()
    finally:
        sys.setprofile(None)
    assert calls == []
    # What the table shows is what the records say.
    model = panel.results
    assert model.rowCount() == 12 and model.columnCount() == 7
    assert [model.index(3, c).data() for c in range(7)] == [
        "[4]", "Finding 3", "Type 3", "Exploratory", "Workflow 3", "3", "0.500"]
    assert model.index(3, 1).data(Qt.ItemDataRole.ToolTipRole) == "Finding 3\nmore"
    assert model.index(3, 4).data(Qt.ItemDataRole.UserRole) == "urn:x#3"
    assert not model.flags(model.index(3, 1)) & Qt.ItemFlag.ItemIsEditable
    runner.shutdown()
