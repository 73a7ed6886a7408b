"""The window's literature panel with a semantic row: embedded after an import in the background,
added by a click, its type shown in the Model column, run and fused with a full-text row (real Qt
offscreen, real PostgreSQL with pgvector, the real model)."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import Qt

from kmds_desktop.config import Settings
from kmds_desktop.literature.store.vectors import vector_status
from kmds_desktop.ui.literature.panel import LiteraturePanel
from kmds_desktop.ui.literature.review_model import VALID, ReviewModel

WAIT = 120_000


def test_semantic_row_in_the_review_table(qtbot, jobs, pg_empty_database, literature_data: Path,
                                          tmp_path: Path) -> None:
    db = pg_empty_database
    records = [json.loads(line) for line in
               (literature_data / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:16]]
    sample = tmp_path / "sample.jsonl"
    sample.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    panel = LiteraturePanel(Settings(), jobs, database=db)
    qtbot.addWidget(panel)
    panel.show()

    panel.import_files([sample])  # the import is followed by embedding in the background
    qtbot.waitUntil(lambda: vector_status(db)["with_vectors"] == 16 and panel.files._embed_job is None,
                    timeout=WAIT)

    target = records[5]
    panel.question.setText(target["title"])
    qtbot.mouseClick(panel.semantic_button, Qt.MouseButton.LeftButton)
    panel.add_query("cell | protein")
    semantic = panel.review.row(0)
    assert semantic.kind == "semantic" and semantic.query == target["title"] and semantic.validity == VALID
    label = panel.review.data(panel.review.index(0, ReviewModel.COL_MODEL), Qt.ItemDataRole.DisplayRole)
    assert label.startswith("[semantic]")

    run = panel.run_selected()
    qtbot.waitUntil(lambda: run.done, timeout=WAIT)
    assert run.state == "done", panel.last_message
    first = panel.documents.document(0)
    assert first.title == target["title"]
    found = first.found_by[0]
    assert f"semantic: {target['title']}"[:45] in found and "cell | protein" not in found
    log = panel.search_log()
    assert [q["kind"] for q in log["queries"]] == ["semantic", "tsquery"] and log["fusion"] == "rrf+rerank"
