"""The window's semantic row on a BMLibrarian database searches the database's own vectors: real Qt
offscreen, real PostgreSQL with pgvector in BMLibrarian's layout, the database's embedding model on a
real HTTP server speaking Ollama's API, real clicks."""

from __future__ import annotations

from PySide6.QtCore import Qt
from support.fake_ollama import FakeOllama, ModelScript
from test_literature_database_vectors import MODEL, bmlibrarian_with_vectors, embed  # noqa: F401 - fixture

from kmds_desktop.config import Settings
from kmds_desktop.ui.literature.panel import LiteraturePanel

WAIT = 60_000


def test_semantic_row_in_the_window_searches_the_databases_own_vectors(
        qtbot, jobs, bmlibrarian_with_vectors, data_home) -> None:  # noqa: F811 - the fixture
    db, _, ids = bmlibrarian_with_vectors
    with FakeOllama({MODEL: ModelScript(embed=embed)}) as fake:
        settings = Settings()
        settings.query_generation.ollama_host = fake.url
        panel = LiteraturePanel(settings, jobs, database=db)
        qtbot.addWidget(panel)
        panel.show()
        qtbot.waitUntil(lambda: bool(panel.session.documents_in_database), timeout=WAIT)

        panel.question.setText("malaria vaccine trial in children")
        qtbot.mouseClick(panel.semantic_button, Qt.MouseButton.LeftButton)
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
        assert not panel.coverage_bar.isVisible(), "no 'embed first' question: the database has vectors"
        qtbot.waitUntil(lambda: panel.session.last_run is not None and not panel._working(), timeout=WAIT)
        assert [r.model for r in fake.requests_for("/api/embed")] == [MODEL]

    said = ("The semantic row searched 5 of 6 documents (those with a vector: the database's own "
            f"{MODEL} vectors)")
    assert panel.results_label.toolTip() == said
    assert panel.last_message is not None and panel.last_message[1].startswith(said)
    assert "no vector of that model in the database yet" in panel.last_message[1]
    result = panel.session.last_run.result
    assert result.queries[0].ids[0] == ids["Malaria vaccine trial in Kenyan children"]
    assert "Malaria" in str(result.documents[0].get("title"))
    run = panel.search_log()["retrieval_run"]
    assert run["embedding_model"] == MODEL
    assert run["vector_coverage"]["vectors"] == f"the database's own {MODEL} vectors"


def _panel(qtbot, jobs, db, settings: Settings) -> tuple[LiteraturePanel, list[str]]:
    """The literature panel on ``db`` with the built-in generator, and the status lines it shows."""
    settings.query_generation.models = ["builtin:keywords"]
    panel = LiteraturePanel(settings, jobs, database=db)
    statuses: list[str] = []
    panel.status_changed.connect(statuses.append)
    qtbot.addWidget(panel)
    panel.show()
    return panel, statuses


def _generate(qtbot, panel: LiteraturePanel, question: str) -> list:
    """Type ``question``, click Generate queries, wait for the round; the semantic rows it added."""
    panel.question.clear()
    qtbot.keyClicks(panel.question, question)
    qtbot.mouseClick(panel.generate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.session.round is not None and panel.session.round.finished, timeout=WAIT)
    qtbot.waitUntil(lambda: not panel.generating, timeout=WAIT)
    return [r for r in panel.session.rows if r.kind == "semantic"]


def test_the_window_says_the_database_has_its_own_vectors_and_generation_adds_the_semantic_row(
        qtbot, jobs, bmlibrarian_with_vectors, data_home) -> None:  # noqa: F811 - the fixture
    """The app has embedded nothing here, yet the database's own vectors cover 5 of 6 documents: the
    status line says so (not "no vectors"), Run asks no "embed first" question, Embed documents says
    what it would add, and a generation round adds the question's semantic row as on an embedded
    database (the CLI's search applies the same rule)."""
    db, _, _ = bmlibrarian_with_vectors
    with FakeOllama({MODEL: ModelScript(embed=embed)}) as fake:
        settings = Settings()
        settings.query_generation.ollama_host = fake.url
        panel, statuses = _panel(qtbot, jobs, db, settings)
        qtbot.waitUntil(lambda: (status := panel.session.database_status) is not None
                        and status.database_vectors is not None, timeout=WAIT)
        assert any(f"5 with the database's own {MODEL} vectors" in s for s in statuses), statuses
        assert not any("no vectors" in s for s in statuses)
        assert panel.embed_button.toolTip().startswith(f"Semantic rows search the database's own {MODEL}")
        semantic = _generate(qtbot, panel, "malaria vaccine trial in children")
        assert [r.query for r in semantic] == ["malaria vaccine trial in children"]
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
        assert not panel.coverage_bar.isVisible()
        qtbot.waitUntil(lambda: panel.session.last_run is not None and not panel._working(), timeout=WAIT)
    stat = next(s for s in panel.session.last_run.result.queries if s.kind == "semantic")
    assert stat.ok and stat.vectors == f"the database's own {MODEL} vectors"


def test_with_the_setting_off_the_database_vectors_are_not_offered(
        qtbot, jobs, bmlibrarian_with_vectors, data_home) -> None:  # noqa: F811 - the fixture
    db, _, _ = bmlibrarian_with_vectors
    settings = Settings()
    settings.retrieval.use_database_vectors = False
    panel, statuses = _panel(qtbot, jobs, db, settings)
    qtbot.waitUntil(lambda: bool(statuses), timeout=WAIT)
    assert panel.session.database_status.database_vectors is None and "no vectors" in statuses[-1]
    assert not _generate(qtbot, panel, "malaria vaccine trial in children")
