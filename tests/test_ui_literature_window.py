"""The literature panel in the real window, as a first-time user meets it: the message bar's banners
end with their event, and the review table's Query column keeps the room at the window's default size.
Scripted Ollama server through the real client, the real PostgreSQL test server with the shared corpora."""

from __future__ import annotations

from PySide6.QtCore import Qt
from support.fake_ollama import ModelScript

from kmds_desktop.config import Settings
from kmds_desktop.ui.literature.review_model import CHECKING, ReviewModel

WAIT = 30_000
LEFT = Qt.MouseButton.LeftButton
MODEL = "qwen2.5-coder:1.5b-instruct-q4_K_M"
QUESTION = "Does Pseudomonas aeruginosa infection worsen lung function in cystic fibrosis?"
#: Queries as a small real model wrote them for QUESTION; the first names a word no document has
#: (its row is flagged weak, with a note in the Error column).
REPLIES = ["(pseudomonas & aeruginosa | pa) & (infection | infxq) & (lung | pulmonary) & "
           "(cystic & fibrosis | cf)",
           "Pseudomonas <-> aeruginosa & (cystic <-> fibrosis | CF)"]


def _window(qtbot, make_window, fake_ollama, pg_database):
    fake_ollama.models[MODEL] = ModelScript(REPLIES)
    settings = Settings()
    qg = settings.query_generation
    qg.multi_model_enabled = True
    qg.models = [MODEL, "builtin:keywords"]
    qg.verbatim_query_models = [MODEL]  # the replies are the model's own tsqueries
    qg.ollama_host = fake_ollama.url
    qg.timeout_s = 30
    qg.queries_per_model = 2
    return make_window(settings, auto_index=False,
                       literature_kwargs={"database": pg_database, "open_on_start": False})


def _generate(qtbot, panel, question: str = QUESTION) -> None:
    """Type the question and click Generate queries; wait until every row is checked."""
    qtbot.mouseClick(panel.question, LEFT)
    panel.question.selectAll()
    qtbot.keyClicks(panel.question, question)
    qtbot.mouseClick(panel.generate_button, LEFT)
    qtbot.waitUntil(lambda: panel.session.round is not None and panel.session.round.finished, timeout=WAIT)
    qtbot.waitUntil(lambda: all(r.validity != CHECKING for r in panel.review.rows()), timeout=WAIT)


def _banner(window) -> str:
    """The message bar's text, or "" while it is hidden."""
    return window.messages.label.text() if window.messages.isVisible() else ""


def test_the_generated_banner_ends_when_the_next_stage_starts(qtbot, make_window, fake_ollama, pg_database):
    """ "Generated: …" is about one round: it goes when its queries run, when the next round starts
    and on New search (it stayed until dismissed); a message about something else stays."""
    window = _window(qtbot, make_window, fake_ollama, pg_database)
    panel = window.literature
    _generate(qtbot, panel)
    assert _banner(window).startswith("Generated:")

    qtbot.mouseClick(panel.run_button, LEFT)  # the run starts: the generation's banner is over
    assert not _banner(window).startswith("Generated:")
    qtbot.waitUntil(lambda: panel.session.last_run is not None and not panel._working(), timeout=WAIT)
    assert not _banner(window).startswith("Generated:"), _banner(window)

    _generate(qtbot, panel)
    assert _banner(window).startswith("Generated:")
    panel.question.setFocus()
    panel.question.selectAll()
    qtbot.keyClicks(panel.question, "Does azithromycin help lung function in cystic fibrosis?")
    qtbot.keyClick(panel.question, Qt.Key.Key_Return)  # a new question's round: the old banner goes at once
    assert not window.messages.isVisible()
    qtbot.waitUntil(lambda: panel.session.round.finished and not panel.generating, timeout=WAIT)
    assert _banner(window).startswith("Generated:")  # the new round's own

    window.messages.show_message("The answer could not be written.", "warning", topic="ask")
    qtbot.mouseClick(panel.run_button, LEFT)
    assert _banner(window) == "The answer could not be written."  # not the literature panel's to end
    qtbot.waitUntil(lambda: not panel._working(), timeout=WAIT)

    _generate(qtbot, panel)
    assert _banner(window).startswith("Generated:")
    qtbot.mouseClick(panel.new_search_button, LEFT)
    assert not window.messages.isVisible()


def _widths(panel) -> dict[str, int]:
    view = panel.review_view
    return {panel.review.headerData(c, Qt.Orientation.Horizontal): view.columnWidth(c)
            for c in range(panel.review.columnCount())}


def _query_is_widest(panel) -> bool:
    widths = _widths(panel)
    query = widths.pop("Query")
    return all(query > w for w in widths.values())


def test_the_query_column_is_the_widest_beside_two_other_panels(qtbot, make_window, fake_ollama, pg_database):
    """At the window's default size (three panels side by side) a long model name, a weak query's
    flag and its note took the room and the Query column was squeezed to "Q…": it is the widest
    column now, the others fit their texts within limits, and each cut text is whole in its tooltip."""
    window = _window(qtbot, make_window, fake_ollama, pg_database)
    panel = window.literature
    assert window.browser.isVisible() and window.ask.isVisible()
    _generate(qtbot, panel)
    view = panel.review_view
    rows = panel.review.rows()
    weak = next(i for i, r in enumerate(rows) if r.weakness)
    assert panel.review.index(weak, ReviewModel.COL_ERROR).data().startswith("Weak:")
    qtbot.waitUntil(lambda: _query_is_widest(panel), timeout=WAIT)
    widths = _widths(panel)
    assert widths["Query"] >= 0.3 * view.viewport().width(), widths
    assert not view.horizontalScrollBar().isVisible(), widths
    metrics = view.fontMetrics()
    for column in (ReviewModel.COL_VALID, ReviewModel.COL_MATCHES, ReviewModel.COL_RETURNED):
        texts = [panel.review.index(r, column).data() or "" for r in range(len(rows))]
        assert view.columnWidth(column) >= max(metrics.horizontalAdvance(t) for t in texts), (column, widths)
    for row in range(len(rows)):  # whatever is cut, the tooltip says whole
        query = panel.review.index(row, ReviewModel.COL_QUERY)
        assert query.data(Qt.ItemDataRole.ToolTipRole).startswith(rows[row].query)
        model = panel.review.index(row, ReviewModel.COL_MODEL)
        assert rows[row].model in model.data(Qt.ItemDataRole.ToolTipRole)
    error = panel.review.index(weak, ReviewModel.COL_ERROR)
    assert error.data(Qt.ItemDataRole.ToolTipRole) == error.data()

    window.resize(1600, 1000)  # the first-time user's window
    qtbot.waitUntil(lambda: _query_is_widest(panel), timeout=WAIT)
    assert not view.horizontalScrollBar().isVisible()
    qtbot.mouseClick(panel.wide_button, LEFT)  # the whole width: the texts fit whole again
    qtbot.waitUntil(lambda: not window.browser.isVisible(), timeout=WAIT)
    need = metrics.horizontalAdvance(MODEL)
    qtbot.waitUntil(lambda: view.columnWidth(ReviewModel.COL_MODEL) >= need, timeout=WAIT)
    assert _query_is_widest(panel), _widths(panel)
