"""Unsaved edits kept in a recovery copy when the app was killed are offered back at the next start:
a bar per copy with Restore, Compare and Discard, clicked on the real window (issue 21, 5)."""

from __future__ import annotations

import shutil

from PySide6.QtCore import Qt

from kmds_desktop.app import workspace

LEFT = Qt.MouseButton.LeftButton


def _killed_with_edits(qtbot, make_window, path, finding: str) -> str:
    """A session that edits ``path`` and ends by a signal (its edits go to ``recovery/``)."""
    window = make_window(auto_index=False)
    with qtbot.waitSignal(window.kb_loaded, timeout=60_000):
        window.open_kb(path)
    target = window.kb.observations[0].iri
    window.kb.update_observation(target, finding=finding)
    window.close_for_signal()
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=10_000)
    return target


def test_the_next_start_offers_restore_compare_and_discard(qtbot, make_window, kmds_data, tmp_path,
                                                            data_home) -> None:
    first, second = tmp_path / "first.xml", tmp_path / "second.xml"
    shutil.copy(kmds_data / "example_ml_kb_exp_workflow.xml", first)
    shutil.copy(kmds_data / "example_ml_kb_exp_workflow.xml", second)
    before = first.read_bytes()
    iri = _killed_with_edits(qtbot, make_window, first, "Edited before the session was killed")
    _killed_with_edits(qtbot, make_window, second, "Another edit, to be discarded")
    assert {r.original for r in workspace.pending_recoveries()} == {first.resolve(), second.resolve()}

    window = make_window(auto_index=False)
    with qtbot.waitSignal(window.kb_loaded, timeout=60_000):
        window.start_up(kmds_data / "example_analytics_kb_app_workflow.xml")
    bars = {bar.recovery.original.name: bar for bar in window.recovery_bars}
    assert set(bars) == {"first.xml", "second.xml"}
    bar = bars["first.xml"]
    assert bar.isVisible() and "Unsaved edits of first.xml" in bar.label.text()

    qtbot.mouseClick(bar.compare_button, LEFT)
    qtbot.waitUntil(lambda: "changed" in bar.comparison.text(), timeout=60_000)
    assert "0 added, 1 changed, 0 removed observation." in bar.comparison.text(), bar.comparison.text()
    assert "Edited before the session was killed" in bar.comparison.text()

    other = bars["second.xml"]
    qtbot.mouseClick(other.discard_button, LEFT)
    assert other not in window.recovery_bars and not other.isVisible()
    assert not workspace.recovery_path(second).exists()

    with qtbot.waitSignal(window.kb_loaded, timeout=60_000):
        qtbot.mouseClick(bar.restore_button, LEFT)
    kb = window.kb
    assert kb.path == first.resolve() and kb.dirty
    assert kb.observation(iri).finding == "Edited before the session was killed"
    assert window.isWindowModified() and "first.xml" in window.windowTitle()
    assert first.read_bytes() == before, "restoring never writes the user's file by itself"
    assert window.recovery_bars == [] and workspace.pending_recoveries() == []
    window._force_close = True
