"""The strategy workbench on a small real PostgreSQL database whose answers are known by hand.

Eight titles; each query's documents can be read off the titles (English stemming: "prevents",
"prevent" and "prevention" are one word). Searches, combinations, re-runs, the known-papers check and
the report are compared with sets written out by hand.
"""

from __future__ import annotations

import json

import pytest

from kmds_desktop.literature.strategy.history import SearchHistory
from kmds_desktop.literature.strategy.known_papers import parse_identifiers
from kmds_desktop.literature.strategy.search_report import build_report, report_markdown
from kmds_desktop.literature.strategy.set_algebra import ExpressionError
from kmds_desktop.literature.strategy.workbench import SearchWorkbench

TITLES = {
    "t:1": "Aspirin prevents stroke in elderly patients",
    "t:2": "Aspirin and heart attack",
    "t:3": "Statins prevent stroke",
    "t:4": "Stroke rehabilitation therapy",
    "t:5": "Aspirin resistance",
    "t:6": "Heart failure and statins",
    "t:7": "Warfarin for stroke prevention in atrial fibrillation",
    "t:8": "Gardening for beginners",
}
HAND = {"aspirin": {"t:1", "t:2", "t:5"}, "stroke": {"t:1", "t:3", "t:4", "t:7"}, "statin": {"t:3", "t:6"},
        "heart": {"t:2", "t:6"}, "stroke & prevent": {"t:1", "t:3", "t:7"}}


def _write_corpus(path, titles) -> None:
    lines = (json.dumps({"id": k, "source": "test", "title": v}) + "\n" for k, v in titles.items())
    path.write_text("".join(lines))


@pytest.fixture()
def bench(pg_empty_database, tmp_path):
    corpus = tmp_path / "small.jsonl"
    _write_corpus(corpus, TITLES)
    pg_empty_database.import_files([corpus])
    history = SearchHistory(tmp_path / "history.sqlite3")
    workbench = SearchWorkbench(history, pg_empty_database)
    yield workbench
    history.close()


def _keys(workbench: SearchWorkbench, number: int) -> set[str]:
    return {m.external_id for m in workbench.history.members(number)}


def _hand(*queries: str) -> list[tuple[str, dict]]:
    return [(q, {"kind": "hand-written"}) for q in queries]


def test_searches_combinations_and_reruns_against_hand_computed_sets(bench, pg_empty_database, tmp_path):
    s1 = bench.run("aspirin or stroke", _hand("aspirin", "stroke"), max_rows=50)
    s2 = bench.run("statins", _hand("statin"), max_rows=50)
    s3 = bench.run("heart", _hand("heart"), max_rows=50)
    s4 = bench.run("prevention", _hand("stroke & prevent"), max_rows=50)
    assert [s.number for s in (s1, s2, s3, s4)] == [1, 2, 3, 4]
    assert _keys(bench, 1) == HAND["aspirin"] | HAND["stroke"]
    assert [r.matches for r in s1.rows] == [3, 4] and [r.unique_ids for r in s1.rows] == [2, 3]
    assert s1.details["deduplication"] == {"row_hits": 7, "documents": 6, "found_by_several_rows": 1}
    assert {m.source for m in bench.history.members(1)} == {"test"}

    truth = {
        "#1 AND (#2 OR #3) NOT #4": {"t:2"},  # {1,2,3,4,5,7} & {2,3,6} - {1,3,7}
        "#2 OR #3 AND #4": HAND["statin"],  # AND first: {2,6} & {1,3,7} is empty
        "(#2 OR #3) AND #4": {"t:3"},
        "#1.1 AND #3": {"t:2"},  # row 1 of #1 (aspirin) and heart
        "#1 NOT #1.2": HAND["aspirin"] - HAND["stroke"],
        "#4 OR #2 NOT #1": HAND["stroke & prevent"] | {"t:6"},
    }
    for expression, expected in truth.items():
        assert bench.count(expression).count == len(expected), expression
    combined = bench.combine("#1 AND (#2 OR #3) NOT #4", name="aspirin heart")
    assert combined.number == 5 and combined.kind == "combination" and combined.name == "aspirin heart"
    assert _keys(bench, 5) == truth["#1 AND (#2 OR #3) NOT #4"]
    assert combined.details["canonical"] == "(#1 AND (#2 OR #3)) NOT #4"
    nested = bench.combine("#5 OR #2")  # a combination combines like any set
    assert _keys(bench, nested.number) == {"t:2"} | HAND["statin"]
    docs = bench.documents(nested.number)
    assert {d["external_id"] for d in docs} == _keys(bench, nested.number)

    with pytest.raises(ExpressionError, match="at position 8: there is no set #99"):
        bench.count("#1 AND #99")

    # Re-run on today's database: one new document matches, one old one was withdrawn.
    extra = tmp_path / "extra.jsonl"
    _write_corpus(extra, {"t:9": "Aspirin lowers stroke risk"})
    pg_empty_database.import_files([extra])
    with pg_empty_database._connection().transaction():  # withdraw t:5 as MEDLINE would
        pg_empty_database._connection().execute(
            "UPDATE document SET withdrawn_date = current_date WHERE external_id = 't:5'")
    rerun = bench.rerun(1)
    assert rerun.new.kind == "rerun" and rerun.new.details["rerun_of"] == 1
    assert [m.external_id for m in rerun.added] == ["t:9"]
    assert [m.external_id for m in rerun.removed] == ["t:5"]
    assert [r.text for r in rerun.new.rows] == ["aspirin", "stroke"]
    with pytest.raises(Exception, match="is a combination"):
        bench.rerun(5)


def test_known_papers_recall_and_why_a_paper_is_missed(bench):
    bench.run("aspirin or stroke", _hand("aspirin", "stroke & prevent"), max_rows=50)
    narrow = bench.run("stroke, top 1", _hand("stroke"), max_rows=1)
    papers = parse_identifiers("t:7, t:6 t:4\nPMID 999999999; 10.9999/not.here")
    check = bench.check_known(papers, [1])
    assert [p.paper.label for p in check.not_in_database] == ["PMID 999999999", "10.9999/not.here"]
    assert check.sets[0].found == 1 and check.sets[0].in_database == 3  # t:7 of t:7, t:6, t:4
    assert [(r.label, r.found) for r in check.rows] == [("#1.1", 0), ("#1.2", 1)]
    missed = {m.status.document.external_id: m for m in check.missed}
    assert set(missed) == {"t:6", "t:4"}  # papers not in the database are not misses
    why = {r["row"]: r for r in missed["t:6"].rows}
    assert why["#1.1"]["missing_words"] == ["aspirin"] and not why["#1.1"]["matches_query"]
    assert why["#1.2"]["missing_words"] == ["stroke", "prevent"]
    assert missed["t:4"].rows[1]["missing_words"] == ["prevent"]

    # t:4 matches the narrow search's query but ranks below its one kept document.
    ranked = bench.check_known(parse_identifiers("t:4"), [narrow.number])
    assert ranked.sets[0].found == 0
    reason = ranked.missed[0].rows[0]
    assert reason["matches_query"] and reason["max_rows"] == 1

    report = build_report(bench.history, 1, check)
    assert report["known_papers"]["recall"] == pytest.approx(1 / 3)
    text = report_markdown(report)
    assert "recall 33.3%" in text and "Heart failure and statins" in text and "lacks `aspirin`" in text
    assert "Not in the database (not counted as misses): PMID 999999999, 10.9999/not.here." in text


def test_report_lists_every_row_as_run_and_the_algebra(bench):
    bench.run("aspirin", [("aspirin", {"kind": "generated", "model": "m1", "attempt": 1}),
                          ("stroke", {"kind": "edited", "edited_from": "strokes", "model": "m2"})],
              max_rows=50)
    bench.run("statins", _hand("statin"), max_rows=50)
    combined = bench.combine("#1 NOT #2")
    report = build_report(bench.history, combined.number)
    assert report["document_count"] == len((HAND["aspirin"] | HAND["stroke"]) - HAND["statin"])
    assert [s["set"] for s in report["searches"]] == [1, 2]
    assert report["set_algebra"][0]["expression"] == "#1 NOT #2"
    rows = report["searches"][0]["rows"]
    assert [r["provenance_text"] for r in rows] == ["generated by m1 (attempt 1)",
                                                    'edited from "strokes" (generated by m2)']
    assert report["overlap"]["models"]["m1"]["unique"] == 2  # t:2, t:5: aspirin without stroke
    text = report_markdown(report)
    assert "| #1.1 | full-text | `aspirin` | generated by m1 (attempt 1) | 3 | 3 | 2 |" in text
    assert "| #3 | `#1 NOT #2` |" in text
    json.dumps(report)  # serialisable as is


def test_a_count_the_planner_estimated_is_kept_as_an_estimate(bench, pg_empty_database, monkeypatch):
    """A row's match count that timed out and came from the planner's estimate is stored and reported
    as one ("~"): the run turned it into a plain int, and every estimate was shown as exact."""
    from kmds_desktop.literature.store.database import MatchCount

    real = pg_empty_database.count_matches

    def estimated(*args, **kwargs):
        return MatchCount(int(real(*args, **kwargs)), estimated=True)

    monkeypatch.setattr(pg_empty_database, "count_matches", estimated)
    search = bench.run("aspirin", _hand("aspirin"), max_rows=50)
    assert [r.matches_estimated for r in search.rows] == [True]
    assert [r.matches_estimated for r in bench.history.get(search.number).rows] == [True]
