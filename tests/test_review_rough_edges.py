"""A review's rough edges, below the window: the PRISMA flow counts a record once however often its search
is re-run, labels each source by its name and a readable date, and keeps "marked maybe" and "not yet
screened" apart; exports carry volume, issue and pages from the MEDLINE record (read back with rispy and
bibtexparser); a search of the history goes back into a literature session as it ran."""

from __future__ import annotations

import json
import re
import xml.dom.minidom
from pathlib import Path

import bibtexparser
import pytest
import rispy

from kmds_desktop.app import literature as app_lit
from kmds_desktop.app import strategy
from kmds_desktop.app.screening import ScreeningSession
from kmds_desktop.literature.screening.decisions import DecisionStore, SourceCount
from kmds_desktop.literature.screening.prisma import flow_svg, source_label
from kmds_desktop.literature.screening.records import ScreeningRecord, record_from_document
from kmds_desktop.literature.store.citations import page_range
from kmds_desktop.literature.strategy.history import RowRecord, SearchHistory
from kmds_desktop.literature.strategy.reference_files import export_documents
from kmds_desktop.literature.strategy.search_report import build_report, report_markdown
from kmds_desktop.text import human_datetime

#: A readable date ("3 Dec 2026 14:05"); an ISO stamp ("2026-12-03T14:05") is what the labels lost.
READABLE = re.compile(r"\b\d{1,2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}\b")
ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")
MEDLINE = "raw/test_current_medline.xml.gz"


def recs(numbers: range, **extra: str) -> list[ScreeningRecord]:
    return [ScreeningRecord(source="pubmed", external_id=str(n), title=f"Paper {n} on cystic fibrosis",
                            abstract="lung function", **extra) for n in numbers]


@pytest.fixture()
def session(tmp_path: Path):
    store = DecisionStore(tmp_path / "screening.sqlite3")
    s = ScreeningSession.open(store, "r", question="cystic fibrosis lung function", background=False)
    yield s
    s.close()
    store.close()


def test_a_record_found_by_several_runs_counts_once(session: ScreeningSession) -> None:
    session.add_records(recs(range(1, 11)), origin="#1")
    assert session.flow().identified == 10 and session.flow().duplicates_removed == 0
    # The same search again, finding the ten again and two new: twelve records identified, none twice.
    session.add_records(recs(range(1, 13)), origin="#2")
    session.add_records(recs(range(1, 13)), origin="search 2026-12-03T14:05:11+00:00")
    flow = session.flow()
    assert len(session.records) == 12
    assert flow.identified == 12 and flow.duplicates_removed == 0
    assert [n.value for n in flow.identified_per_source] == [10, 2, 0]
    assert flow.identified_per_source[1].note == "12 found, 10 of them by an earlier run"
    # A second record of a paper (another identity, the same DOI) is a duplicate, as PRISMA counts one;
    # a file is a source of its own, counted whole.
    session.add_records([ScreeningRecord(source="pubmed", external_id="1", title="Paper 1", doi="10.1/x"),
                         ScreeningRecord(source="medrxiv", external_id="10.1/x", title="Paper 1",
                                         doi="10.1/x")], origin="#3")
    session.add_records(recs(range(5, 7)), origin="file refs.ris")
    flow = session.flow()
    assert len(session.records) == 12
    assert [n.value for n in flow.identified_per_source] == [10, 2, 0, 1, 2]
    assert flow.identified == 15 and flow.duplicates_removed == 3


def test_sources_are_labelled_by_name_and_a_readable_date(session: ScreeningSession) -> None:
    stamp = "2026-12-03T14:05:11+00:00"
    assert human_datetime(stamp) == human_datetime("2026-12-03T14:05:11Z")
    assert READABLE.fullmatch(human_datetime(stamp)) and human_datetime("not a date") == "not a date"
    session.add_records(recs(range(1, 4)), origin=f"search {stamp}", per_row={"row 1: cystic": 3})
    session.add_records(recs(range(3, 6)), origin="#7")
    flow = session.flow()
    labels = [n.label for n in flow.identified_per_source]
    assert labels[0] == f"Search · {human_datetime(stamp)}"
    assert labels[1].startswith("Search #7 · ") and READABLE.search(labels[1])
    file_source = SourceCount("file refs.ris", 2, {}, stamp)
    assert source_label(file_source) == f"File refs.ris · {human_datetime(stamp)}"
    text = "\n".join(flow.lines())
    svg = flow_svg(flow, session.review.name)
    for shown in (text, svg, json.dumps(flow.to_dict(), ensure_ascii=False)):
        assert not ISO.search(shown), shown
        assert "Search #7 · " in shown


def _boxes(svg: str) -> list[tuple[str, list[str]]]:
    """(fill, texts) of every box of the drawing, in order."""
    dom = xml.dom.minidom.parseString(svg)
    out: list[tuple[str, list[str]]] = []
    for node in dom.documentElement.childNodes:
        if getattr(node, "tagName", "") == "rect" and node.getAttribute("rx"):
            out.append((node.getAttribute("fill"), []))
        elif getattr(node, "tagName", "") == "text" and out and node.getAttribute("x") != "30":
            out[-1][1].append("".join(c.data for c in node.childNodes if c.nodeType == c.TEXT_NODE))
    return out


def test_marked_maybe_and_not_yet_screened_have_boxes_of_their_own(session: ScreeningSession) -> None:
    session.add_records(recs(range(1, 9)), origin="#1")
    session.maybe()
    session.maybe()
    session.include()
    session.exclude(session.review.reasons[0])
    flow = session.flow()
    assert (flow.screened, flow.maybe, flow.not_yet_screened, flow.included, flow.excluded) == (4, 2, 4, 1, 1)
    boxes = _boxes(flow_svg(flow))
    maybe = [texts for _fill, texts in boxes if any(t.startswith("Marked maybe") for t in texts)]
    waiting = [texts for _fill, texts in boxes if any(t.startswith("Not yet screened") for t in texts)]
    assert len(maybe) == 1 and len(waiting) == 1 and maybe[0] is not waiting[0]
    assert "Marked maybe (n = 2)" in maybe[0] and not any("Not yet" in t for t in maybe[0])
    assert "Not yet screened (n = 4)" in waiting[0] and not any("maybe" in t for t in waiting[0])


@pytest.mark.parametrize(("pages", "expected"), [
    ("123-9", ("123", "129")), ("4935-43", ("4935", "4943")), ("35987-6000", ("35987", "36000")),
    ("e9-18", ("e9", "e18")), ("61-76", ("61", "76")), ("99ra86", ("99ra86", "")), ("10", ("10", "")),
    ("66, 68-70, 73 passim", ("66", "")), ("", ("", "")), ("S12-S15", ("S12", "S15")),
])
def test_page_ranges_as_medline_abbreviates_them(pages: str, expected: tuple[str, str]) -> None:
    assert page_range(pages) == expected


def test_medline_volume_issue_and_pages_reach_ris_and_bibtex(pg_empty_database, literature_data, tmp_path):
    """Kept at import in the app's own table (``document`` is unchanged), fetched with the document, and
    written by both exports; the screening export too."""
    import psycopg

    db = pg_empty_database
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text(json.dumps({"id": "t:1", "source": "test", "title": "A JSONL paper", "volume": 7,
                                 "issue": "2", "pages": "100-12"}) + "\n", encoding="utf-8")
    report = db.import_files([literature_data / MEDLINE, jsonl])
    assert report.records >= 3 and not report.skipped
    with psycopg.connect(str(db.dsn)) as conn:
        columns = {r[0] for r in conn.execute("SELECT column_name FROM information_schema.columns "
                                              "WHERE table_name = 'document'").fetchall()}
        assert not columns & {"volume", "issue", "pages"}
        rows = conn.execute("SELECT d.external_id, c.volume, c.issue, c.pages FROM kmds_document_citation c "
                            "JOIN document d ON d.id = c.document_id ORDER BY d.external_id").fetchall()
    assert ("11446611", "1", "3", "188-9") in rows and ("t:1", "7", "2", "100-12") in rows
    with psycopg.connect(str(db.dsn)) as conn:
        ids = [int(r[0]) for r in conn.execute(
            "SELECT id FROM document WHERE external_id IN ('11446611', 't:1') ORDER BY external_id"
        ).fetchall()]
    docs = db.fetch_documents_by_ids(ids, order="given")
    assert (docs[0]["volume"], docs[0]["issue"], docs[0]["pages"]) == ("1", "3", "188-9")

    ris = rispy.loads(export_documents(docs, tmp_path / "d.ris", "ris").read_text(encoding="utf-8"))
    medline = next(e for e in ris if e.get("accession_number") == "11446611")
    assert (medline["volume"], medline["number"], medline["start_page"], medline["end_page"]) == (
        "1", "3", "188", "189")
    jsonl_entry = next(e for e in ris if e.get("accession_number") == "t:1")
    assert (jsonl_entry["start_page"], jsonl_entry["end_page"]) == ("100", "112")
    bib = bibtexparser.parse_string(export_documents(docs, tmp_path / "d.bib", "bibtex").read_text("utf-8"))
    entry = next(e for e in bib.entries if e.fields_dict["pmid"].value == "11446611")
    assert (entry["volume"], entry["number"], entry["pages"]) == ("1", "3", "188--189")

    # Screening keeps them from the fetched document and exports them as the search export does.
    store = DecisionStore(tmp_path / "s.sqlite3")
    try:
        s = ScreeningSession.open(store, "v", background=False)
        s.add_records([record_from_document(d) for d in docs], origin="#1")
        s.include()
        again = ScreeningSession(store, "v", background=False)  # read back from the store
        screened = rispy.loads(again.export(tmp_path / "inc.ris").read_text(encoding="utf-8"))
        assert [(e["volume"], e["number"], e["start_page"], e["end_page"]) for e in screened] == [
            ("1", "3", "188", "189")]
        s.close()
        again.close()
    finally:
        store.close()


def test_a_saved_search_goes_back_into_the_session_as_it_ran(tmp_path: Path) -> None:
    history = SearchHistory(tmp_path / "history.sqlite3")
    try:
        number = history.begin_search("cystic fibrosis in adults", "test database")
        rows = [("cystic & fibrosis", {"kind": "generated", "model": "m1", "attempt": 2, "temperature": 0.3}),
                ("cf & adults", {"kind": "edited", "model": "m2", "attempt": 1, "edited_from": "cf & adult"}),
                ("cystic fibrosis in adults", {"kind": "question", "row_type": "semantic"}),
                ("lung & function", {"kind": "hand-written"})]
        history.complete_search(number, [RowRecord(text, provenance) for text, provenance in rows], [])
        search = strategy.saved_search(history, number)
    finally:
        history.close()
    assert search.rows == rows and search.title.startswith(f"#{number} (")
    assert READABLE.search(search.title)
    # The search report says when it ran as a person reads it, and keeps the exact stamp beside it.
    history = SearchHistory(tmp_path / "history.sqlite3")
    try:
        markdown = report_markdown(build_report(history, number))
    finally:
        history.close()
    when = next(line for line in markdown.splitlines() if line.startswith("- Run: "))
    assert READABLE.search(when) and f"({search.finished_at})" in when, when
    session = app_lit.LiteratureSession()
    unsaved = session.add_hand_written("my own & query")
    session.add_hand_written("lung & function")  # the same text as a saved row: ticked, not repeated
    loaded = strategy.load_saved_search(session, search)
    assert loaded.ticked == 4 and loaded.kept == 2
    assert session.question == "cystic fibrosis in adults"
    ticked = session.included_rows()
    assert [r.query for r in ticked] == ["lung & function", "cystic & fibrosis", "cf & adults",
                                         "cystic fibrosis in adults"]
    assert session.row(unsaved.uid) is not None and not session.row(unsaved.uid).included
    provenance = {r.query: r.provenance() for r in ticked}
    generated, edited = provenance["cystic & fibrosis"], provenance["cf & adults"]
    assert generated["model"] == "m1" and generated["attempt"] == 2
    assert edited["kind"] == "edited" and edited["edited_from"] == "cf & adult"
    assert provenance["cystic fibrosis in adults"]["kind"] == "question"
    assert "loaded: 4 rows ticked; 2 unsaved queries of yours kept, unticked" in loaded.line()
