"""Exports of literature results parse back to the same values (CSV, RIS, BibTeX, JSON log)."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import date
from pathlib import Path

import pytest

from kmds_desktop.literature.export import (
    LoggedQuery,
    SearchLog,
    bibtex_escape,
    export_documents,
    export_search_log,
    load_search_log,
    normalize_document,
)


def parse_ris(text: str) -> list[dict[str, list[str]]]:
    """Tiny RIS reader: ``TAG  - value`` lines, records end at ``ER``."""
    records: list[dict[str, list[str]]] = []
    current: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Z][A-Z0-9])  - ?(.*)$", line)
        if not m:
            assert not line.strip(), f"stray RIS line: {line!r}"
            continue
        tag, value = m.groups()
        if tag == "ER":
            records.append(current)
            current = {}
        else:
            current.setdefault(tag, []).append(value)
    assert current == {}, "unterminated RIS record"
    return records


def parse_bibtex(text: str) -> list[dict[str, str]]:
    """Tiny BibTeX reader: ``@type{key, name = {value}, ...}`` with balanced braces."""
    entries = []
    pos = 0
    while (start := text.find("@", pos)) != -1:
        m = re.compile(r"@(\w+)\{([^,]+),").match(text, start)
        assert m, f"bad entry at {start}"
        entry = {"ENTRYTYPE": m.group(1), "ID": m.group(2)}
        i = m.end()
        while True:
            fm = re.compile(r"\s*(\w+)\s*=\s*\{").match(text, i)
            if not fm:
                break
            depth, j = 1, fm.end()
            while depth:
                ch = text[j]
                if ch == "\\":
                    j += 2
                    continue
                depth += {"{": 1, "}": -1}.get(ch, 0)
                j += 1
            entry[fm.group(1)] = text[fm.end() : j - 1]
            i = j
            if text[i] == ",":
                i += 1
        closing = re.compile(r"\s*\}").match(text, i)
        assert closing, f"entry {entry['ID']} not closed"
        pos = closing.end()
        entries.append(entry)
    return entries


def unescape_bibtex(value: str) -> str:
    value = value.replace(r"\textbackslash{}", "\\").replace(r"\textasciitilde{}", "~")
    value = value.replace(r"\textasciicircum{}", "^")
    return re.sub(r"\\([{}&%$#_])", r"\1", value)


DOCS = [
    {
        "id": 11,
        "title": "Pseudomonas & {CF}: 50% of cases_with $ and # signs",
        "abstract": "Line one.\nLine two, with \"quotes\", commas; and é ünïcode.",
        "authors": ["Hoiby N", "Jacobsen L"],
        "publication": "Acta Paediatr Scand",
        "publication_date": date(1974, 5, 1),
        "doi": "10.1000/xyz.1",
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
        "external_id": "sf-9",
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
    assert [r["id"] for r in rows] == ["11", "12"]
    assert rows[0]["title"] == DOCS[0]["title"]
    assert rows[0]["abstract"] == DOCS[0]["abstract"]  # newlines and quotes survive
    assert rows[0]["authors"] == "Hoiby N; Jacobsen L"
    assert rows[0]["year"] == "1974" and rows[0]["pmid"] == "123456"
    assert rows[0]["found_by"] == "q1; q2" and rows[1]["found_by"] == "q2"
    assert rows[1]["pmid"] == "" and rows[1]["year"] == "2019"


def test_ris_round_trip(tmp_path: Path) -> None:
    path = export_documents(DOCS, tmp_path / "docs.ris", "ris", found_by=FOUND_BY)
    records = parse_ris(path.read_text(encoding="utf-8"))
    assert len(records) == 2
    first = records[0]
    assert first["TY"] == ["JOUR"]
    assert first["TI"] == [DOCS[0]["title"]]
    assert first["AU"] == ["Hoiby N", "Jacobsen L"]
    assert first["PY"] == ["1974"] and first["DO"] == ["10.1000/xyz.1"] and first["AN"] == ["123456"]
    assert first["AB"] == [" ".join(DOCS[0]["abstract"].split())]
    assert "AU" not in records[1] and records[1]["PY"] == ["2019"]


def test_bibtex_round_trip(tmp_path: Path) -> None:
    path = export_documents(DOCS + [dict(DOCS[0], id=13)], tmp_path / "docs.bib", "bib")
    entries = parse_bibtex(path.read_text(encoding="utf-8"))
    assert len(entries) == 3
    keys = [e["ID"] for e in entries]
    assert len(set(keys)) == 3, "keys must be unique even for the same first author/year/PMID"
    assert keys[0].startswith("Hoiby1974")
    first = entries[0]
    assert unescape_bibtex(first["title"]) == DOCS[0]["title"]
    assert first["author"] == "Hoiby N and Jacobsen L"
    assert first["year"] == "1974" and first["doi"] == "10.1000/xyz.1"
    assert "author" not in entries[1]


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


def test_search_log_round_trip(tmp_path: Path) -> None:
    log = SearchLog(
        question="Does azithromycin help CF?",
        models=["m1", "m2"],
        system_prompt="Write a tsquery",
        temperature=0.2,
        queries_per_model=1,
        queries=[
            LoggedQuery(query="azithromycin & cf", model="m1", attempt=1, matches=3, ids=[1, 2, 3],
                        unique_ids=[3], time_s=0.01),
            LoggedQuery(query="(cystic & fibrosis)", model="hand-written", ids=[1, 2]),
        ],
        merged_ids=[1, 2, 3],
        document_count=3,
        run_started_at="2026-01-01T00:00:00+00:00",
    )
    path = export_search_log(log, tmp_path / "log.json")
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["format"] == "kmds-desktop-search-log/1"
    assert raw["queries"][0]["unique_ids"] == [3]
    assert load_search_log(path) == log
