"""The workspace session owns the open KB and its index and announces each change (no Qt): what the
window's title, status line and recent-files menu follow."""

from __future__ import annotations

import shutil

from kmds_desktop.app import workspace
from kmds_desktop.app.ask import ANSWERED, ASKED, CLEARED, FOUND, STALE, AskSession
from kmds_desktop.app.events import Change
from kmds_desktop.app.workspace_session import (
    INDEX_CHANGED,
    KB_EDITED,
    KB_OPENED,
    KB_SAVED,
    WorkspaceSession,
)
from kmds_desktop.config import Settings


def test_the_session_holds_the_open_kb_and_announces_each_change(data_home, kmds_data, tmp_path) -> None:
    own = tmp_path / "mine.xml"
    shutil.copy(kmds_data / "example_ml_kb_exp_workflow.xml", own)
    session = WorkspaceSession(Settings())
    heard: list[Change] = []
    unsubscribe = session.subscribe(heard.append)
    assert session.kb is None and session.file_name() is None and not session.indexed
    assert session.summary() == ("No knowledge base", "")

    kb = workspace.load_kb(own)
    assert session.opened(kb), "a KB opened: the index should follow it"
    assert session.kb is kb and session.file_name() == "mine.xml"
    assert session.settings.ui.recent_files == [str(own)] and session.settings.ui.last_kb == str(own)
    text, tip = session.summary()
    assert text.startswith("KB: mine.xml — ") and "indexed" not in text and tip == str(own)

    obs = kb.observations[0]
    kb.update_observation(obs.iri, finding="Accuracy dropped on the new data")
    assert session.edited() and session.has_unsaved_changes()
    elsewhere = tmp_path / "copy.xml"
    written = workspace.save_kb(kb, elsewhere)
    assert session.saved(written) and not session.has_unsaved_changes()
    assert session.settings.ui.recent_files[0] == str(elsewhere), "Save as: the new file is the recent one"

    session.index_built(object())  # a build for a KB closed meanwhile says nothing
    assert not session.indexed
    session.index_built(kb)
    assert session.indexed and session.summary()[0].endswith(" · indexed")
    assert session.rebuild() and not session.indexed, "a rebuild: not indexed until it ends"
    assert [c.kind for c in heard] == [KB_OPENED, KB_EDITED, KB_SAVED, INDEX_CHANGED, INDEX_CHANGED]

    context = session.ask_context()
    assert context["kb"] is kb and context["index"] is None
    assert context["index_holder"] is session.index_holder
    new_index = session.settings.index.model_copy(update={"n_results": 7})
    assert session.index_settings_changed(new_index), "new index settings: the open KB is indexed there"
    assert session.settings.index.n_results == 7 and heard[-1].kind == INDEX_CHANGED
    assert not session.index_settings_changed(new_index.model_copy()), "the same settings change nothing"

    unsubscribe()
    session.clear_recent()
    assert session.settings.ui.recent_files == [] and len(heard) == 6


def test_without_auto_index_only_a_rebuild_asks_for_the_index(data_home, kmds_data) -> None:
    session = WorkspaceSession(Settings(), auto_index=False)
    assert not session.rebuild(), "no KB: nothing to index"
    kb = workspace.load_kb(kmds_data / "example_analytics_kb_app_workflow.xml")
    assert not session.opened(kb) and not session.edited() and session.rebuild()


def test_demo_copy_saved_is_not_a_recent_file(data_home) -> None:
    session = WorkspaceSession(Settings())
    kb = workspace.load_kb(workspace.installed_demo_path())
    session.opened(kb)
    assert session.settings.ui.recent_files == []
    session.saved(workspace.save_kb(kb))
    assert session.settings.ui.recent_files == [] and session.file_name() == "demo_kb.xml"


def test_the_ask_session_keeps_the_records_found_until_the_kb_is_replaced() -> None:
    ask = AskSession()
    heard: list[str] = []
    ask.subscribe(lambda change: heard.append(change.kind))
    kb_a, kb_b = object(), object()
    ask.started("what models?", kb_a)
    ask.found("route and records")
    assert ask.retrieved == "route and records" and ask.kb is kb_a and ask.kb_name() == ""
    ask.started("and metrics?", kb_a)
    assert ask.retrieved is None, "a new question: the previous records are not its own"
    ask.found("more records")
    ask.finished("answer")
    assert ask.kb_changed(kb_b) == "cleared" and ask.retrieved is None and ask.result is None
    ask.started("what models?", kb_b)
    ask.finished("answer about B")
    assert ask.kb_changed(kb_b, edited=True) == "stale" and ask.result == "answer about B"
    assert heard == [ASKED, FOUND, ASKED, FOUND, ANSWERED, CLEARED, ASKED, ANSWERED, STALE]


def test_forgetting_the_index_does_not_wait_for_an_opening_under_way() -> None:
    """Preferences saved on the GUI thread forget the index; an index process still starting (up to a
    minute) held the lock that forgetting waited on, and the window froze. The opening under way is not
    kept: the next use opens the index of the new settings."""
    import threading

    from kmds_desktop.app.workspace import IndexHolder
    from kmds_desktop.config import Settings

    entered, release = threading.Event(), threading.Event()
    opened: list[object] = []

    def slow_opener(_settings: Settings) -> object:
        entered.set()
        release.wait(30)
        opened.append(object())
        return opened[-1]

    holder = IndexHolder(opener=slow_opener)
    worker = threading.Thread(target=holder.get_or_open, args=(Settings(),))
    worker.start()
    assert entered.wait(30)  # the opening is under way, holding the holder's lock
    holder.reset()  # returns while the opening still waits: it never took the opening's lock
    assert worker.is_alive() and not opened
    release.set()
    worker.join(30)
    assert opened and holder.current is None  # opened across the reset: not kept
    assert holder.get_or_open(Settings()) is opened[-1] and holder.current is opened[-1]


def test_a_build_started_before_a_rebuild_does_not_mark_the_kb_indexed() -> None:
    """The job runner lets a running build finish before the rebuild's build starts: the first one's end
    marked the KB indexed while the new index (after new settings) was still empty."""
    from types import SimpleNamespace

    from kmds_desktop.app.workspace import IndexFollower, IndexHolder

    kb = SimpleNamespace(kb_id="k")
    follower = IndexFollower(IndexHolder(index=object()))
    follower.kb_opened(kb)
    running = follower.ticket  # a build starts
    assert follower.rebuild(kb)  # the user asks for a rebuild (or saves new index settings)
    assert not follower.built(kb, kb, running) and not follower.is_ready(kb)
    assert follower.built(kb, kb, follower.ticket) and follower.is_ready(kb)  # the build asked since
    earlier = follower.ticket
    assert follower.settings_changed({"a": 1}, {"a": 2})
    assert not follower.built(kb, kb, earlier)
