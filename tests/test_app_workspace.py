"""The KB workspace and the ask session without Qt: start-up policy, the demo KB as a copy, recent files,
the recovery copy, one semantic index however many workers ask, and what a KB change does to an answer.

Real parts: the demo KB and the shared KMDS files loaded and saved by the real KB code.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

import pytest

from kmds_desktop.app import workspace
from kmds_desktop.app.ask import AskInputError, AskSession
from kmds_desktop.app.workspace import DemoOverwriteError, IndexHolder
from kmds_desktop.config import Settings


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_demo_kb_opens_as_a_copy_and_saving_never_touches_the_installed_file(data_home) -> None:
    installed = workspace.installed_demo_path()
    before = _digest(installed)
    kb = workspace.load_kb(installed)
    copy = workspace.demo_copy_path()
    assert Path(kb.path).resolve() == copy.resolve() and copy.parent.parent == data_home
    assert workspace.is_demo(kb.path) and workspace.is_demo(installed)

    first = kb.observations[0]
    kb.update_observation(first.iri, finding=first.finding + " (edited)")
    saved = workspace.save_kb(kb)
    assert saved.resolve() == copy.resolve()
    assert _digest(installed) == before, "the installed demo KB is never written"
    again = workspace.load_kb(installed)  # the user's copy, with the edit
    assert again.observation(first.iri).finding.endswith("(edited)")

    with pytest.raises(DemoOverwriteError, match="never overwritten"):
        workspace.save_kb(again, installed)
    assert _digest(installed) == before


def test_startup_policy_and_recent_files(data_home, kmds_data) -> None:
    settings = Settings()
    assert workspace.startup_kb(settings) == (workspace.installed_demo_path(), None)
    other = kmds_data / "example_ml_kb_exp_workflow.xml"
    assert workspace.startup_kb(settings, str(other)) == (other, None)

    workspace.remember_opened(settings.ui, workspace.demo_copy_path())
    assert settings.ui.last_kb is None and settings.ui.recent_files == []
    workspace.remember_opened(settings.ui, other)
    assert settings.ui.last_kb == str(other) and settings.ui.recent_files == [str(other)]
    assert workspace.startup_kb(settings) == (other, None)

    settings.ui.last_kb = str(data_home / "gone.xml")
    path, note = workspace.startup_kb(settings)
    assert path == workspace.installed_demo_path() and "gone.xml no longer exists" in note


def test_recovery_copy_goes_to_the_data_folder(data_home, kmds_data, tmp_path) -> None:
    own = tmp_path / "mine.xml"
    own.write_bytes((kmds_data / "example_ml_kb_exp_workflow.xml").read_bytes())
    before = _digest(own)
    kb = workspace.load_kb(own)
    first = kb.observations[0]
    kb.update_observation(first.iri, finding="changed before a crash")
    target = workspace.write_recovery_copy(kb)
    assert target == data_home / "recovery" / "mine.recovered.xml" and target.exists()
    assert _digest(own) == before, "the user's file is not written by a recovery"
    assert workspace.load_kb(target).observation(first.iri).finding == "changed before a crash"


def test_index_is_opened_once_however_many_workers_ask() -> None:
    opened: list[object] = []

    def slow_open(_settings: Settings) -> object:
        time.sleep(0.2)  # long enough for every thread to find no index without the lock
        opened.append(object())
        return opened[-1]

    holder = IndexHolder(opener=slow_open)
    start = threading.Barrier(4)
    got: list[object] = []

    def worker() -> None:
        start.wait()
        got.append(holder.get_or_open(Settings()))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(opened) == 1 and got == [opened[0]] * 4
    holder.reset()
    assert holder.current is None and holder.get("index") is None


def test_answers_belong_to_the_kb_they_were_asked_of() -> None:
    session = AskSession()
    kb_a, kb_b = object(), object()
    with pytest.raises(AskInputError, match="Type a question"):
        session.check("  ", kb_a)
    with pytest.raises(AskInputError, match="Open a knowledge base"):
        session.check("what?", None)
    session.started(session.check(" what models? ", kb_a), kb_a)
    assert session.for_open_kb()
    session.finished("answer about A")
    assert session.kb_changed(kb_a) == "" and not session.stale, "saved or settings changed: same answer"
    assert session.kb_changed(kb_a, edited=True) == "stale" and session.result == "answer about A"
    assert session.stale
    assert session.kb_changed(kb_b) == "cleared" and session.result is None and not session.stale
    assert not session.for_open_kb(), "what still arrives for the answer about A is dropped"
    assert session.kb_changed(kb_b) == ""
    for q in ["a", "b", "a"]:
        session.remember(q)
    assert session.history == ["what models?", "b", "a"]


def test_dropped_files_go_where_they_belong() -> None:
    assert workspace.route_dropped(["/x/kb.xml", "/x/more.owl"]) == ("kb", ["/x/kb.xml"])
    assert workspace.route_dropped(["/x/kb.xml", "/x/papers.jsonl", "/x/medline.xml.gz"]) == (
        "literature", ["/x/papers.jsonl", "/x/medline.xml.gz"])
    assert workspace.route_dropped(["/x/notes.txt"]) == ("", [])
    assert workspace.droppable("/x/A.RDF") and not workspace.droppable("/x/a.pdf")


def test_the_index_follows_the_open_kb(data_home, kmds_data) -> None:
    """When the index is brought up to date with the KB, and when the KB counts as indexed: the
    window's rule, without Qt (real KBs, the real embedding model, an in-memory ChromaDB index)."""
    from kmds_desktop.index import SemanticIndex

    holder = IndexHolder(SemanticIndex(None))
    follower = workspace.IndexFollower(holder)
    settings = Settings()
    first = workspace.load_kb(kmds_data / "example_ml_kb_exp_workflow.xml")
    other = workspace.load_kb(kmds_data / "example_analytics_kb_app_workflow.xml")
    assert follower.kb_opened(first) and not follower.is_ready(first)
    report = workspace.update_index(holder, settings, first)
    assert report.embedded >= len(first.observations)
    assert follower.built(first, first) and follower.is_ready(first)

    assert follower.kb_opened(other) and not follower.is_ready(other)  # another KB: not indexed yet
    assert not follower.built(first, other), "a build for the KB that was closed meanwhile"
    assert not follower.is_ready(other)
    workspace.update_index(holder, settings, other)
    assert follower.built(other, other) and follower.is_ready(other)

    obs = other.observations[0]
    other.update_observation(obs.iri, finding="Tickets reopen within a week")
    assert follower.kb_edited(other) and follower.kb_saved(other)
    edit = workspace.update_index(holder, settings, other)
    assert edit.embedded == 1, "an edit embeds only what changed"

    assert follower.rebuild(other) and not follower.is_ready(other)
    assert not follower.settings_changed(settings.index, settings.index.model_copy())
    assert holder.current is not None
    changed = settings.index.model_copy(update={"n_results": 7})
    assert follower.settings_changed(settings.index, changed) and holder.current is None
    manual = workspace.IndexFollower(holder, auto=False)  # tests, a script that indexes itself
    assert not manual.kb_opened(other) and not manual.kb_edited(other) and manual.rebuild(other)
    assert not follower.kb_opened(None) and not follower.rebuild(None)


def test_unsaved_edits_are_asked_about_before_they_could_be_lost(data_home, kmds_data, tmp_path) -> None:
    own = tmp_path / "mine.xml"
    own.write_bytes((kmds_data / "example_ml_kb_exp_workflow.xml").read_bytes())
    kb = workspace.load_kb(own)
    assert workspace.unsaved_changes_prompt(kb, "close") is None and not workspace.has_unsaved_changes(kb)
    assert workspace.unsaved_changes_prompt(None, "close") is None
    first = kb.observations[0]
    kb.update_observation(first.iri, finding="edited")
    prompt = workspace.unsaved_changes_prompt(kb, "open other.xml")
    assert prompt is not None and workspace.has_unsaved_changes(kb)
    assert prompt.text == "mine.xml has unsaved changes. Save them before you open other.xml?"
    assert prompt.choices == ("save", "discard", "cancel") and prompt.default == "save"
    assert workspace.after_unsaved_choice(kb, "cancel") == "stay" and kb.dirty
    assert workspace.after_unsaved_choice(kb, "") == "stay" and kb.dirty  # the dialog was closed
    assert workspace.after_unsaved_choice(kb, "save") == "save" and kb.dirty  # dirty until saved
    assert workspace.after_unsaved_choice(kb, "discard") == "proceed" and not kb.dirty
    assert workspace.unsaved_changes_prompt(kb, "close") is None


def test_a_new_observation_starts_in_the_selected_category_and_workflow() -> None:
    known = ["ITSM modelling", "EDA"]
    under_wf = [("observation", "urn:o1"), ("category", "data_quality"), ("workflow", "EDA")]
    assert workspace.new_observation_defaults(under_wf, known) == ("data_quality", "EDA")
    on_workflow = [("workflow", "ITSM modelling")]
    assert workspace.new_observation_defaults(on_workflow, known) == (None, "ITSM modelling")
    unlinked = [("category", "modelling_choice"), ("unlinked", "")]
    assert workspace.new_observation_defaults(unlinked, known) == ("modelling_choice", None)
    undefined = [("category", "data_quality"), ("workflow", "only linked to")]
    assert workspace.new_observation_defaults(undefined, known) == ("data_quality", None)
    assert workspace.new_observation_defaults([], known) == (None, None)


def test_the_kb_filter_matches_finding_type_or_intent_ignoring_case() -> None:
    from types import SimpleNamespace

    obs = SimpleNamespace(finding="Timestamps had mixed formats", obs_type="Data Quality Observation",
                          intent=None)
    assert workspace.observation_matches(obs, "")
    assert workspace.observation_matches(obs, "TIMESTAMPS") and workspace.observation_matches(obs, "quality")
    assert not workspace.observation_matches(obs, "survival")
