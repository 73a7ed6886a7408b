"""A review's rough edges in the window, by clicking the real widgets: after a restart the search
history's Re-run loads the search back into the literature panel and runs it, Screen these results is
enabled for the results, the screening window's PRISMA flow names the run "Search #2 · <date>" and keeps
"Marked maybe" and "Not yet screened" in boxes of their own."""

from __future__ import annotations

import json
import re
import xml.dom.minidom
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from kmds_desktop.config import Settings
from kmds_desktop.ui.literature.panel import LiteraturePanel
from kmds_desktop.ui.literature.review_model import CHECKING

WAIT = 30_000
QUESTION = "aspirin and stroke"
TITLES = {"t:1": "Aspirin prevents stroke", "t:2": "Aspirin and heart attack", "t:3": "Low dose aspirin",
          "t:4": "Statins prevent stroke", "t:5": "Gardening"}
ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")
READABLE = re.compile(r"\d{1,2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}")


def _click(qtbot, button) -> None:
    assert button.isEnabled(), button.text()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def _panel(qtbot, jobs, database: Any) -> LiteraturePanel:
    settings = Settings()
    settings.query_generation.models = ["builtin:keywords"]  # the offline generator: no LLM needed
    panel = LiteraturePanel(settings, jobs, database=database, open_on_start=False)
    qtbot.addWidget(panel)
    panel.resize(1100, 800)
    panel.show()
    return panel


def _boxes(svg: str) -> list[list[str]]:
    """The texts of each box of the PRISMA drawing."""
    dom = xml.dom.minidom.parseString(svg)
    out: list[list[str]] = []
    for node in dom.documentElement.childNodes:
        if getattr(node, "tagName", "") == "rect" and node.getAttribute("rx"):
            out.append([])
        elif getattr(node, "tagName", "") == "text" and out:
            out[-1].append("".join(c.data for c in node.childNodes if c.nodeType == c.TEXT_NODE).strip())
    return out


def test_rerun_after_a_restart_loads_runs_and_screens_the_search(
        qtbot, jobs, data_home: Path, pg_empty_database, tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": k, "source": "test", "title": v, "abstract": v}) + "\n"
                              for k, v in TITLES.items()), encoding="utf-8")
    pg_empty_database.import_files([corpus])

    # Yesterday: queries generated for a question and run in the panel, kept in the history as #1.
    first = _panel(qtbot, jobs, pg_empty_database)
    qtbot.keyClicks(first.question, QUESTION)
    _click(qtbot, first.generate_button)
    qtbot.waitUntil(lambda: not first.generating and bool(first.session.included_rows()), timeout=WAIT)
    first.add_query("aspirin")
    ran = [(r.query, r.model) for r in first.session.included_rows()]
    qtbot.waitUntil(first.run_button.isEnabled, timeout=WAIT)
    _click(qtbot, first.run_button)
    qtbot.waitUntil(lambda: first.session.last_recorded == 1, timeout=WAIT)
    found = {d["external_id"] for d in first.session.documents}
    assert {"t:1", "t:2", "t:3"} <= found
    first.shutdown()

    # Today, after a restart: the panel is empty and there is nothing to screen.
    panel = _panel(qtbot, jobs, pg_empty_database)
    assert not panel.session.rows and not panel.has_documents()
    assert not panel.screen_button.isEnabled()
    _click(qtbot, panel.history_button)
    dialog = panel.history_dialog
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 1, timeout=WAIT)
    assert READABLE.fullmatch(dialog.table.item(0, 1).text()), dialog.table.item(0, 1).text()
    dialog.select_set(1)
    _click(qtbot, dialog.rerun_button)

    # The search is back in the review table, as it ran, and runs there (saved as #2).
    assert panel.question.text() == QUESTION
    assert [(r.query, r.model) for r in panel.session.included_rows()] == ran
    assert panel.session.included_rows() == panel.session.rows
    assert "#1" in dialog.status.text() and "loaded into the literature panel" in dialog.status.text()
    qtbot.waitUntil(lambda: panel.session.last_recorded == 2, timeout=WAIT)
    qtbot.waitUntil(lambda: all(r.validity != CHECKING for r in panel.session.rows), timeout=WAIT)
    assert {d["external_id"] for d in panel.session.documents} == found
    assert panel.documents.rowCount() == len(found)
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 2, timeout=WAIT)
    assert panel.screen_button.isEnabled()

    # Screen these results: the run joins the question's review as "#2", labelled with a readable date.
    _click(qtbot, panel.screen_button)
    window = panel.records.screening_window
    qtbot.waitUntil(lambda: window.session is not None, timeout=WAIT)
    session = window.session
    assert [s.origin for s in session.store.sources(session.review.id)] == ["#2"]
    _click(qtbot, window.maybe_button)
    tab_bar = window.tabs.tabBar()
    flow_tab = window.tabs.indexOf(window.flow)
    qtbot.mouseClick(tab_bar, Qt.MouseButton.LeftButton, pos=tab_bar.tabRect(flow_tab).center())
    assert window.tabs.currentWidget() is window.flow
    svg = window.flow.flow_view.svg
    assert not ISO.search(svg)
    boxes = _boxes(svg)
    identified = next(b for b in boxes if b and b[0].startswith("Records identified"))
    assert identified[0] == f"Records identified (n = {len(found)})"
    label = r"Search #2 · " + READABLE.pattern + rf" \(n = {len(found)}\)"
    assert re.fullmatch(label, identified[1]), identified
    maybe = [b for b in boxes if b and b[0].startswith("Marked maybe")]
    waiting = [b for b in boxes if b and b[0].startswith("Not yet screened")]
    assert [b[0] for b in maybe] == ["Marked maybe (n = 1)"]
    assert [b[0] for b in waiting] == [f"Not yet screened (n = {len(found) - 1})"]
    assert not any("Not yet" in t for t in maybe[0]) and not any("maybe" in t for t in waiting[0])
    window.close()
    qtbot.waitUntil(lambda: not jobs.is_busy(), timeout=WAIT)
    dialog.close()
    panel.shutdown()
