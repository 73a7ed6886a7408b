"""Screening data in and out: another reviewer's decisions (unknown ids, broken lines, kappa), the PRISMA
numbers equal the decisions, exports read back by independent parsers (rispy, bibtexparser, csv)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import bibtexparser
import pytest
import rispy

from kmds_desktop.app.screening import ScreeningSession
from kmds_desktop.literature.screening.agreement import cohen_kappa
from kmds_desktop.literature.screening.decisions import DecisionStore
from kmds_desktop.literature.screening.prisma import flow_svg
from kmds_desktop.literature.screening.records import ScreeningRecord, read_csv_records


def records(n: int = 10) -> list[ScreeningRecord]:
    return [
        ScreeningRecord(
            source="cf",
            external_id=f"cf:{i}",
            title=f"Title {i} {'calcium' if i % 2 else 'lung'}",
            abstract=f"Abstract {i}",
            authors=["Müller, Anna", "Smith J"],
            year=1990 + i,
            journal="Pediatrics",
            doi=f"10.5/x{i}",
            rank=i + 1,
            found_by=[f"#1 row 1: q{i}"],
        )
        for i in range(n)
    ]


@pytest.fixture()
def session(tmp_path: Path) -> ScreeningSession:
    store = DecisionStore(tmp_path / "s.sqlite3")
    s = ScreeningSession.open(store, "r", background=False)
    s.add_records(records(), origin="#1", per_row={"row 1": 10})
    yield s
    store.close()


def decide_all(s: ScreeningSession, pattern: list[str]) -> None:
    for d in pattern:
        if d == "i":
            s.include()
        elif d == "m":
            s.maybe()
        else:
            s.exclude(d)


def test_kappa() -> None:
    assert cohen_kappa(["i", "e", "e", "e"], ["i", "e", "e", "e"]) == 1.0
    # Known value: 2x2 table [[20, 5], [10, 15]] -> po = .7, pe = .5 -> kappa .4
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa(["e", "e"], ["e", "e"]) is None


def test_export_import_decisions_with_unknown_ids_and_a_broken_line(
    session: ScreeningSession, tmp_path: Path
) -> None:
    decide_all(session, ["i", "wrong population", "i", "wrong outcome"])
    out = session.export_decisions(tmp_path / "mine.csv", reviewer="ana")
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 4 and rows[0]["reviewer"] == "ana"
    theirs = [
        "review,reviewer,source,external_id,doi,pmid,title,decision,reason,note,decided_at",
        f"r,ben,cf,{rows[0]['external_id']},,,,include,,,",
        f"r,ben,cf,{rows[1]['external_id']},,,,include,,,",  # a disagreement
        f"r,ben,,,{'10.5/X' + rows[2]['external_id'].split(':')[1]},,,include,,,",  # matched by DOI
        f"r,ben,cf,{rows[3]['external_id']},,,,exclude,wrong outcome,,",
        "r,ben,cf,cf:999,,,,exclude,,,",  # unknown
        "r,ben,cf,cf:5,,,,include",  # broken: too few fields
        "r,ben,cf,cf:6,,,,perhaps,,,",  # broken: unknown decision
        f"r,ben,cf,{rows[0]['external_id']},,,,include,,,",  # the first record again: one decision
        "r,ben,,,,99999999,,include,,,",  # unknown, named by its PMID (it was named '')
    ]
    path = tmp_path / "ben.csv"
    path.write_text("\n".join(theirs) + "\n", encoding="utf-8")
    report = session.import_decisions(path)
    assert report.reviewer == "ben" and report.imported == 4
    assert report.unknown == ["cf:cf:999", "PMID 99999999"]
    assert [n for n, _ in report.broken] == [7, 8]
    agreement = session.agreement("ben")
    assert agreement.both == 4 and agreement.agreed == 3 and len(agreement.disagreements) == 1
    assert agreement.kappa == pytest.approx(
        cohen_kappa(
            ["include", "exclude", "include", "exclude"], ["include", "include", "include", "exclude"]
        )
    )


def test_prisma_numbers_equal_decisions(session: ScreeningSession, tmp_path: Path) -> None:
    session.add_records(
        [ScreeningRecord(source="pubmed", external_id="1", title="dup", doi="10.5/x3")],
        origin="#2",
        per_row={"row 1": 1},
    )
    decide_all(session, ["i", "wrong population", "wrong population", "m", "wrong outcome", "i"])
    session.store.set_flow_number("r", "studies_included", 1)
    flow = session.flow()
    d = session.decisions
    assert flow.identified == 11 and flow.duplicates_removed == 1
    assert flow.screened == len(d) == 6
    assert flow.included == sum(x.decision == "include" for x in d.values()) == 2
    assert flow.excluded == 3 and flow.maybe == 1 and flow.not_yet_screened == 4
    assert {n.label: n.value for n in flow.excluded_per_reason} == {"wrong population": 2, "wrong outcome": 1}
    assert flow.entered["studies_included"].entered
    svg = flow_svg(flow, "Review <r>")
    assert svg.startswith("<?xml") and "Records screened (n = 6)" in svg and "&lt;r&gt;" in svg
    assert "[entered]" in svg
    import xml.dom.minidom

    xml.dom.minidom.parseString(svg)  # well-formed


def test_exports_read_back(session: ScreeningSession, tmp_path: Path) -> None:
    decide_all(session, ["i", "wrong population", "i"])
    ris = rispy.load(session.export(tmp_path / "inc.ris").open(encoding="utf-8"))
    assert len(ris) == 2 and all("screening: include" in e["keywords"] for e in ris)
    assert any("screening: include" in n for n in ris[0]["notes"])
    every = rispy.load(session.export(tmp_path / "all.ris", which="all").open(encoding="utf-8"))
    excluded = [e for e in every if "screening: exclude" in e.get("keywords", [])]
    assert len(every) == 10 and "exclusion reason: wrong population" in excluded[0]["keywords"]
    bib = bibtexparser.parse_string(session.export(tmp_path / "inc.bib").read_text(encoding="utf-8"))
    assert len(bib.entries) == 2 and "screening: include" in bib.entries[0]["keywords"]
    rows = list(csv.DictReader(session.export(tmp_path / "all.csv", which="all").open(encoding="utf-8")))
    assert len(rows) == 10 and {r["decision"] for r in rows} == {"include", "exclude", ""}
    assert [r["reason"] for r in rows if r["decision"] == "exclude"] == ["wrong population"]
    assert "score" in rows[0] and rows[0]["title"].startswith("Title")


def test_csv_import_of_records(tmp_path: Path) -> None:
    path = tmp_path / "refs.csv"
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["Title", "Abstract", "Authors", "Year", "DOI", "label_included"])
    w.writerow(["A trial", "of calcium", "A; B", "2001", "10.1/A", "1"])
    w.writerow(["", "", "", "", "", ""])
    w.writerow(["Another", "lung", "C", "x", "", "0"])
    path.write_text(buf.getvalue(), encoding="utf-8")
    recs = read_csv_records(path)
    assert [r.label for r in recs] == [True, False]
    assert recs[0].key == ("doi", "10.1/a") and recs[0].authors == ["A", "B"] and recs[0].year == 2001
    store = DecisionStore(tmp_path / "s.sqlite3")
    s = ScreeningSession.open(store, "f", background=False)
    assert s.add_file(path) == 2 and s.add_file(path) == 0  # re-import adds nothing
    assert s.flow().identified == 2  # the same file again is not a second source
    store.close()


@pytest.mark.parametrize(("name", "text", "why"), [
    ("refs.nbib", "PMID- 1\nTI  - A MEDLINE record\n", "MEDLINE (.nbib)"),
    ("refs.tsv", "title\tdoi\nA record\t10.1/x\n", "import a .csv (comma-separated) or .ris file"),
])
def test_a_records_file_of_another_format_is_refused_not_read_as_empty(tmp_path: Path, name: str, text: str,
                                                                      why: str) -> None:
    """A .nbib was read as RIS and a .tsv as comma-separated CSV: both came back as no records, no error."""
    from kmds_desktop.literature.screening.records import read_records_file

    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(why)):
        read_records_file(path)
