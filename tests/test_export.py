"""Exports of literature results parse back to the same values (CSV, RIS, BibTeX, the JSON search log)."""

from __future__ import annotations

import csv
import io
import json
from datetime import date
from pathlib import Path
from typing import Any

import bibtexparser
import pytest
import rispy
from bibtexparser.middlewares import LatexDecodingMiddleware, SeparateCoAuthors, SplitNameParts

from kmds_desktop.app.search_log import FORMAT, load_search_log, write_search_log
from kmds_desktop.literature.strategy.citation_names import key_stem, parse_author, to_ascii
from kmds_desktop.literature.strategy.reference_files import (
    bibtex_escape,
    export_documents,
    format_for_path,
    normalize_document,
)


def parse_ris(text: str) -> list[dict[str, Any]]:
    """Read RIS with ``rispy`` (an independent reader); a malformed file raises."""
    return rispy.loads(text)


def parse_bibtex(text: str) -> list[dict[str, Any]]:
    """Read BibTeX with ``bibtexparser`` 2 (LaTeX decoded, authors split) into ``{field: value}``.

    Every block must parse: a failed block (unbalanced braces, bad key) fails the test.
    """
    library = bibtexparser.parse_string(
        text, append_middleware=[SeparateCoAuthors(), SplitNameParts(), LatexDecodingMiddleware()]
    )
    assert not library.failed_blocks, [b.error for b in library.failed_blocks]
    return [
        {"ENTRYTYPE": e.entry_type, "ID": e.key, **{f.key: f.value for f in e.fields}}
        for e in library.entries
    ]


def raw_bibtex_fields(text: str) -> list[dict[str, str]]:
    """The fields as written in the file (no LaTeX decoding), to check what is escaped and what not."""
    library = bibtexparser.parse_string(text)
    return [{f.key: f.value for f in e.fields} for e in library.entries]


DOCS = [
    {
        "id": 11,
        "title": "Pseudomonas & {CF}: 50% of cases_with $ and # signs in DNA ~ 3/4",
        "abstract": "Line one.\nLine two, with \"quotes\", commas; and é ünïcode.",
        "authors": ["Müller N", "Jørgensen BA", "van der Berg J-P", "CF Study Group"],
        "publication": "Acta Paediatr Scand",
        "publication_date": date(1974, 5, 1),
        "doi": "10.1000/xyz_1%2",
        "source": "pubmed",
        "external_id": "123456",
        "keywords": ["cystic fibrosis"],
    },
    {
        "id": 12,
        "title": "A claim without authors",
        "abstract": "",
        "authors": [],
        "year": 2019,
        "journal": None,
        "doi": None,
        "source": "scifact",
        "external_id": "scifact:4983",
    },
    {
        "id": 14,
        "title": "Full names and a group with and in it",
        "authors": ["Ludwig van Beethoven", "Smith, John A.", "Food and Drug Administration"],
        "year": 2001,
        "source": "cf",
        "external_id": "cf:7",
    },
]
FOUND_BY = {11: ["q1", "q2"], 12: ["q2"]}


def test_normalize_reads_dicts_and_objects() -> None:
    class Doc:
        id = 5
        title = "T"
        authors = ("A B",)
        publication_date = "2001-02-03"
        source = "pubmed"
        external_id = "777"

    d = normalize_document(Doc())
    assert (d.id, d.year, d.pmid, d.authors) == ("5", 2001, "777", ["A B"])
    assert normalize_document(DOCS[0]).journal == "Acta Paediatr Scand"


def test_csv_round_trip(tmp_path: Path) -> None:
    path = export_documents(DOCS, tmp_path / "docs.csv", "csv", found_by=FOUND_BY)
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))
    assert [r["id"] for r in rows] == ["11", "12", "14"]
    assert rows[0]["title"] == DOCS[0]["title"]
    assert rows[0]["abstract"] == DOCS[0]["abstract"]  # newlines and quotes survive
    assert rows[0]["authors"] == "; ".join(DOCS[0]["authors"])
    assert rows[0]["year"] == "1974" and rows[0]["pmid"] == "123456"
    assert rows[0]["found_by"] == "q1; q2" and rows[1]["found_by"] == "q2"
    assert rows[1]["pmid"] == "" and rows[1]["year"] == "2019"


def test_ris_reads_back_with_rispy(tmp_path: Path) -> None:
    path = export_documents(DOCS, tmp_path / "docs.ris", "ris", found_by=FOUND_BY)
    records = parse_ris(path.read_text(encoding="utf-8"))
    assert len(records) == 3
    first, second, third = records
    assert first["type_of_reference"] == "JOUR"
    assert first["title"] == DOCS[0]["title"]
    assert first["authors"] == ["Müller, N.", "Jørgensen, B. A.", "van der Berg, J.-P.", "CF Study Group"]
    assert first["year"] == "1974" and first["secondary_title"] == "Acta Paediatr Scand"
    assert first["doi"] == "10.1000/xyz_1%2"  # as issued, nothing escaped
    # The source's own identifier in every record, not the database's row number.
    assert first["id"] == "pubmed:123456" and first["accession_number"] == "123456"
    assert first["name_of_database"] == "pubmed"
    assert second["id"] == "scifact:4983" and second["accession_number"] == "scifact:4983"
    assert third["id"] == "cf:7"
    assert first["abstract"] == " ".join(DOCS[0]["abstract"].split())
    assert first["notes"] == ["found by: q1; q2"]
    assert "authors" not in second and second["year"] == "2019"
    assert third["authors"] == ["van Beethoven, Ludwig", "Smith, John A.", "Food and Drug Administration"]


def test_bibtex_reads_back_with_bibtexparser(tmp_path: Path) -> None:
    path = export_documents(DOCS + [dict(DOCS[0], id=13)], tmp_path / "docs.bib", "bib")
    text = path.read_text(encoding="utf-8")
    entries = parse_bibtex(text)
    assert len(entries) == 4
    keys = [e["ID"] for e in entries]
    assert len(set(keys)) == 4, "keys must be unique even for the same first author/year/PMID"
    assert keys[0] == "Muller1974_123456", "keys are ASCII: Müller -> Muller"
    assert keys[1] == "anon2019_scifact4983" and keys[2] == "vanBeethoven2001_cf7"
    assert all(k.isascii() for k in keys)
    first = entries[0]
    assert first["ENTRYTYPE"] == "article"
    assert first["title"] == DOCS[0]["title"]
    people = first["author"]
    assert [p.last for p in people] == [["Müller"], ["Jørgensen"], ["Berg"], ["{CF Study Group}"]]
    assert [p.first for p in people] == [["N."], ["B.", "A."], ["J.-P."], []]
    assert people[2].von == ["van", "der"]
    assert first["year"] == "1974" and first["journal"] == "Acta Paediatr Scand"
    # The source's identifier in every entry (biblatex eprint), PMID also as Zotero's pmid field.
    assert (first["eprint"], first["eprinttype"], first["pmid"]) == ("123456", "pubmed", "123456")
    assert (entries[1]["eprint"], entries[1]["eprinttype"]) == ("scifact:4983", "scifact")
    assert "author" not in entries[1] and "pmid" not in entries[1]
    third = [(p.last, p.first) for p in entries[2]["author"]]
    assert third == [(["Beethoven"], ["Ludwig"]), (["Smith"], ["John", "A."]),
                     (["{Food and Drug Administration}"], [])], "a braced group with 'and' stays one author"

    raw = raw_bibtex_fields(text)[0]
    assert raw["doi"] == "10.1000/xyz_1%2", "DOIs are verbatim, not LaTeX-escaped"
    assert raw["title"].startswith("{") and raw["title"].endswith("}"), "titles are brace-protected"
    assert raw["author"].startswith("M")  # UTF-8 kept as written, no LaTeX accents


def test_author_forms() -> None:
    cases = {
        "Hoiby N": "Hoiby, N.",
        "DiMartini A": "DiMartini, A.",
        "Le Roux JA": "Le Roux, J. A.",
        "Smith, JA": "Smith, J. A.",
        "Maria Garcia": "Garcia, Maria",
        "WHO": "WHO",
        "Cystic Fibrosis Foundation Patient Registry": "Cystic Fibrosis Foundation Patient Registry",
    }
    assert {name: parse_author(name).display for name in cases} == cases
    assert to_ascii("Müller Ørsted Łukasz Straße") == "Muller Orsted Lukasz Strasse"
    assert key_stem(["  "]) == "anon" and key_stem(["Ñúñez R"]) == "Nunez"


def test_bibtex_escape_keeps_braces_balanced() -> None:
    escaped = bibtex_escape("a}b{{c\\")
    depth = 0
    for i, ch in enumerate(escaped):
        if ch in "{}" and (i == 0 or escaped[i - 1] != "\\"):
            depth += 1 if ch == "{" else -1
            assert depth >= 0
    assert depth == 0


def test_unknown_format_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="csv, ris, bibtex"):
        export_documents(DOCS, tmp_path / "x.doc", "doc")
    assert [format_for_path(f"set.{ext}") for ext in ("RIS", "bib", "csv")] == ["ris", "bibtex", "csv"]
    with pytest.raises(ValueError, match=r"set\.doc: the documents file must end in \.csv, \.ris, \.bib"):
        format_for_path("set.doc")


def test_search_log_round_trip_and_refusals(tmp_path: Path) -> None:
    """The one search-log writer (the app layer's) reads back what it wrote, private to the user,
    and refuses a file that is not a log of its format."""
    log = {"format": FORMAT, "question": "Does azithromycin help CF?", "models": ["m1", "m2"],
           "queries": [{"query": "azithromycin & cf", "kind": "tsquery", "ids": [1, 2, 3],
                        "refs": ["pubmed:1", "pubmed:2", "pubmed:3"], "unique_ids": [3]}],
           "merged_ids": [1, 2, 3], "document_count": 3, "incomplete": False, "failed_queries": []}
    path = write_search_log(log, tmp_path / "log.json")
    assert load_search_log(path) == log
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    old = tmp_path / "old.json"
    old.write_text(json.dumps({**log, "format": "kmds-desktop-search-log/1"}), encoding="utf-8")
    with pytest.raises(ValueError, match="not a KMDS Desktop search log"):
        load_search_log(old)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(ValueError, match="nested too deeply"):
        load_search_log(deep)



NON_ASCII_INITIALS = {
    "Szumowski Ł": ("Szumowski", "Ł."),
    "Yılmaz Ş": ("Yılmaz", "Ş."),
    "Öztürk ÖM": ("Öztürk", "Ö. M."),
    "Иванов АВ": ("Иванов", "А. В."),
    "Łukasiewicz J-Ł": ("Łukasiewicz", "J.-Ł."),
    "Dvořák Č": ("Dvořák", "Č."),
}


def test_initials_in_any_script_are_not_flipped(tmp_path: Path) -> None:
    """MEDLINE initials are any upper-case letters, not only A-Z: "Szumowski Ł" is "Szumowski, Ł.",
    never "Ł, Szumowski" (issue 21, 9); read back by rispy and bibtexparser."""
    doc = dict(DOCS[0], authors=list(NON_ASCII_INITIALS))
    ris = parse_ris(export_documents([doc], tmp_path / "d.ris", "ris").read_text(encoding="utf-8"))
    assert ris[0]["authors"] == [f"{last}, {first}" for last, first in NON_ASCII_INITIALS.values()]
    (entry,) = parse_bibtex(export_documents([doc], tmp_path / "d.bib", "bib").read_text(encoding="utf-8"))
    people = [(" ".join(p.last), " ".join(p.first)) for p in entry["author"]]
    assert people == list(NON_ASCII_INITIALS.values())
    assert entry["ID"].startswith("Szumowski1974")
    # Lower-case or longer words are still names, not initials.
    assert parse_author("Łukasz Szumowski").display == "Szumowski, Łukasz"
    assert parse_author("Szumowski, Łukasz").display == "Szumowski, Łukasz"


def test_screened_exports_keep_a_fields_own_line_breaks_and_a_reason_on_one_line() -> None:
    """The screened CSV was split into lines before it was read as CSV: a title's \\r\\n or an abstract's
    \\u2028 came back as \\n. The RIS note wrote the exclusion reason raw, so a line break in it ended
    the note (and "ER  -" in it, the record). Read back by the csv module and rispy."""
    import csv as csv_module
    import io

    from kmds_desktop.literature.screening.decisions import Decision
    from kmds_desktop.literature.screening.records import ScreeningRecord
    from kmds_desktop.literature.screening.screened_export import screened_to_csv, screened_to_ris

    rec = ScreeningRecord("pubmed", "1", title="A title\r\nwith CRLF", abstract="para1\u2028para2\x85x")
    decisions = {rec.key: Decision("exclude", reason="wrong\npopulation\nER  - ", note="n")}
    rows = list(csv_module.DictReader(io.StringIO(screened_to_csv([rec], decisions), newline="")))
    assert rows[0]["title"] == "A title\r\nwith CRLF" and rows[0]["abstract"] == "para1\u2028para2\x85x"
    [entry] = parse_ris(screened_to_ris([rec], decisions))
    assert any("reason: wrong population ER -" in n for n in entry["notes"]), entry["notes"]
