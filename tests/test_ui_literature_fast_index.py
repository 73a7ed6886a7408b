"""File > Build fast search index, as a user with a database too large for the import to index by
itself meets it: the status bar says there is none, the menu entry builds it in the background with
progress and Cancel, a cancelled build goes on from where it stopped, and full-text rows then rank
from it (real Qt offscreen, real PostgreSQL, the real tantivy index)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from support.menus import click_menu

from kmds_desktop.config import Settings
from kmds_desktop.literature.store import topk_build

WAIT = 120_000
LEFT = Qt.MouseButton.LeftButton


@pytest.fixture()
def large_database(monkeypatch: pytest.MonkeyPatch, pg_empty_database, literature_data: Path, tmp_path: Path):
    """300 documents, treated as a database too large to be indexed by its import."""
    monkeypatch.setattr(topk_build, "AUTO_TOPK_UP_TO", 0)
    lines = (literature_data / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:300]
    path = tmp_path / "sample.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    pg_empty_database.import_files([path])
    assert pg_empty_database.topk_index() is None
    return pg_empty_database, [json.loads(line) for line in lines]


def test_the_fast_index_is_built_from_the_menu_cancelled_and_finished(qtbot, make_window, large_database,
                                                                     monkeypatch) -> None:
    db, records = large_database
    monkeypatch.setattr(topk_build, "BATCH", 5)  # many small batches
    # the build waits after its second batch until Cancel has been pressed: on a quiet machine all 60
    # batches took less than the 600 ms after which a job's progress row appears, and the row never did
    # (the first batch's report, held back by the worker's throttle, is sent while the build waits)
    cancel_pressed = threading.Event()
    committed: list[str] = []
    crash_point = topk_build.crash_point

    def held_after_two_batches(name: str) -> None:
        crash_point(name)
        if name == "topk.batch-committed":
            committed.append(name)
            if len(committed) == 2:
                cancel_pressed.wait(WAIT / 1000)

    monkeypatch.setattr(topk_build, "crash_point", held_after_two_batches)
    settings = Settings()
    settings.retrieval.fulltext_ranking = "bm25"
    window = make_window(settings, auto_index=False,
                         literature_kwargs={"database": db, "open_on_start": False})
    window.resize(1600, 1000)
    panel = window.literature
    panel.refresh_status()
    qtbot.waitUntil(lambda: window.lit_status.text().endswith(", no fast search index"), timeout=WAIT)

    click_menu(qtbot, window, "&File", "Build &fast search index")
    strip = window.progress_strip
    qtbot.waitUntil(lambda: strip.row_for("literature.topk") is not None, timeout=WAIT)
    qtbot.waitUntil(lambda: "Fast search index: indexed" in panel.progress_label.text(), timeout=WAIT)
    qtbot.mouseClick(strip.cancel_button, LEFT)
    cancel_pressed.set()
    qtbot.waitUntil(lambda: panel.files._topk_job is None, timeout=WAIT)
    assert "Fast search index cancelled" in panel.progress_label.text()
    qtbot.waitUntil(lambda: "fast search index unfinished" in window.lit_status.text(), timeout=WAIT)
    assert db.topk_index() is None, "an unfinished index is not used: searches run in PostgreSQL"
    done_before = topk_build.BuildState.load(topk_build.index_folder(db) / "state.json").documents
    assert 0 < done_before < len(records)

    click_menu(qtbot, window, "&File", "Build &fast search index")  # goes on from there
    qtbot.waitUntil(lambda: panel.files._topk_job is None and "ready" in panel.progress_label.text(),
                    timeout=WAIT)
    assert f"Fast search index ready: {len(records):,} documents" in panel.progress_label.text()
    qtbot.waitUntil(lambda: "fast search" not in window.lit_status.text(), timeout=WAIT)
    index = db.topk_index()
    assert index is not None and index.documents() == len(records)
    # a full-text row now ranks from the index, and matches what PostgreSQL matches
    query = "protein | cell"
    fast = {i for i, _ in db.find_abstract_ids_ranked(query, 1000, ranking="bm25")}
    db.attach_topk_index(None)
    slow = {i for i, _ in db.find_abstract_ids_ranked(query, 1000, ranking="idf")}
    assert fast == slow and fast
