"""GUI-thread costs that froze the window while jobs ran (bench/ui_stall.py): each is checked here."""

from __future__ import annotations

import sys
import time

from kmds_desktop.ui import markdown_render
from kmds_desktop.ui.ask_panel import answer_html
from kmds_desktop.ui.workers import GUI_SWITCH_INTERVAL_S, JobRunner


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
