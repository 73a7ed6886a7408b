"""The screening window's Scores and Two screeners pages, clicked: an LLM scoring run against a scripted
Ollama server on 127.0.0.1 (hostile replies among them) ends with a note per record and a score column;
another reviewer's file with unknown ids and a broken line is imported with both reported and the rest
kept, the disagreements listed and Cohen's kappa shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from support.fake_ollama import ModelScript

from kmds_desktop.app.screening_start import open_for_documents
from kmds_desktop.llm.ollama_backend import OllamaBackend

MB = 1024 * 1024
QUESTION = "cystic fibrosis lung function in adults"


def documents(n: int = 5) -> list[dict]:
    return [
        {"id": 100 + i, "source_name": "pubmed", "external_id": str(31000000 + i),
         "title": f"Lung function record {i}", "abstract": f"Adults with cystic fibrosis, study {i}.",
         "authors": ["Smith J"], "year": 2020, "publication": "Thorax", "rank": i + 1}
        for i in range(n)
    ]


@pytest.fixture()
def window(qtbot, tmp_path: Path, fake_ollama):
    from kmds_desktop.ui.screening.window import ScreeningWindow

    session = open_for_documents(documents(), question=QUESTION, origin="search A",
                                 store_path=tmp_path / "screening.sqlite3")
    backend = OllamaBackend(fake_ollama.url, "judge", timeout=60)
    win = ScreeningWindow(session, score_backend=lambda: (backend, ["judge"]))
    qtbot.addWidget(win)
    win.resize(1600, 1000)
    win.show()
    qtbot.waitExposed(win)
    yield win
    win.close()


def test_scoring_run_from_the_scores_tab_with_hostile_replies(qtbot, window, fake_ollama) -> None:
    fake_ollama.models["judge"] = ModelScript(replies=[
        '{"score": 5, "reason": "Lung function in adults with CF."}',
        '{"score": ' * 3000 + "4" + "}" * 3000,
        "{" * (10 * MB),
        '{"score": null, "reason": "No idea."}',
        '{"score": 2, "reason": "Children only."}',
    ], chunk_size=64 * 1024)
    window.tabs.setCurrentWidget(window.scores)
    qtbot.mouseClick(window.scores.llm_button, Qt.MouseButton.LeftButton)
    status = window.scores.status.text()
    assert "2 scored" in status and "3 without a score" in status
    table = window.scores.table
    assert table.rowCount() == 5
    rows = {table.item(r, 0).text(): (table.item(r, 2).text(), table.item(r, 3).text())
            for r in range(table.rowCount())}
    assert rows["Lung function record 0"] == ("5", "judge: 5/5 — Lung function in adults with CF.")
    assert "nested too deeply" in rows["Lung function record 1"][1]
    assert "characters" in rows["Lung function record 2"][1]
    assert "no score 1–5" in rows["Lung function record 3"][1]
    assert rows["Lung function record 4"][0] == "2"
    assert table.item(0, 0).text() == "Lung function record 0"  # sorted by the score, best first
    assert window.session.decisions == {}  # scores never decide
    # The record on screen shows its score and reason; ordering by the scores puts the 5 first.
    window.order_combo.setCurrentIndex(window.order_combo.findData("score"))
    window.order_combo.activated.emit(window.order_combo.currentIndex())
    assert window.session.current.title == "Lung function record 0"
    assert "judge: 5/5" in window.ordered_label.text()
    # A second click asks only the three without a score.
    before = len(fake_ollama.completion_requests())
    fake_ollama.models["judge"] = ModelScript(replies=['{"score": 3, "reason": "Maybe."}'])
    qtbot.mouseClick(window.scores.llm_button, Qt.MouseButton.LeftButton)
    assert len(fake_ollama.completion_requests()) == before + 3
    assert "3 scored" in window.scores.status.text() and "2 already scored" in window.scores.status.text()


def test_without_vectors_the_similarity_button_says_why(qtbot, window) -> None:
    window.tabs.setCurrentWidget(window.scores)
    qtbot.mouseClick(window.scores.similarity_button, Qt.MouseButton.LeftButton)
    assert "no embedding vectors" in window.scores.status.text()


def test_two_screeners_import_with_unknown_ids_and_a_broken_line(qtbot, window, tmp_path: Path) -> None:
    s = window.session
    for k in (Qt.Key.Key_I, Qt.Key.Key_1, Qt.Key.Key_E, Qt.Key.Key_I, Qt.Key.Key_E):
        qtbot.keyClick(window, k)
    mine = {r.external_id: s.decisions[r.key].decision for r in s.records if r.key in s.decisions}
    assert len(mine) == 4
    window.tabs.setCurrentWidget(window.agreement)
    exported = window.agreement.export_decisions(tmp_path / "mine.csv")
    header = exported.read_text(encoding="utf-8").splitlines()[0]
    theirs = [header]
    flip = {"include": "exclude", "exclude": "include"}
    for n, (ext, d) in enumerate(sorted(mine.items())):
        other = flip[d] if n == 0 else d  # they disagree on the first record only
        theirs.append(f"cystic,Dr B,pubmed,{ext},,,title,{other},,,2024-01-01")
    theirs.append("cystic,Dr B,pubmed,99999999,,,unknown,include,,,2024-01-01")  # not in the review
    theirs.append("cystic,Dr B,pubmed,broken line")  # too few fields
    path = tmp_path / "theirs.csv"
    path.write_text("\n".join(theirs) + "\n", encoding="utf-8")
    report = window.agreement.import_decisions(path)
    assert report.imported == 4 and report.unknown == ["pubmed:99999999"] and report.broken[0][0] == 7
    text = window.agreement.report_label.text()
    assert "4 decisions of Dr B imported" in text and "1 unknown record" in text and "line 7" in text
    assert window.agreement.reviewer_combo.currentText() == "Dr B"
    assert window.agreement.table.rowCount() == 1
    assert window.agreement.table.item(0, 0).text() == "Lung function record 0"
    kappa = window.agreement.kappa_label.text()
    assert "4 records decided by both" in kappa and "agreement 75%" in kappa and "kappa 0.50" in kappa


def _flow_layout(svg: str):
    """(rects, texts) of a flow SVG: rects as (x0, y0, x1, y1) without the white page, texts as
    (text, x0, y0, x1, y1) measured with the font Qt draws the diagram in (13 px, bold where bold)."""
    import xml.etree.ElementTree as ET

    from PySide6.QtGui import QFont, QFontMetricsF

    ns = "{http://www.w3.org/2000/svg}"
    root = ET.fromstring(svg.split("?>", 1)[1])
    rects = [
        (float(r.get("x")), float(r.get("y")), float(r.get("x")) + float(r.get("width")),
         float(r.get("y")) + float(r.get("height")))
        for r in root.iter(f"{ns}rect") if r.get("width") != "100%"
    ]
    texts = []
    for t in root.iter(f"{ns}text"):
        font = QFont(root.get("font-family").split(",")[0])
        font.setPixelSize(int(t.get("font-size") or root.get("font-size")))
        font.setBold(t.get("font-weight") == "bold")
        m = QFontMetricsF(font)
        x, y = float(t.get("x")), float(t.get("y"))
        width = m.horizontalAdvance(t.text or "")
        texts.append((t.text or "", x, y - m.ascent(), x + width, y + m.descent()))
    return rects, texts


def test_flow_diagram_text_stays_inside_its_own_box(qtbot, window) -> None:
    """Long labels (a search's origin and rows, long reasons) wrap inside their box; 'Not yet screened'
    has a box of its own, not the excluded box; no text touches another box."""
    from kmds_desktop.app.presentation import flow_svg

    s = window.session
    s.set_reasons(["wrong population", "an exclusion reason written out at great length by the reviewer"])
    s.exclude("an exclusion reason written out at great length by the reviewer")
    s.include()
    s.maybe()
    s.add_documents(documents(7)[5:], origin="search 2024-05-01T10:22:13 (a long origin name, rows 1-4)",
                    per_row={"row 1: cystic AND fibrosis AND (lung OR pulmonary) AND function": 2})
    flow = s.flow()
    assert flow.not_yet_screened > 0 and flow.maybe == 1
    svg = flow_svg(flow, s.review.name + " — a title long enough to wrap " * 2)
    rects, texts = _flow_layout(svg)
    assert len(rects) >= 5
    excluded_box = None
    for text, x0, y0, x1, y1 in texts:
        inside = [r for r in rects if r[0] <= x0 and x1 <= r[2] and r[1] <= y0 and y1 <= r[3]]
        touching = [r for r in rects if x0 < r[2] and r[0] < x1 and y0 < r[3] and r[1] < y1]
        if not inside:  # the title: above every box, touching none
            assert not touching, text
            continue
        assert len(inside) == 1 and touching == inside, (text, x0, x1, inside, touching)
        if text.startswith("Records excluded"):
            excluded_box = inside[0]
    assert excluded_box is not None
    waiting = [t for t in texts if t[0].startswith(("Not yet screened", "Marked maybe"))]
    assert len(waiting) == 2
    for _text, x0, y0, _x1, y1 in waiting:
        assert not (excluded_box[0] <= x0 and excluded_box[1] <= y0 and y1 <= excluded_box[3])
