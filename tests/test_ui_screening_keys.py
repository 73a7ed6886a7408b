"""Screening keys that cannot lose a record, pressed on the real window: a number key only chooses the
exclusion reason (nothing is decided, the record stays on screen); I, E and M decide, as their buttons
say; Ctrl+Z (and U, and the Undo button) take the last decisions back one by one, each record comes back
on screen, and the records after it come back in the order they had."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from kmds_desktop.app.screening_start import open_for_documents

QUESTION = "cystic fibrosis lung function in adults"
TITLES = [
    "Cystic fibrosis lung function decline in adults",
    "Mouse model of airway inflammation",
    "Inhaled therapy for cystic fibrosis",
    "Diabetes in older people",
    "Sweat chloride testing in infants",
    "Exercise and lung function in cystic fibrosis",
    "Pancreatic enzymes and growth in children",
    "Airway clearance techniques compared",
]


def documents() -> list[dict]:
    return [
        {"id": 200 + i, "source_name": "pubmed", "external_id": str(32000000 + i), "title": f"{t} ({i})",
         "abstract": f"{t}: a study of {i + 10} people.", "authors": ["Smith J"], "year": 2021,
         "publication": "Thorax", "rank": i + 1}
        for i, t in enumerate(TITLES)
    ]


@pytest.fixture()
def window(qtbot, tmp_path: Path):
    from kmds_desktop.ui.screening.window import ScreeningWindow

    session = open_for_documents(documents(), question=QUESTION, origin="search A",
                                 store_path=tmp_path / "screening" / "screening.sqlite3")
    win = ScreeningWindow(session)
    qtbot.addWidget(win)
    win.resize(1600, 1000)
    win.show()
    qtbot.waitExposed(win)
    win.activateWindow()
    yield win
    win.close()


def press(qtbot, win, key: Qt.Key, modifier: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:
    """One key press as a user makes it: to the widget with focus (the window when none has)."""
    qtbot.keyClick(win.focusWidget() or win, key, modifier)


def undo_key(qtbot, win) -> None:
    press(qtbot, win, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)


def on_screen(win) -> tuple[str, str]:
    """The record the session shows, after checking the window draws that same record."""
    record = win.session.current
    assert record is not None and record.title in win.record_view.toPlainText()
    return record.key


def stored(win) -> dict:
    s = win.session
    return s.store.decisions(s.review.id)


def test_a_number_key_alone_decides_nothing(qtbot, window) -> None:
    s = window.session
    reasons = s.review.reasons
    first = on_screen(window)
    assert "Keys 1–9 choose a reason" in window.reasons_list.toolTip()
    assert "at once" not in window.reasons_list.toolTip()
    press(qtbot, window, Qt.Key.Key_3)
    assert stored(window) == {} and s.decisions == {}
    assert on_screen(window) == first and s.view().decision is None
    assert "Not decided yet" in window.decision_label.text()
    assert window.reasons_list.currentRow() == 2
    assert window.reasons_list.currentItem().data(Qt.ItemDataRole.UserRole) == reasons[2]
    assert window.exclude_button.text() == f"Exclude (E): {reasons[2]}"
    assert window.progress_label.text() == "0 of 8 screened · 0 included · 0 since the last include"
    # Every number key, and with a note typed (which once made a number key decide): still nothing.
    window.note_edit.setText("read the methods first")
    for n in range(1, 10):
        s.press(str(n)) if n > len(reasons) else press(qtbot, window, getattr(Qt.Key, f"Key_{n}"))
    assert stored(window) == {} and on_screen(window) == first
    assert window.reasons_list.currentRow() == len(reasons) - 1
    # The decision takes its own key, with the reason chosen last and the note.
    press(qtbot, window, Qt.Key.Key_2)
    press(qtbot, window, Qt.Key.Key_E)
    made = stored(window)[first]
    assert (made.decision, made.reason, made.note) == ("exclude", reasons[1], "read the methods first")
    assert on_screen(window) != first


def test_a_reason_clicked_in_the_list_is_the_one_e_uses(qtbot, window) -> None:
    s = window.session
    reasons = s.review.reasons
    first = on_screen(window)
    item = window.reasons_list.item(4)
    qtbot.mouseClick(window.reasons_list.viewport(), Qt.MouseButton.LeftButton,
                     pos=window.reasons_list.visualItemRect(item).center())
    assert stored(window) == {} and on_screen(window) == first
    assert s.chosen_reason() == reasons[4] and window.exclude_button.text().endswith(reasons[4])
    window.activateWindow()
    window.setFocus()
    press(qtbot, window, Qt.Key.Key_E)
    assert stored(window)[first].reason == reasons[4]


def test_i_e_m_decide_as_the_buttons_say(qtbot, window) -> None:
    assert window.include_button.text() == "Include (I)"
    assert window.exclude_button.text().startswith("Exclude (E)")
    assert window.maybe_button.text() == "Maybe (M)"
    assert "U" in window.undo_button.text() and "Ctrl+Z" in window.undo_button.text()
    keys = []
    for k in (Qt.Key.Key_I, Qt.Key.Key_E, Qt.Key.Key_M):
        keys.append(on_screen(window))
        press(qtbot, window, k)
    made = stored(window)
    assert [made[k].decision for k in keys] == ["include", "exclude", "maybe"]
    assert made[keys[1]].reason == window.session.review.reasons[0]  # none chosen: the first
    assert window.decided_label.text() == "Decided (3)"


def test_ctrl_z_three_times_restores_each_record_and_its_place_in_the_queue(qtbot, window) -> None:
    s = window.session
    decided = []
    for k in (Qt.Key.Key_I, Qt.Key.Key_E, Qt.Key.Key_M):
        decided.append(on_screen(window))
        press(qtbot, window, k)
    s.wait_for_training(timeout=20)  # an include and an exclude: the model may reorder the rest
    next_before = on_screen(window)
    assert len(stored(window)) == 3 and next_before not in decided

    for n, expected in enumerate(reversed(decided), start=1):
        undo_key(qtbot, window)
        assert on_screen(window) == expected  # C, then B, then A
        assert s.view().decision is None and "Not decided yet" in window.decision_label.text()
        assert set(stored(window)) == set(decided[: 3 - n])
        assert window.decided_label.text() == f"Decided ({3 - n})"
    assert stored(window) == {} and s.decisions == {} and s.decided_keys() == []
    assert window.progress_label.text() == "0 of 8 screened · 0 included · 0 since the last include"
    undo_key(qtbot, window)  # nothing left to undo: the record stays
    assert on_screen(window) == decided[0]
    # Their place in the queue: A, B, C, then the record that was next before the undo.
    assert [s.records[i].key for i, _how in s.queue(4)] == [*decided, next_before]
    for expected_next in (*decided[1:], next_before):
        press(qtbot, window, Qt.Key.Key_I)
        assert on_screen(window) == expected_next
    assert set(stored(window)) == set(decided)


def test_u_and_the_undo_button_are_the_same_undo(qtbot, window) -> None:
    s = window.session
    a = on_screen(window)
    press(qtbot, window, Qt.Key.Key_I)
    b = on_screen(window)
    press(qtbot, window, Qt.Key.Key_E)
    c = on_screen(window)
    qtbot.mouseClick(window.undo_button, Qt.MouseButton.LeftButton)
    assert on_screen(window) == b and set(stored(window)) == {a}
    press(qtbot, window, Qt.Key.Key_U)
    assert on_screen(window) == a and stored(window) == {}
    press(qtbot, window, Qt.Key.Key_M)
    assert on_screen(window) == b
    press(qtbot, window, Qt.Key.Key_M)
    assert on_screen(window) == c
    assert [s.decisions[k].decision for k in (a, b)] == ["maybe", "maybe"]
