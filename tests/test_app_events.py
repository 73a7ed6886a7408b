"""The sessions announce their changes (``subscribe``), and the rules moved out of the views hold
without Qt: the save order of Preferences, the round's message level, the answer's Markdown."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmds_desktop.app import literature as app_lit
from kmds_desktop.app.ask import AskSession, answer_html, citation_number, remember_question
from kmds_desktop.app.events import Change
from kmds_desktop.app.preferences import PreferencesForm, model_list_label, models_summary, save_preferences
from kmds_desktop.config import Settings


def test_the_literature_session_announces_rows_ticks_checks_and_clearing() -> None:
    session = app_lit.LiteratureSession()
    seen: list[Change] = []
    unsubscribe = session.subscribe(seen.append)

    row = session.add_hand_written("cystic & fibrosis")
    assert [c.kind for c in seen] == [app_lit.ROWS_CHANGED, app_lit.CHECKS_WANTED]
    assert all(c.uids == (row.uid,) for c in seen)

    seen.clear()
    session.set_included(row.uid, False)
    session.edit(row.uid, "cystic & fibrosis & lung")
    assert [c.kind for c in seen] == [app_lit.TICKS_CHANGED, app_lit.CHECKS_WANTED]

    seen.clear()
    session.new_search()
    assert [c.kind for c in seen] == [app_lit.CLEARED]

    unsubscribe()
    session.add_hand_written("x")
    assert [c.kind for c in seen] == [app_lit.CLEARED], "an unsubscribed listener hears nothing more"


def test_a_stopped_or_failed_round_is_reported_as_a_warning() -> None:
    session = app_lit.LiteratureSession()
    rnd, _ = session.start_round("Does azithromycin help?", "2024-01-01T00:00:00Z")
    session.finish_round(cancelled=True)
    assert rnd.summary_level() == "warning"
    other, _ = session.start_round("Does azithromycin help?", "2024-01-01T00:00:00Z")
    for progress in other.progress.values():
        progress.queries = progress.answered = progress.expected
    session.finish_round()
    assert other.summary_level() == "info"


def test_preferences_save_stops_at_the_first_failing_step(tmp_path: Path, memory_keyring) -> None:
    data = Settings().model_dump(mode="json")
    target = tmp_path / "settings.json"
    bad = PreferencesForm(data, ["literature.dsn"],
                          dsn="host=db.example port=notaport dbname=x user=me password=pw")
    outcome = save_preferences(bad, target)
    assert not outcome.saved and outcome.errors
    assert not target.exists(), "nothing is written when a value is invalid"

    good = PreferencesForm(Settings().model_dump(mode="json"), ["literature.dsn"],
                           dsn="postgresql://me:pw@db.example:5433/lit")
    outcome = save_preferences(good, target)
    assert outcome.saved and target.exists()
    assert outcome.conninfo == {"host": "db.example", "port": "5433", "dbname": "lit", "user": "me"}
    assert outcome.settings.literature.mode == "external" and outcome.settings.literature.port == 5433
    assert "pw" not in target.read_text(encoding="utf-8"), "the password goes to the keyring, not the file"


def test_installed_means_the_same_in_every_line_of_the_dialog() -> None:
    models = ["mistral:latest", "gemma2:2b"]
    assert "is installed" in models_summary(models, "mistral")
    assert "NOT installed" in models_summary(models, "llama3")
    assert model_list_label("mistral", models).endswith("✓ installed")
    assert model_list_label("gemma2", models).endswith("(not installed)")
    assert model_list_label("builtin:keywords", models) == "builtin:keywords"


def test_answer_markdown_citations_and_history_rules() -> None:
    html = answer_html("Found:\n- one [1]\n- two [3]", 2, lambda text: text)
    assert "Found:\n\n- one" in html
    assert 'href="cite:1"' in html and "[3]" in html and 'href="cite:3"' not in html
    assert citation_number("cite:2") == 2 and citation_number("https://x") is None
    history = ["a", "b"]
    assert remember_question(history, " a ") == ["b", "a"] and remember_question(history, "  ") == ["b", "a"]
    session = AskSession(history=["q1"])
    session.remember("q2")
    assert session.history == ["q1", "q2"]


@pytest.mark.parametrize("text", ["", "   "])
def test_a_blank_question_is_not_remembered(text: str) -> None:
    assert remember_question(["a"], text) == ["a"]
