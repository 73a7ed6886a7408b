"""A review in the window, by clicking the real widgets on a real PostgreSQL database: File → Open review
shows its search, results and screening; a restart of the window (a new MainWindow on the same data
folder) reopens it exactly there; after next year's records are imported, the next start says which
review has new records and its Update screens only those. New, Rename and Delete go through the menu."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from kmds_desktop.app.review_resume import read_place
from kmds_desktop.app.reviews import ReviewBook
from kmds_desktop.config import Settings
from kmds_desktop.literature.reviews.identity import repeats
from kmds_desktop.literature.strategy.history import SearchHistory
from kmds_desktop.literature.strategy.workbench import SearchWorkbench

WAIT = 60_000
QUESTION = "sweat testing in cystic fibrosis"


def _cf_by_year(literature_data: Path, tmp_path: Path) -> tuple[Path, Path, Path, dict[str, int]]:
    """The CF collection split as the update's evidence splits it: 1974–77 now, 1978 and 1979 later."""
    parts = {year: tmp_path / f"cf-{year}.jsonl" for year in ("1974-77", "1978", "1979")}
    years: dict[str, int] = {}
    with open(literature_data / "cf" / "corpus.jsonl", encoding="utf-8") as src:
        out = {name: open(path, "w", encoding="utf-8") for name, path in parts.items()}  # noqa: SIM115
        for line in src:
            doc = json.loads(line)
            years[doc["id"]] = int(doc["year"])
            out["1974-77" if years[doc["id"]] <= 1977 else str(doc["year"])].write(line)
        for handle in out.values():
            handle.close()
    return parts["1974-77"], parts["1978"], parts["1979"], years


def session_screened(window: Any) -> int:
    """How many of the latest update's records the open review has decided (the flow's screened box)."""
    with ReviewBook() as book:
        return book.flow(window.reviews.place.review).rounds[-1].screened


def _click(qtbot, button) -> None:
    assert button.isEnabled() and button.isVisible(), button.text()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def _screening(qtbot, window) -> Any:
    """The review's screening window once its session is on screen."""
    qtbot.waitUntil(lambda: window.reviews.screening_window is not None
                    and window.reviews.screening_window.session is not None, timeout=WAIT)
    return window.reviews.screening_window


def _settings() -> Settings:
    settings = Settings()
    settings.retrieval.embed_after_import = False  # no embedding model in this test: the order uses TF-IDF
    return settings


def _start(make_window, database) -> Any:
    return make_window(_settings(), literature_kwargs={"database": database})


def _sweat_review(database, records: Path) -> tuple[set[str], int]:
    """The review both journeys start from: ``records`` imported, one hand-written search saved and made
    the review "sweat"; its first round's record keys and the saved search's number."""
    database.import_files([records])
    with SearchHistory() as history:
        saved = SearchWorkbench(history, database).run(
            QUESTION, [("sweat & (chloride | sodium)", {"kind": "hand-written"})], max_rows=1000)
        with ReviewBook() as book:
            book.new("sweat", [QUESTION], history=history, database=database, from_sets=[saved.number])
            return {r.key for r in book.store.records("sweat")}, saved.number


def _restart(qtbot, window, make_window, database) -> Any:
    """Close the window as the user does (the place is written on close) and start a new one."""
    window.close()
    assert not window.isVisible()
    return _start(make_window, database)


def test_a_review_reopens_after_a_restart_and_its_update_screens_only_the_new_records(
        qtbot, make_window, pg_empty_database, literature_data, tmp_path, data_home, monkeypatch) -> None:
    from PySide6.QtWidgets import QFileDialog

    db = pg_empty_database
    early, later, latest, years = _cf_by_year(literature_data, tmp_path)
    first_round, _saved = _sweat_review(db, early)
    assert first_round

    # Today: File → Open review…, the review's search comes back into the panel and its screening opens.
    window = _start(make_window, db)
    panel = window.literature
    qtbot.waitUntil(lambda: panel.session.documents_in_database is not None, timeout=WAIT)
    window.reviews.actions["open"].trigger()
    picker = window.reviews.dialog
    qtbot.waitUntil(lambda: picker.list.count() == 1, timeout=WAIT)
    assert picker.list.item(0).text().startswith("sweat: 0 of ")
    _click(qtbot, picker.open_button)
    screening = _screening(qtbot, window)
    assert panel.question.text() == QUESTION
    assert [r.query for r in panel.session.included_rows()] == ["sweat & (chloride | sodium)"]
    assert panel.documents.rowCount() == len(first_round)
    assert panel.screen_button.isEnabled()
    for button in (screening.include_button, screening.exclude_button, screening.maybe_button):
        _click(qtbot, button)
    decided = set(screening.session.decisions)
    assert len(decided) == 3
    _click(qtbot, screening.back_button)  # back to the second decision, to read it again
    _click(qtbot, screening.back_button)
    left_at = screening.session.current.key
    assert left_at == screening.session.decided_keys()[1]  # not the record the queue would offer next
    assert read_place().record == left_at  # written on each change, not only on close
    assert [a.text() for a in window.reviews.recent_menu.actions()] == ["sweat"]

    # Tomorrow: the window starts where it was left: search, results, the record on screen.
    window = _restart(qtbot, window, make_window, db)
    panel = window.literature
    screening = _screening(qtbot, window)
    assert screening.session.review.id == "sweat"
    assert screening.session.current.key == left_at
    assert set(screening.session.decisions) == decided
    assert screening.decided_list.count() == 3
    assert screening.decision_label.text().startswith("<b>Decided: exclude")
    assert panel.question.text() == QUESTION
    assert [r.query for r in panel.session.included_rows()] == ["sweat & (chloride | sodium)"]
    assert panel.documents.rowCount() == len(first_round)
    assert "reopened where you left it" in window.messages.label.text()
    qtbot.waitUntil(lambda: panel.session.documents_in_database is not None, timeout=WAIT)
    assert not window.reviews.new_records_bar.isVisible()  # the database has not changed

    # 1978's records are imported in the window: the bar says the review has new records.
    panel.import_files([later])
    bar = window.reviews.new_records_bar
    qtbot.waitUntil(bar.isVisible, timeout=WAIT)
    assert bar.label.text().startswith("1 review has ") and "(sweat: " in bar.label.text()

    # 1979's are imported elsewhere (the CLI); the next start says so too, counting both years.
    window.close()
    db.import_files([latest])
    window = _start(make_window, db)
    bar = window.reviews.new_records_bar
    qtbot.waitUntil(bar.isVisible, timeout=WAIT)
    assert bar.label.text().startswith("1 review has ") and "(sweat: " in bar.label.text()
    waiting = int(bar.label.text().split("(sweat: ")[1].split(")")[0].replace(",", ""))
    assert waiting > 0
    _screening(qtbot, window)
    _click(qtbot, bar.update_button)
    qtbot.waitUntil(lambda: window.reviews.screening_window is not None
                    and window.reviews.screening_window.session is not None
                    and window.reviews.screening_window.session.only is not None, timeout=WAIT)
    session = window.reviews.screening_window.session
    new = set(session.only)
    assert len(new) == waiting and not new & first_round
    assert all(years[key[1]] >= 1978 for key in new)
    offered = {session.records[i].key for i, _how in session.queue(len(session.records))}
    assert offered == new  # only the new records are screened; none of round one is shown again
    assert session.current.key in new
    assert set(session.decisions) == decided and repeats(session.records) == []
    assert "Update 1 of sweat" in "".join(m.text for m in window.messages.history)
    assert "showing only the" in window.messages.label.text()
    assert read_place().only_round == 1

    # The screening says so: a badge over the queue, and Show all brings every unscreened record back.
    badge = window.reviews.only_badge
    assert badge is not None and badge.isVisible()
    assert badge.label.text().startswith(f"<b>Update 1: {waiting:,} new records only</b>")
    _click(qtbot, badge.show_all_button)
    assert session.only is None and window.reviews.only_badge is None
    offered = {session.records[i].key for i, _how in session.queue(len(session.records))}
    assert offered == (first_round - decided) | new  # round one's unscreened records are back
    assert read_place().only_round is None
    assert "Every unscreened record" in window.messages.label.text()

    # File → Review report… says what happened in each round (what was searched when, the PRISMA flow
    # per round) and saves it to a file.
    window.reviews.actions["report"].trigger()
    report = window.reviews.dialog
    qtbot.waitUntil(report.save_button.isEnabled, timeout=WAIT)
    text = report.text.toPlainText()
    assert "sweat & (chloride | sodium)" in text and "PRISMA 2020 flow:" in text
    assert "update 1 (#" in text and f"{waiting:,} new" in text
    assert "Update 1" in text and "Total studies included in the review" in text
    saved = tmp_path / "sweat report.txt"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(saved), "Text"))
    _click(qtbot, report.save_button)
    qtbot.waitUntil(saved.exists, timeout=WAIT)
    assert saved.read_text(encoding="utf-8").rstrip() == text.rstrip()
    # Its second tab draws the PRISMA 2020 flow for updated reviews; Save diagram… writes the SVG, which an
    # independent XML parser reads back with the same numbers.
    assert report.flow.renderer().isValid() and report.save_flow_button.isEnabled()
    assert "Previous studies" in report.flow.svg and f"New records screened (n = {session_screened(window)}" \
        in report.flow.svg
    diagram = tmp_path / "sweat PRISMA flow.svg"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(diagram), "SVG"))
    _click(qtbot, report.save_flow_button)
    qtbot.waitUntil(diagram.exists, timeout=WAIT)
    words = " ".join(t.text or "" for t in ElementTree.parse(diagram).iter("{http://www.w3.org/2000/svg}text"))
    assert "Update 1" in words and "Total studies included in the review" in words
    report.close()

    # A record of round one is withdrawn between two starts (a PubMed update file imported elsewhere):
    # no document count changes, yet the next start names the review, and its Update flags the record.
    window.close()
    withdrawn = sorted(decided)[0]
    db.run(lambda c: c.execute("UPDATE document SET withdrawn_date = '1980-03-01' WHERE external_id = %s",
                               (withdrawn[1],)))
    window = _start(make_window, db)
    bar = window.reviews.new_records_bar
    qtbot.waitUntil(bar.isVisible, timeout=WAIT)
    assert bar.label.text() == ("1 review has 1 record withdrawn since (sweat: 1) — Update flags the "
                                "withdrawn records of sweat")
    _screening(qtbot, window)
    _click(qtbot, bar.update_button)
    qtbot.waitUntil(lambda: "1 withdrawn since (flagged)" in "".join(m.text for m in window.messages.history),
                    timeout=WAIT)
    with ReviewBook() as book:
        assert book.store.flags("sweat") == {withdrawn: "1980-03-01"}
        assert withdrawn in book.store.decisions("sweat")  # the decision stays on record
    assert read_place().database_seen is not None and read_place().database_seen.withdrawn == 1


def test_new_rename_and_delete_a_review_from_the_file_menu(qtbot, make_window, pg_empty_database,
                                                           data_home) -> None:
    window = make_window(literature_kwargs={"database": pg_empty_database, "open_on_start": False})
    reviews = window.reviews
    file_menu = window.menuBar().actions()[0].menu()
    names = [a.text() for a in file_menu.actions()]
    for entry in ("&New review…", "Open re&view…", "Re&cent reviews", "&Update review", "Review re&port…",
                  "Rena&me review…",
                  "&Delete review…", "E&xport review…", "Import revie&w…",
                  "Merge second screener's decisions…"):
        assert entry in names, entry
    assert not reviews.actions["rename"].isEnabled() and not reviews.actions["delete"].isEnabled()

    reviews.actions["new"].trigger()
    dialog = reviews.dialog
    assert not dialog.ok_button.isEnabled()  # no name, no review
    qtbot.keyClicks(dialog.name_edit, "hand search")
    _click(qtbot, dialog.ok_button)
    screening = _screening(qtbot, window)
    assert screening.session.review.id == "hand search"
    assert reviews.actions["rename"].isEnabled() and read_place().review == "hand search"

    reviews.actions["new"].trigger()  # a name in use is refused in one line; nothing is lost
    qtbot.keyClicks(reviews.dialog.name_edit, "hand search")
    _click(qtbot, reviews.dialog.ok_button)
    qtbot.waitUntil(lambda: "exists already" in window.messages.label.text(), timeout=WAIT)
    assert "\n" not in window.messages.label.text()

    reviews.actions["rename"].trigger()
    dialog = reviews.dialog
    assert dialog.name_edit.text() == "hand search"
    dialog.name_edit.setText("")
    qtbot.keyClicks(dialog.name_edit, "hand search, adults")
    _click(qtbot, dialog.ok_button)
    qtbot.waitUntil(lambda: read_place().review == "hand search, adults", timeout=WAIT)
    with ReviewBook() as book:
        assert [s.id for s in book.summaries()] == ["hand search, adults"]
    assert [a.text() for a in reviews.recent_menu.actions()] == ["hand search, adults"]
    assert screening.windowTitle() == "Screening — hand search, adults"

    reviews.actions["delete"].trigger()
    box = reviews.dialog
    assert isinstance(box, QMessageBox) and "hand search, adults" in box.text()
    _click(qtbot, box.button(QMessageBox.StandardButton.Yes))
    qtbot.waitUntil(lambda: read_place().review == "", timeout=WAIT)
    with ReviewBook() as book:
        assert book.summaries() == []
    assert reviews.screening_window is None
    assert not reviews.actions["rename"].isEnabled()
    assert [a.text() for a in reviews.recent_menu.actions()] == ["(none yet)"]


def test_a_damaged_place_file_starts_like_a_first_run_and_the_next_change_repairs_it(data_home) -> None:
    from kmds_desktop.app.review_resume import ReviewPlace, place_path, write_place

    place_path().write_text("{not json", encoding="utf-8")
    assert read_place() == ReviewPlace()
    place_path().write_text(json.dumps({"review": 3, "record": ["CF"], "recent": ["a", 7, "b"],
                                        "search_set": -1, "documents_seen": "many"}), encoding="utf-8")
    assert read_place() == ReviewPlace(recent=["a", "b"])  # wrong types dropped, never trusted
    place = ReviewPlace()
    for n in range(10):
        place.opened(f"review {n}", search_set=n + 1)
    place.record = ("CF", "cf:1")
    assert write_place(place) is None
    again = read_place()
    assert again.recent == [f"review {n}" for n in range(9, 1, -1)]  # the last eight, newest first
    assert (again.review, again.search_set, again.record) == ("review 9", 10, ("CF", "cf:1"))
    again.renamed("review 9", "nine")
    again.deleted("review 8")
    assert again.review == "nine" and again.recent[:2] == ["nine", "review 7"]
    again.keep_only(["review 7"])
    assert again.review == "" and again.recent == ["review 7"]


def test_the_database_seen_is_a_fingerprint_that_notices_a_withdrawal(data_home) -> None:
    from kmds_desktop.app.review_resume import DatabaseFingerprint, ReviewPlace, place_path, write_place

    place_path().write_text(json.dumps({"documents_seen": 781}), encoding="utf-8")  # an older place file
    older = read_place().database_seen
    assert older == DatabaseFingerprint(781)
    assert not DatabaseFingerprint(781, 0, "").differs(older)  # only the count was kept: compared alone
    assert DatabaseFingerprint(1239, 0, "").differs(older)
    assert not DatabaseFingerprint(781, 0, "").differs(None)  # never checked: nothing to compare with
    seen = DatabaseFingerprint(781, 0, "")
    assert DatabaseFingerprint(781, 1, "1980-03-01").differs(seen)  # a withdrawal: the same count
    assert DatabaseFingerprint(781, 1, "1980-04-01").differs(DatabaseFingerprint(781, 1, "1980-03-01"))
    assert write_place(ReviewPlace(database_seen=DatabaseFingerprint(781, 1, "1980-03-01"))) is None
    assert read_place().database_seen == DatabaseFingerprint(781, 1, "1980-03-01")
    misshapen = {"database_seen": {"documents": -2, "withdrawn": "x"}}
    place_path().write_text(json.dumps(misshapen), encoding="utf-8")
    assert read_place().database_seen is None  # misshapen: never trusted


def _screened_review(name: str = "sweat") -> None:
    """A review of six records, three decided, in the test's data folder."""
    from kmds_desktop.literature.reviews.store import ReviewStore
    from kmds_desktop.literature.screening.records import ScreeningRecord

    records = [ScreeningRecord("CF", f"cf:{i}", title=f"Sweat chloride study number {i} in cystic fibrosis",
                               abstract=f"Abstract {i} about sweat tests.") for i in range(1, 7)]
    with ReviewStore() as store:
        store.create_review(name, name=name, question="sweat testing in cystic fibrosis")
        store.add_records(name, records, origin="file refs.ris", identified=6,
                          identities=[r.key for r in records])
        store.decide(name, ("CF", "cf:1"), "include")
        store.decide(name, ("CF", "cf:2"), "exclude", reason="wrong population")
        store.decide(name, ("CF", "cf:3"), "maybe")


def test_export_import_and_merge_a_second_screeners_file_from_the_window(
        qtbot, make_window, pg_empty_database, data_home, tmp_path) -> None:
    _screened_review()
    window = make_window(literature_kwargs={"database": pg_empty_database, "open_on_start": False})
    reviews = window.reviews
    reviews.open("sweat")
    screening = _screening(qtbot, window)
    assert "its search is not shown: its records came from files" in window.messages.label.text()
    out = tmp_path / "sweat.kmds-review.json"
    reviews.export_review(out)
    qtbot.waitUntil(lambda: "written to" in window.messages.label.text(), timeout=WAIT)
    assert json.loads(out.read_text(encoding="utf-8"))["review"]["name"] == "sweat"

    bad = tmp_path / "notes.json"
    bad.write_text("[1, 2", encoding="utf-8")
    reviews.import_review(bad)
    qtbot.waitUntil(lambda: "notes.json could not be imported" in window.messages.label.text(), timeout=WAIT)
    assert "\n" not in window.messages.label.text() and "not a review file" in window.messages.label.text()
    with ReviewBook() as book:
        assert [s.id for s in book.summaries()] == ["sweat"]  # nothing written

    reviews.import_review(out)  # the same review again: a new name, never a silent merge
    qtbot.waitUntil(lambda: reviews.screening_window is not screening and reviews.screening_window is not None
                    and reviews.screening_window.session is not None, timeout=WAIT)
    imported = reviews.screening_window.session
    assert imported.review.id == "sweat (2)" and len(imported.decisions) == 3
    assert any("(as 'sweat (2)'" in m.text for m in window.messages.history)
    assert [a.text() for a in reviews.recent_menu.actions()] == ["sweat (2)", "sweat"]

    handed = tmp_path / "for-bob.json"
    returned = tmp_path / "from-bob.json"
    with ReviewBook() as book:
        book.export("sweat (2)", handed)
    with ReviewBook(tmp_path / "bob" / "screening.sqlite3") as bob:
        bob.import_file(handed)
        bob.store.decide("sweat (2)", ("CF", "cf:1"), "exclude", reason="wrong study design")
        bob.store.decide("sweat (2)", ("CF", "cf:4"), "include")
        bob.export("sweat (2)", returned, reviewer="bob")
    reviews.merge_review(returned)
    qtbot.waitUntil(lambda: "decisions of bob merged" in window.messages.label.text(), timeout=WAIT)
    with ReviewBook() as book:
        assert book.store.other_decisions("sweat (2)", "bob")[("CF", "cf:4")].decision == "include"
        assert book.store.decisions("sweat (2)")[("CF", "cf:1")].decision == "include"  # mine untouched


def test_the_queue_of_an_update_offers_only_its_records_then_the_rest(data_home) -> None:
    from kmds_desktop.app.screening import ScreeningSession
    from kmds_desktop.literature.reviews.store import ReviewStore

    _screened_review()
    with ReviewStore() as store:
        session = ScreeningSession(store, "sweat", background=False)
        session.show_only(frozenset({("CF", "cf:5"), ("CF", "cf:6")}))
        assert {session.records[i].key for i, _ in session.queue(10)} == {("CF", "cf:5"), ("CF", "cf:6")}
        session.decide("exclude")
        session.decide("include")
        assert session.current is None  # the chosen records are screened
        session.show_only(None)
        assert session.current.key == ("CF", "cf:4")  # the rest of the queue follows
        session.close()


def test_rename_export_and_delete_a_review_that_is_not_open_from_the_review_list(
        qtbot, make_window, pg_empty_database, data_home, tmp_path, monkeypatch) -> None:
    from PySide6.QtWidgets import QFileDialog

    _screened_review("sweat")
    _screened_review("older")
    window = make_window(literature_kwargs={"database": pg_empty_database, "open_on_start": False})
    reviews = window.reviews
    reviews.open("sweat")
    screening = _screening(qtbot, window)

    def pick(review: str) -> Any:
        reviews.actions["open"].trigger()
        picker = reviews.dialog
        qtbot.waitUntil(lambda: picker.list.count() == 2, timeout=WAIT)
        assert picker.select(review)
        return picker

    picker = pick("older")
    _click(qtbot, picker.action_buttons["rename"])
    dialog = reviews.dialog
    assert dialog.name_edit.text() == "older"
    dialog.name_edit.setText("")
    qtbot.keyClicks(dialog.name_edit, "older, adults")
    _click(qtbot, dialog.ok_button)
    qtbot.waitUntil(lambda: "older is now called older, adults" in window.messages.label.text(), timeout=WAIT)
    assert reviews.screening_window is screening and screening.session.review.id == "sweat"  # untouched
    assert read_place().review == "sweat"

    out = tmp_path / "older.kmds-review.json"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(out), "KMDS review files"))
    picker = pick("older, adults")
    _click(qtbot, picker.action_buttons["export"])
    qtbot.waitUntil(lambda: "Review older, adults written to" in window.messages.label.text(), timeout=WAIT)
    assert json.loads(out.read_text(encoding="utf-8"))["review"]["name"] == "older, adults"

    picker = pick("older, adults")
    _click(qtbot, picker.action_buttons["delete"])
    box = reviews.dialog
    assert isinstance(box, QMessageBox) and "older, adults" in box.text()
    _click(qtbot, box.button(QMessageBox.StandardButton.Yes))
    qtbot.waitUntil(lambda: "Review older, adults deleted" in window.messages.label.text(), timeout=WAIT)
    with ReviewBook() as book:
        assert [s.id for s in book.summaries()] == ["sweat"]
    assert reviews.screening_window is screening and screening.session is not None  # the open one stays
    assert read_place().review == "sweat"


def test_the_panels_search_becomes_the_reviews_strategy_and_the_edit_is_logged(
        qtbot, make_window, pg_empty_database, literature_data, tmp_path, data_home) -> None:
    """Between updates the researcher edits the search in the panel (a hand-written row added), runs it, and
    File → Use this search as the strategy makes it what the next Update runs: a new strategy version whose
    edit the review's report logs; asking again for the same search changes nothing and says so."""
    from PySide6.QtWidgets import QLineEdit

    db = pg_empty_database
    early, _later, _latest, _years = _cf_by_year(literature_data, tmp_path)
    _first_round, saved_number = _sweat_review(db, early)
    with ReviewBook() as book:
        assert book.strategy("sweat").version == 1

    window = _start(make_window, db)
    panel = window.literature
    qtbot.waitUntil(lambda: panel.session.documents_in_database is not None, timeout=WAIT)
    window.reviews.actions["open"].trigger()
    picker = window.reviews.dialog
    qtbot.waitUntil(lambda: picker.list.count() == 1, timeout=WAIT)
    _click(qtbot, picker.open_button)
    _screening(qtbot, window)
    assert window.reviews.actions["strategy"].isEnabled()

    _click(qtbot, panel.add_button)  # a second, hand-written row
    editor = panel.review_view.viewport().findChild(QLineEdit)
    assert editor is not None and editor.isVisible()
    editor.selectAll()
    qtbot.keyClicks(editor, "sweat <-> test & infant")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: any(r.query == "sweat <-> test & infant" and r.included
                                for r in panel.review.rows()), timeout=WAIT)
    before = panel.session.recorded_run
    _click(qtbot, panel.run_button)
    qtbot.waitUntil(lambda: panel.session.recorded_run is not before and panel.run_button.isEnabled(),
                    timeout=WAIT)
    number = panel.session.recorded_run[1]
    assert number != saved_number

    window.reviews.actions["strategy"].trigger()
    qtbot.waitUntil(lambda: "now updates with search" in window.messages.label.text(), timeout=WAIT)
    assert f"#{number}" in window.messages.label.text()
    with ReviewBook() as book:
        strategy = book.strategy("sweat")
        assert strategy.version == 2 and "sweat <-> test & infant" in strategy.text
        assert "sweat & (chloride | sodium)" in strategy.text
        assert f"search #{number} in the window" in strategy.note
        lines = "\n".join(book.report_lines("sweat"))
        assert "strategy (version 2, saved " in lines and f"search #{number} in the window" in lines

    window.reviews.actions["strategy"].trigger()  # the same search again: no new version
    qtbot.waitUntil(lambda: "is already the strategy" in window.messages.label.text(), timeout=WAIT)
    with ReviewBook() as book:
        assert book.strategy("sweat").version == 2
