"""A review as one thing: rename, delete, the review file, a second screener, an old store, and updates
on a real PostgreSQL database that gains the CF collection's later years (1978–79) after the first review."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kmds_desktop.app.reviews import ReviewBook, ReviewError
from kmds_desktop.app.screening import ScreeningSession
from kmds_desktop.literature.reviews.exchange import FORMAT_VERSION
from kmds_desktop.literature.reviews.identity import repeats
from kmds_desktop.literature.reviews.store import ReviewStore
from kmds_desktop.literature.reviews.update import add_round, split_known
from kmds_desktop.literature.screening.decisions import DecisionStore
from kmds_desktop.literature.screening.records import ScreeningRecord


def _records(n: int, prefix: str = "cf") -> list[ScreeningRecord]:
    return [ScreeningRecord("CF", f"{prefix}:{i}",
                            title=f"Sweat chloride study number {i} in cystic fibrosis",
                            abstract=f"Abstract {i} about sweat tests.", doi=f"10.1/{prefix}{i}")
            for i in range(1, n + 1)]


def _screened_store(path: Path, name: str = "sweat") -> DecisionStore:
    """A screening file as today's screening code writes it (no review tables used)."""
    store = DecisionStore(path)
    store.create_review(name, question="sweat testing in cystic fibrosis")
    store.add_records(name, _records(6), origin="#1", identified=6, per_row={"row 1: sweat": 6},
                      identities=[r.key for r in _records(6)])
    store.decide(name, ("CF", "cf:1"), "include")
    store.decide(name, ("CF", "cf:2"), "exclude", reason="wrong population")
    store.decide(name, ("CF", "cf:3"), "maybe", note="check the full text")
    store.decide(name, ("CF", "cf:2"), "exclude", reason="wrong outcome")  # a change: the undo log has two
    return store


def test_a_screening_file_of_todays_code_opens_as_reviews(tmp_path):
    path = tmp_path / "screening.sqlite3"
    _screened_store(path).close()
    with ReviewBook(path) as book:
        [summary] = book.summaries()
        assert (summary.id, summary.records, summary.screened, summary.included) == ("sweat", 6, 3, 1)
        assert book.store.questions("sweat") == ["sweat testing in cystic fibrosis"]
        assert book.strategy("sweat") is None  # no history given, none saved
        flow = book.flow("sweat")
        assert [(r.round, r.records, r.screened, r.included) for r in flow.rounds] == [(0, 6, 3, 1)]
    # The older code still opens the upgraded file, and the decisions are where they were.
    again = DecisionStore(path)
    assert again.decisions("sweat")[("CF", "cf:2")].reason == "wrong outcome"
    again.close()


def test_rename_moves_everything_and_the_screen_commands_follow(tmp_path):
    path = tmp_path / "screening.sqlite3"
    _screened_store(path).close()
    with ReviewBook(path) as book:
        book.set_questions("sweat", ["sweat testing in cystic fibrosis", "sweat chloride in adults"])
        assert book.rename("sweat", "CF sweat tests") == "CF sweat tests"
        with pytest.raises(ReviewError, match="no review 'sweat'"):
            book.store.find("sweat")
        store = book.store
        assert len(store.decisions("CF sweat tests")) == 3
        assert store.questions("CF sweat tests")[1] == "sweat chloride in adults"
        session = ScreeningSession(store, "CF sweat tests", background=False)
        assert session.progress().screened == 3 and session.undo() is not None  # the undo log moved too
        book.new("other")
        with pytest.raises(ReviewError, match="exists already"):
            book.rename("other", "CF sweat tests")


def test_delete_leaves_no_row_of_the_review_and_spares_the_others(tmp_path):
    path = tmp_path / "screening.sqlite3"
    _screened_store(path).close()
    with ReviewBook(path) as book:
        book.new("kept", ["another question"])
        assert book.delete("sweat") == 3
        for table in book.store.review_tables():
            columns, rows = book.store.table_rows(table, "sweat")
            assert rows == [], table
        assert [r.id for r in book.summaries()] == ["kept"]


def test_an_exported_review_imported_into_a_fresh_data_folder_is_the_same(tmp_path):
    first = tmp_path / "a" / "screening.sqlite3"
    _screened_store(first).close()
    out = tmp_path / "sweat.kmds-review.json"
    with ReviewBook(first) as book:
        book.store.set_vectors("sweat", "all-MiniLM-L6-v2", {("CF", "cf:1"): [0.25, -1.5, 3.0]})
        book.store.set_flow_number("sweat", "reports_not_retrieved", 2, "library")
        add_round(book.store, "sweat", _records(8, "late")[6:], origin="#2", round_number=1)
        before = book.report("sweat")
        before_records = [r.to_dict() for r in book.store.records("sweat")]
        book.export("sweat", out)
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["format_version"] == FORMAT_VERSION and data["review"]["name"] == "sweat"

    with ReviewBook(tmp_path / "b" / "screening.sqlite3") as fresh:
        imported = fresh.import_file(out)
        assert imported.review_id == "sweat" and not imported.renamed
        after = fresh.report("sweat")
        for field in ("questions", "records", "screened", "included", "excluded", "maybe", "flow",
                      "updated_flow", "sources"):
            assert after[field] == before[field], field
        assert [r.to_dict() for r in fresh.store.records("sweat")] == before_records
        assert fresh.store.decisions("sweat") == ReviewStore(first).decisions("sweat")
        assert fresh.store.vectors("sweat", "all-MiniLM-L6-v2")[("CF", "cf:1")].tolist() == [0.25, -1.5, 3.0]
        assert fresh.store.undo("sweat") == ("CF", "cf:2")  # the undo log came along, in order
        assert fresh.store.decisions("sweat")[("CF", "cf:2")].reason == "wrong population"
        # The same file again: a new name, never a merge into the review that exists.
        again = fresh.import_file(out)
        assert again.review_id == "sweat (2)" and again.renamed
        assert len(fresh.store.decisions("sweat (2)")) == 3

    # a model score that is not 1-5 ([1], 1e400) is refused before anything is written: it raised after the
    # review was, and a retry made a second copy
    data["model_score"] = [["judge", "q", "CF", "cf:1", [1], "", ""]]
    out.write_text(json.dumps(data), encoding="utf-8")
    with ReviewBook(tmp_path / "c" / "screening.sqlite3") as third:
        with pytest.raises(ReviewError, match="is not 1-5"):
            third.import_file(out)
        assert third.summaries() == []


def test_a_file_that_is_not_a_review_is_refused_in_one_line_and_nothing_is_written(tmp_path):
    with ReviewBook(tmp_path / "screening.sqlite3") as book:
        bad = tmp_path / "bad.json"
        bad.write_text("[1, 2", encoding="utf-8")
        with pytest.raises(ReviewError, match="not a review file"):
            book.import_file(bad)
        bad.write_text(json.dumps({"format": "kmds-desktop review", "format_version": FORMAT_VERSION + 1,
                                   "tables": {}}), encoding="utf-8")
        with pytest.raises(ReviewError, match="newer than this app reads"):
            book.import_file(bad)
        bad.write_text(json.dumps({"format": "kmds-desktop review", "format_version": 1, "tables": {
            "review": {"columns": ["id", "name"], "rows": [["x"]]}}}), encoding="utf-8")
        with pytest.raises(ReviewError, match="not rows of its columns"):
            book.import_file(bad)
        with pytest.raises(ValueError, match="not a file"):
            book.import_file(tmp_path)
        assert book.summaries() == []


def test_a_second_screeners_returned_review_merges_beside_mine_with_conflicts_reported(tmp_path):
    mine = tmp_path / "me" / "screening.sqlite3"
    _screened_store(mine).close()
    handed = tmp_path / "for-bob.json"
    returned = tmp_path / "from-bob.json"
    with ReviewBook(mine) as book:
        book.export("sweat", handed)
    with ReviewBook(tmp_path / "bob" / "screening.sqlite3") as bob:
        bob.import_file(handed)
        bob.store.decide("sweat", ("CF", "cf:1"), "exclude", reason="wrong study design")  # disagrees
        bob.store.decide("sweat", ("CF", "cf:4"), "include")  # one I have not decided
        bob.export("sweat", returned, reviewer="bob")
    with ReviewBook(mine) as book:
        report = book.merge("sweat", returned)
        assert report.reviewer == "bob" and report.imported == 4 and report.unknown == 0
        assert [(k, m, t) for k, m, t in report.conflicts] == [(("CF", "cf:1"), "include", "exclude")]
        assert "1 conflicts kept" in report.line() or "1 conflict" in report.line()
        assert book.store.decisions("sweat")[("CF", "cf:1")].decision == "include"  # mine untouched
        assert book.store.other_decisions("sweat", "bob")[("CF", "cf:4")].decision == "include"


def test_a_record_known_by_doi_pmid_or_title_is_not_new(tmp_path):
    with ReviewStore(tmp_path / "screening.sqlite3") as store:
        store.create_review("r")
        add_round(store, "r", _records(3), origin="#1", round_number=0)
        same_doi = ScreeningRecord("PubMed", "999", title="Another title entirely different", doi="10.1/cf1")
        same_title = ScreeningRecord("PubMed", "998",
                                     title="Sweat chloride study number 2 in Cystic Fibrosis!")
        short_title = ScreeningRecord("PubMed", "997", title="Editorial")
        new, known = split_known(store, "r", [same_doi, same_title, short_title, _records(3)[2]])
        assert [r.key for r in new] == [("PubMed", "997")]
        assert len(known) == 3
        assert repeats(store.records("r")) == []


# -- updates on the real database ---------------------------------------------------------------------

def test_an_updated_reviews_model_knows_which_decisions_came_from_earlier_rounds(tmp_path):
    """The order of an update trains on every decision; the session knows which records joined before
    the latest update, and by default their decisions fade as the update's own grow
    (``earlier_round_fade``: each weighs 1 / (1 + n / 30) after n decisions of the update), so the model
    the window screens with is not the first screening's. A model weighing them apart otherwise
    (``earlier_round_weight``, ``earlier_round_c``) trains on what the window screens too."""
    from dataclasses import replace

    import numpy as np

    from kmds_desktop.literature.screening.ordering import DEFAULT_MODEL, earlier_weight, train

    store = ReviewStore(tmp_path / "screening.sqlite3")
    store.create_review("sweat", question="sweat testing in cystic fibrosis")
    first = _records(8)
    later = [ScreeningRecord("CF", f"new:{i}", title=f"Nasal potential difference measurement, cohort {i}",
                             abstract=f"Cohort {i} of children with cystic fibrosis.") for i in range(1, 7)]
    store.add_records("sweat", first, origin="#1", identified=8, identities=[r.key for r in first])
    for i, decision in ((1, "include"), (2, "exclude"), (3, "exclude"), (4, "include"), (5, "exclude")):
        store.decide("sweat", ("CF", f"cf:{i}"), decision)
    session = ScreeningSession(store, "sweat", background=False)
    assert session.earlier_rounds == frozenset()  # never updated: no earlier round
    labels = session._labels()
    never_updated = train(session.features, labels, DEFAULT_MODEL, earlier=session.earlier_rounds)
    # (liblinear's shuffling moves a score by ~1e-5 between fits: compared to 1e-3)
    assert np.allclose(session._scores.values, never_updated.values, atol=1e-3)
    session.close()

    add_round(store, "sweat", later, origin="#2", round_number=1)
    for i, decision in ((1, "include"), (2, "exclude"), (3, "exclude"), (4, "exclude"), (5, "include")):
        store.decide("sweat", ("CF", f"new:{i}"), decision)
    session = ScreeningSession(store, "sweat", background=False)
    assert {session.records[i].key for i in session.earlier_rounds} == {r.key for r in first}
    labels = session._labels()
    assert earlier_weight(DEFAULT_MODEL, 5) == 1 / (1 + 5 / 30)  # five decisions of the update so far
    faded = train(session.features, labels, DEFAULT_MODEL, earlier=session.earlier_rounds)
    by_hand = train(session.features, labels, replace(DEFAULT_MODEL, earlier_round_fade=0.0,
                                                      earlier_round_weight=1 / (1 + 5 / 30)),
                    earlier=session.earlier_rounds)
    alike = train(session.features, labels, DEFAULT_MODEL)  # no earlier round: every decision alike
    assert np.allclose(faded.values, by_hand.values, atol=1e-3)
    assert np.abs(faded.values - alike.values).max() > 3e-3, np.abs(faded.values - alike.values).max()
    assert np.allclose(session._scores.values, faded.values, atol=1e-3)  # the session passes the rounds
    session.close()

    apart = replace(DEFAULT_MODEL, earlier_round_weight=0.5, earlier_round_c=0.2)
    session = ScreeningSession(store, "sweat", background=False, model=apart)
    weighed = train(session.features, session._labels(), apart, earlier=session.earlier_rounds)
    assert np.abs(weighed.values - faded.values).max() > 0.05, np.abs(weighed.values - faded.values).max()
    assert np.allclose(session._scores.values, weighed.values, atol=1e-3)
    session.close()
    store.close()


def _word_hash_vectors(texts):
    """384-dimensional unit vectors from each text's words (hashed): real vectors for the vector table
    without loading the embedding model; their values do not matter to what the test checks."""
    import zlib

    import numpy as np

    out = np.zeros((len(texts), 384), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in text.lower().split():
            out[row, zlib.crc32(word.encode()) % 384] += 1.0
        out[row] /= max(float(np.linalg.norm(out[row])), 1e-9)
    return out


def _cf_by_year(literature_data: Path, tmp_path: Path) -> tuple[Path, Path, dict[str, int]]:
    early, late = tmp_path / "cf-1974-77.jsonl", tmp_path / "cf-1978-79.jsonl"
    years: dict[str, int] = {}
    with (open(literature_data / "cf" / "corpus.jsonl", encoding="utf-8") as src,
          open(early, "w", encoding="utf-8") as a, open(late, "w", encoding="utf-8") as b):
        for line in src:
            doc = json.loads(line)
            years[doc["id"]] = int(doc["year"])
            (a if int(doc["year"]) <= 1977 else b).write(line)
    return early, late, years


def test_an_update_after_new_records_are_imported_adds_only_those(pg_empty_database, literature_data,
                                                                    tmp_path):
    from kmds_desktop.literature.strategy.history import SearchHistory
    from kmds_desktop.literature.strategy.workbench import SearchWorkbench

    db = pg_empty_database
    early, late, years = _cf_by_year(literature_data, tmp_path)
    db.import_files([early])
    history = SearchHistory(tmp_path / "history.sqlite3")
    first = SearchWorkbench(history, db).run(
        "sweat testing in cystic fibrosis", [("sweat & (chloride | sodium)", {"kind": "hand-written"})],
        max_rows=1000)
    with ReviewBook(tmp_path / "screening.sqlite3") as book:
        name = book.new("sweat", ["sweat testing in cystic fibrosis"], history=history, database=db,
                        from_sets=[first.number])
        store = book.store
        earlier = store.records(name)
        assert earlier and all(years[r.external_id] <= 1977 for r in earlier)
        session = ScreeningSession(store, name, background=False)
        for _ in range(6):
            rec = session.current
            session.decide("include" if "sweat" in rec.title.lower() else "exclude")
        decided = set(session.decisions)
        undecided_before = {r.key for r in earlier} - decided
        session.close()

        assert book.new_records(db, history=history).line() == ""  # nothing new before the import
        db.import_files([late])
        notice = book.new_records(db, history=history)
        waiting = notice.new_per_review[name]
        assert waiting > 0 and notice.line().startswith(f"1 review has {waiting:,} new record")

        outcome = book.update(name, history=history, database=db)
        assert outcome.round == 1 and outcome.new == waiting
        assert outcome.known == len(earlier)  # every earlier record found again, recognised
        assert all(years[k[1]] >= 1978 for k in outcome.new_keys)
        assert repeats(store.records(name)) == []
        assert set(store.decisions(name)) == decided  # no decision lost or asked again

        session = ScreeningSession(store, name, background=False)
        queued = {session.records[i].key for i, _ in session.queue(len(session.records))}
        assert queued == undecided_before | set(outcome.new_keys)  # earlier unscreened stay; new join
        assert session.current.key in queued
        session.close()

        # A withdrawal changes no count, yet the check on start notices it and names the review; the
        # next update flags the record, its decision kept.
        from kmds_desktop.app.review_resume import check_if_changed, database_fingerprint

        before_withdrawal = database_fingerprint(db)
        assert check_if_changed(db, before_withdrawal, store_path=store.path,
                                history_path=tmp_path / "history.sqlite3").notice is None
        withdrawn_key = next(iter(decided))
        db.run(lambda c: c.execute("UPDATE document SET withdrawn_date = '1980-02-01' WHERE external_id = %s",
                                   (withdrawn_key[1],)))
        check = check_if_changed(db, before_withdrawal, store_path=store.path,
                                 history_path=tmp_path / "history.sqlite3")
        assert check.fingerprint.documents == before_withdrawal.documents
        assert (check.fingerprint.withdrawn, check.fingerprint.last_withdrawn) == (1, "1980-02-01")
        assert check.notice is not None and check.notice.withdrawn_per_review == {name: 1}
        assert check.notice.new_line() == f"1 review has 1 record withdrawn since ({name}: 1)"
        assert check.notice.most_changed() == name
        again = book.update(name, history=history, database=db)
        assert again.new == 0 and again.known == again.found and again.round == 2
        assert again.withdrawn == {withdrawn_key: "1980-02-01"}
        assert withdrawn_key in store.decisions(name)
        assert book.new_records(db, history=history).new_line() == ""  # flagged: no longer news

        # The database is embedded after the review was made (the window embeds after an import): the
        # next update gives every record of the review its vector, the earlier rounds' too, so the
        # model that orders the new records learned the vector part from the earlier decisions.
        from kmds_desktop.app.screening import VECTOR_MODEL
        from kmds_desktop.literature.store.vectors import embed_documents

        assert store.vectors(name, VECTOR_MODEL) == {}
        embed_documents(db, encoder=_word_hash_vectors)
        book.update(name, history=history, database=db)
        with_vector = set(store.vectors(name, VECTOR_MODEL))
        # (a withdrawn record is not embedded: the database embeds only records in force)
        assert with_vector == {r.key for r in store.records(name)} - {withdrawn_key}
        assert {r.key for r in earlier} - {withdrawn_key} <= with_vector
        # A review made on the embedded database has its first records' vectors from the start.
        made = book.new("sweat, embedded", ["sweat testing in cystic fibrosis"], history=history, database=db,
                        from_sets=[first.number])
        assert store.records(made) and set(store.vectors(made, VECTOR_MODEL)) == {
            r.key for r in store.records(made)} - {withdrawn_key}

        flow = book.flow(name)
        assert [r.records for r in flow.rounds] == [len(earlier), waiting, 0, 0]
        assert sum(r.records for r in flow.rounds) == len(store.records(name))  # each record once
        assert flow.rounds[1].identified == outcome.found and flow.rounds[1].already_in_review == len(earlier)
        assert flow.rounds[0].withdrawn == 1
        runs = store.runs(name)
        assert [r.counts["new"] for r in runs] == [waiting, 0, 0]
        assert all("sweat & (chloride | sodium)" in r.strategy_text for r in runs)

        # An edit of the strategy is a new version, logged, and the next update says which it ran.
        wider = SearchWorkbench(history, db).run("sweat", [("sweat", {"kind": "hand-written"})],
                                                 max_rows=1000)
        edited = book.set_strategy(name, history, [wider.number], note="all sweat records")
        third = book.update(name, history=history, database=db)
        assert edited.version == 2 and third.strategy_version == 2 and "sweat" in third.strategy_text
        assert third.round == 4
        assert repeats(store.records(name)) == []
        lines = "\n".join(book.report_lines(name, history))
        assert "strategy edited (version 2): all sweat records" in lines and "Update 4" in lines
    history.close()


def test_the_cli_lists_shows_renames_and_deletes_reviews(data_home, capsys):
    from kmds_desktop.cli import main

    assert main(["literature", "review", "new", "cf-sweat", "--question", "sweat tests in CF"]) == 0
    assert "review cf-sweat made" in capsys.readouterr().out
    assert main(["literature", "review", "list", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert (listed["id"], listed["questions"], listed["records"]) == ("cf-sweat", ["sweat tests in CF"], 0)
    assert main(["literature", "review", "show", "cf-sweat", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["questions"] == ["sweat tests in CF"] and shown["records"] == 0
    diagram = data_home / "flow.svg"
    assert main(["literature", "review", "show", "cf-sweat", "--svg", str(diagram)]) == 0
    assert f"wrote {diagram}" in capsys.readouterr().out
    assert "Studies included in the previous version" in _svg_words(diagram)
    assert main(["literature", "review", "rename", "cf-sweat", "sweat"]) == 0
    assert main(["literature", "screen", "state", "sweat"]) == 0  # the screen commands take the new name
    capsys.readouterr()
    assert main(["literature", "review", "delete", "nope"]) == 1
    assert "there is no review 'nope'" in capsys.readouterr().err
    assert main(["literature", "review", "delete", "sweat"]) == 0
    assert main(["literature", "review", "list"]) == 0
    assert "no reviews yet" in capsys.readouterr().out


def test_literature_import_says_which_reviews_have_new_records(pg_empty_database, literature_data, tmp_path,
                                                               data_home, capsys):
    from kmds_desktop.cli import main
    from kmds_desktop.literature.strategy.history import SearchHistory
    from kmds_desktop.literature.strategy.workbench import SearchWorkbench

    db = pg_empty_database
    early, late, _ = _cf_by_year(literature_data, tmp_path)
    dsn = str(db.dsn)
    assert main(["literature", "import", str(early), "--dsn", dsn, "--quiet"]) == 0
    with SearchHistory() as history:
        saved = SearchWorkbench(history, db).run("sweat", [("sweat & chloride", {"kind": "hand-written"})],
                                                 max_rows=1000)
        with ReviewBook() as book:
            book.new("sweat", ["sweat chloride"], history=history, database=db, from_sets=[saved.number])
    capsys.readouterr()
    assert main(["literature", "import", str(late), "--dsn", dsn, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "1 review has " in out and "new record" in out and "(sweat: " in out
    assert main(["literature", "review", "update", "sweat", "--dsn", dsn, "--json"]) == 0
    update = json.loads(capsys.readouterr().out)
    assert update["new"] > 0 and f"1 review has {update['new']:,} new record" in out


def _svg_words(path) -> str:
    """The text of an SVG file, read by an independent XML parser."""
    from xml.etree import ElementTree

    return " ".join(t.text or "" for t in ElementTree.parse(path).iter("{http://www.w3.org/2000/svg}text"))


def test_the_updated_reviews_flow_is_drawn_with_previous_studies_the_latest_update_and_the_total(tmp_path):
    """PRISMA 2020's diagram for updated reviews: the rounds before the latest are the previous version's
    studies, the latest update is drawn stage by stage with what left beside it, and the total adds both."""
    from kmds_desktop.literature.reviews.flow import RoundFlow, UpdatedFlow, updated_flow_svg

    flow = UpdatedFlow([
        RoundFlow(0, "First review", records=781, screened=781, excluded=700, included=81, withdrawn=1),
        RoundFlow(1, "Update 1", identified=90, already_in_review=80, records=10, screened=10, excluded=9,
                  included=1),
        RoundFlow(2, "Update 2", identified=520, already_in_review=60, duplicates_removed=2, records=458,
                  screened=100, excluded=88, maybe=2, not_yet_screened=358, included=10, strategy_version=2),
    ])
    path = tmp_path / "flow.svg"
    path.write_text(updated_flow_svg(flow, "sweat: sweat testing in CF"), encoding="utf-8")
    words = _svg_words(path)
    for expected in ("Studies included in the previous version of the review (n = 82)",
                     "First review: 81 of 781 records", "Update 1: 1 of 10 records",
                     "Records identified (n = 520)", "(strategy version 2)", "(n = 60)",
                     "Duplicate records (n = 2)", "New records screened (n = 100)",
                     "Records excluded (n = 88)", "Marked maybe (n = 2)", "Not yet screened (n = 358)",
                     "New studies included (n = 10)", "Total studies included in the review (n = 92)",
                     "records withdrawn since, flagged (n = 1)"):
        assert expected in " ".join(words.split()), expected
    first_only = UpdatedFlow([RoundFlow(0, "First review", records=5, screened=5, excluded=3, included=2)])
    drawn = updated_flow_svg(first_only)
    assert "Identification of new studies" not in drawn and "(n = 2)" in drawn


def test_a_report_file_is_written_whole_or_not_at_all(tmp_path):
    """The review report and its diagram are written beside the target and moved over it: a reader never
    meets a half-written file, and a failed write (here text that cannot be encoded) keeps the older file."""
    from kmds_desktop.user_files import write_user_text as _write_whole  # the reports' and exports' writer

    target = tmp_path / "sweat report.txt"
    _write_whole(target, "first version\n")
    assert target.read_text(encoding="utf-8") == "first version\n"
    with pytest.raises(UnicodeEncodeError):
        _write_whole(target, "second \ud800 version\n")
    assert target.read_text(encoding="utf-8") == "first version\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweat report.txt"]  # no temporary file left
