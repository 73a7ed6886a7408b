"""Damaged or hostile import files stay one record's problem, or one file's, never the import's: dates
that cannot be read, JSON nested deeper than the parser's stack, NUL characters and lone surrogates
PostgreSQL refuses, a ``.gz`` that decompresses to one endless line or element, and a cancel while
the read-ahead thread is stuck in a slow read. Real files in ``tmp_path``, imported into the test
PostgreSQL server."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import threading
import time
import tracemalloc
import zlib
from pathlib import Path

import psycopg
import pytest

from kmds_desktop.literature.document import Document
from kmds_desktop.literature.errors import ImportFileError
from kmds_desktop.literature.store import importers
from kmds_desktop.literature.store.importers import (
    MAX_GZIP_RATIO,
    MAX_RECORD_BYTES,
    MIN_GZIP_CAP,
    BadRecord,
    parse_partial_date,
    read_records,
)
from kmds_desktop.tasks import Cancelled, CancelToken
from kmds_desktop.text import MESSAGE_LIMIT
from kmds_desktop.user_files import ENV_MAX_GZIP_RATIO, size_text

_MIB_OF_A = gzip.compress(b"a" * (1 << 20), compresslevel=9)  # one gzip member: 1 MiB of "a", ~1 KB


def _jsonl(path: Path, records: list[dict | str]) -> Path:
    """A JSONL file of ``records`` (a dict is dumped, a str is written as the line it is)."""
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _rec(n: int, **fields: object) -> dict:
    return {"id": f"x:{n}", "source": "x", "title": f"Record number {n}", **fields}


def _rows(dsn: str) -> dict[str, tuple]:
    """``external_id -> (title, abstract, authors, mesh_terms, publication_date)`` of every document."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT external_id, title, abstract, authors, mesh_terms, publication_date "
                            "FROM document").fetchall()
    return {r[0]: tuple(r[1:]) for r in rows}


def _gzip_members(path: Path, head: bytes, mib: int, tail: bytes) -> Path:
    """``head``, ``mib`` MiB of "a" and ``tail`` as a gzip file of concatenated members: gigabytes
    once decompressed from a file of ``mib`` KB, the shape of a decompression bomb."""
    with path.open("wb") as fh:
        fh.write(gzip.compress(head))
        for _ in range(mib):
            fh.write(_MIB_OF_A)
        fh.write(gzip.compress(tail))
    return path


def _article(pmid: int, title: str, pub_date: str = "") -> str:
    journal = (f"<Journal><JournalIssue><PubDate>{pub_date}</PubDate></JournalIssue></Journal>"
               if pub_date else "")
    return (f"<PubmedArticle><MedlineCitation><PMID>{pmid}</PMID><Article>{journal}"
            f"<ArticleTitle>{title}</ArticleTitle></Article></MedlineCitation></PubmedArticle>")


# -- 1. dates: a part that cannot be read makes the date coarser, the record is kept ----------------
@pytest.mark.parametrize(("parts", "expected"), [
    (("2020", "99999999999999999999"), dt.date(2020, 1, 1)),  # was OverflowError
    (("2020", "1", "99999999999999999999"), dt.date(2020, 1, 1)),  # was OverflowError
    (("2020", "²"), dt.date(2020, 1, 1)),  # '²'.isdigit() is True, int('²') a ValueError
    (("2020", "Mar", "²"), dt.date(2020, 3, 1)),  # a bad day keeps the month
    (("2020", "Mar", "123"), dt.date(2020, 3, 1)),  # more than 2 digits: not a day
    (("2020", "Foo", "15"), dt.date(2020, 1, 1)),  # no month: the day means nothing, year only
    (("2020", "13", "5"), dt.date(2020, 1, 1)),
    (("2020", "2", "30"), dt.date(2020, 2, 1)),
    (("2020", "Feb", "07"), dt.date(2020, 2, 7)),
    (("2021", "Spring"), dt.date(2021, 3, 1)),
    (("²⁰²⁰",), None),  # not a four-digit ASCII year: no date
    (("0000", "1", "1"), None),
])
def test_a_date_part_that_cannot_be_read_gives_a_coarser_date(parts: tuple, expected: dt.date | None) -> None:
    assert parse_partial_date(*parts) == expected


def test_records_with_unreadable_dates_are_imported_with_the_date_made_coarser(
        pg_empty_database, tmp_path, data_home):
    """In a folder, as the PubMed baseline is imported: a bad date once stopped the folder at its
    file on every resume."""
    db = pg_empty_database
    folder = tmp_path / "baseline"
    folder.mkdir()
    _jsonl(folder / "dates.jsonl", [
        _rec(1, publication_date="2020-1-99999999999999999999"),
        _rec(2, publication_date="2020-99999999999999999999-1"),
        _rec(3, publication_date="2019-²-05"),
        _rec(4, publication_date="2018-07-14"),
    ])
    xml = folder / "dates.xml.gz"
    xml.write_bytes(gzip.compress(("<PubmedArticleSet>"
        + _article(91000001, "Month overflow", "<Year>2020</Year><Month>99999999999999999999</Month>")
        + _article(91000002, "Day overflow", "<Year>2021</Year><Month>Mar</Month>"
                                             "<Day>99999999999999999999</Day>")
        + _article(91000003, "Superscript month", "<Year>2022</Year><Month>²</Month>")
        + _article(91000004, "Fine date", "<Year>2023</Year><Month>Feb</Month><Day>9</Day>")
        + "</PubmedArticleSet>").encode("utf-8")))
    report = db.import_files(folder)
    assert [Path(f.path).name for f in report.files] == ["dates.jsonl", "dates.xml.gz"]
    assert report.inserted == 8 and not report.skipped
    dates = {k: v[4] for k, v in _rows(db.dsn).items()}
    assert dates == {
        "x:1": dt.date(2020, 1, 1), "x:2": dt.date(2020, 1, 1), "x:3": dt.date(2019, 1, 1),
        "x:4": dt.date(2018, 7, 14),
        "91000001": dt.date(2020, 1, 1), "91000002": dt.date(2021, 3, 1), "91000003": dt.date(2022, 1, 1),
        "91000004": dt.date(2023, 2, 9),
    }


def test_a_pmid_of_non_ascii_digits_is_a_skipped_record(pg_empty_database, tmp_path):
    path = _jsonl(tmp_path / "pmids.jsonl", [
        {"id": "pubmed:1", "source": "pubmed", "pmid": "١٢٣", "title": "Arabic-Indic digits"},
        {"id": "pubmed:2", "source": "pubmed", "pmid": "92000002", "title": "A real PMID"},
    ])
    report = pg_empty_database.import_files([path])
    assert report.inserted == 1 and [s.position for s in report.skipped] == ["line 1"]
    assert set(_rows(pg_empty_database.dsn)) == {"92000002"}


# -- 2. JSON nested deeper than the parser's stack ---------------------------------------------------
def test_a_json_line_nested_too_deeply_is_a_skipped_record(pg_empty_database, tmp_path):
    path = _jsonl(tmp_path / "deep.jsonl", [_rec(1), "[" * 100_000, '{"id": "x:3", "source": "x", "title": '
                                            + "[" * 100_000, _rec(4)])
    report = pg_empty_database.import_files([path])
    assert report.inserted == 2 and set(_rows(pg_empty_database.dsn)) == {"x:1", "x:4"}
    assert [(s.position, s.message) for s in report.skipped] == [
        ("line 2", "not valid JSON (nested too deeply)"), ("line 3", "not valid JSON (nested too deeply)")]


def test_a_pubmedqa_file_nested_too_deeply_is_refused_and_the_file_before_it_stays(
        pg_empty_database, tmp_path, data_home):
    good = _jsonl(tmp_path / "good.jsonl", [_rec(1), _rec(2)])
    deep = tmp_path / "deep.json"
    deep.write_text('{"12345": ' + "[" * 100_000, encoding="utf-8")
    with pytest.raises(ImportFileError, match=r"deep\.json: not valid JSON \(nested too deeply\)"):
        pg_empty_database.import_files([good, deep])
    assert set(_rows(pg_empty_database.dsn)) == {"x:1", "x:2"}


def test_a_pubmedqa_file_past_its_size_limit_is_refused_unread(pg_empty_database, tmp_path, monkeypatch):
    """The limit (1 GiB) lowered for the test: reading a real gigabyte would take the test's time."""
    path = tmp_path / "ori_pqal.json.gz"
    entry = {"CONTEXTS": ["Some context."], "LABELS": ["BACKGROUND"], "YEAR": "2011"}
    path.write_bytes(gzip.compress(json.dumps({str(93000000 + i): entry for i in range(50)}).encode()))
    monkeypatch.setattr(importers, "MAX_JSON_FILE_BYTES", 1000)
    with pytest.raises(ImportFileError, match=r"ori_pqal\.json\.gz: larger than 1,000 bytes, the limit"):
        pg_empty_database.import_files([path])
    monkeypatch.undo()
    assert pg_empty_database.import_files([path]).inserted == 50  # the same file under the real limit


# -- 3. text PostgreSQL refuses ------------------------------------------------------------------------
def test_nul_characters_and_lone_surrogates_are_cleaned_before_postgresql(pg_empty_database, tmp_path):
    path = _jsonl(tmp_path / "text.jsonl", [
        _rec(1),
        _rec(2, title="Zinc\u0000 in infants", abstract="Before\u0000after", authors=["Nul\u0000 A"],
             mesh_terms=["Zinc\u0000"]),
        _rec(3, title="Lone \ud800 surrogate", abstract="Reversed pair \udc00\ud83d here"),
        _rec(4),
    ])
    assert "\\u0000" in path.read_text(encoding="utf-8") and "\\ud800" in path.read_text(encoding="utf-8")
    report = pg_empty_database.import_files([path])
    assert report.inserted == 4 and not report.skipped
    rows = _rows(pg_empty_database.dsn)
    assert rows["x:2"][:4] == ("Zinc in infants", "Beforeafter", ["Nul A"], ["Zinc"])
    assert rows["x:3"][:2] == ("Lone \ufffd surrogate", "Reversed pair \ufffd\ufffd here")
    assert rows["x:1"][0] == "Record number 1" and rows["x:4"][0] == "Record number 4"


# -- 4. one record's size is bounded -------------------------------------------------------------------
def test_a_jsonl_line_past_the_record_limit_is_skipped_without_being_held(pg_empty_database, tmp_path,
                                                                           monkeypatch):
    monkeypatch.setenv(ENV_MAX_GZIP_RATIO, "100000")  # past the file's cap (tests/test_input_bounds.py)
    limit_mib = MAX_RECORD_BYTES >> 20
    path = _gzip_members(tmp_path / "bomb.jsonl.gz",
                         (json.dumps(_rec(1)) + '\n{"id": "x:2", "source": "x", "title": "').encode(),
                         4 * limit_mib, ('"}\n' + json.dumps(_rec(3)) + "\n").encode())
    assert path.stat().st_size < 1 << 20  # a small file: 256 MiB once decompressed

    tracemalloc.start()
    try:
        items = list(read_records(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [type(i) for i in items] == [Document, BadRecord, Document]
    assert peak < 3 * MAX_RECORD_BYTES, peak  # the 256 MiB line was never held whole

    report = pg_empty_database.import_files([path])
    assert report.inserted == 2 and set(_rows(pg_empty_database.dsn)) == {"x:1", "x:3"}
    (skipped,) = report.skipped
    assert skipped.position == "line 2" and f"longer than {limit_mib} MiB" in skipped.message


def test_xml_text_past_the_record_limit_stops_the_file_with_bounded_memory(
        pg_empty_database, tmp_path, data_home, monkeypatch):
    monkeypatch.setenv(ENV_MAX_GZIP_RATIO, "100000")  # past the file's cap (tests/test_input_bounds.py)
    good = _jsonl(tmp_path / "good.jsonl", [_rec(1)])
    head = f"<PubmedArticleSet>{_article(94000001, 'A good article')}<PubmedArticle><MedlineCitation>" \
           "<PMID>94000002</PMID><Article><ArticleTitle>"
    bomb = _gzip_members(tmp_path / "bomb.xml.gz", head.encode(), 1024,
                         b"</ArticleTitle></Article></MedlineCitation></PubmedArticle></PubmedArticleSet>")
    assert bomb.stat().st_size < 2 << 20  # 1 GiB of text in one element once decompressed

    tracemalloc.start()
    try:
        with pytest.raises(ImportFileError, match=r"bomb\.xml\.gz: .*after record 1 runs past 64 MiB"):
            list(read_records(bomb))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * MAX_RECORD_BYTES, peak

    with pytest.raises(ImportFileError, match=r"bomb\.xml\.gz: .*64 MiB.*nothing from it was imported"):
        pg_empty_database.import_files([good, bomb])
    assert set(_rows(pg_empty_database.dsn)) == {"x:1"}  # the file before it stays, none of the bomb


def test_xml_with_a_million_elements_in_one_record_stops_the_file(pg_empty_database, tmp_path):
    path = tmp_path / "elements.xml.gz"
    body = _article(95000001, "A good article") + _article(95000002, "<i/>" * 1_000_001)
    path.write_bytes(gzip.compress(f"<PubmedArticleSet>{body}</PubmedArticleSet>".encode()))
    assert len(gzip.decompress(path.read_bytes())) < MAX_RECORD_BYTES  # under the byte limit
    with pytest.raises(ImportFileError, match=r"elements\.xml\.gz: .*after record 1 runs past 1,000,000 "
                                              "elements"):
        pg_empty_database.import_files([path])
    assert pg_empty_database.status()["documents"] == 0


def test_large_but_real_sized_records_are_imported(pg_empty_database, tmp_path):
    """Records far past any real PubMed record (2 MB of abstract, 30,000 elements) are well inside
    the bounds: the limits stop only what no real file has."""
    abstract = "word " * 400_000
    authors = "".join(f"<Author><LastName>Author{i}</LastName><Initials>A</Initials></Author>"
                      for i in range(10_000))
    article = ("<PubmedArticle><MedlineCitation><PMID>96000001</PMID><Article>"
               f"<ArticleTitle>Big</ArticleTitle><Abstract><AbstractText>{abstract}</AbstractText></Abstract><AuthorList>{authors}</AuthorList>"
               "</Article></MedlineCitation></PubmedArticle>")
    path = tmp_path / "big.xml"
    path.write_text(f"<PubmedArticleSet>{article}{_article(96000002, 'Small')}</PubmedArticleSet>",
                    encoding="utf-8")
    report = pg_empty_database.import_files([path])
    assert report.inserted == 2 and not report.skipped
    rows = _rows(pg_empty_database.dsn)
    assert len(rows["96000001"][2]) == 10_000 and len(rows["96000001"][1]) == len(abstract.strip())


# -- 5. a cancel while the read-ahead thread is in a slow read -----------------------------------------
def test_cancel_is_not_held_up_by_a_slow_read_of_the_file_ahead(pg_empty_database, tmp_path, data_home,
                                                                 monkeypatch):
    """A read that stalls (a network disk): the loader waits for the file's records; a cancel ends it
    at once, while the read is still going. The stall is the one part not real: the first file's
    reader hands over its first record, then waits (a file of millions of blank lines read in 3 s on
    one machine and 0.4 s on the next, so it could not show this reliably)."""
    from kmds_desktop.literature.store import loading

    slow = _jsonl(tmp_path / "a_slow.jsonl", [_rec(1)])
    second = _jsonl(tmp_path / "b.jsonl", [_rec(2)])
    release = threading.Event()
    real = loading.read_records

    def stalling(path, meter=None):
        for item in real(path, meter):
            yield item
            if path == slow:
                release.wait(60)  # the stalled read

    monkeypatch.setattr(loading, "read_records", stalling)
    token = CancelToken()
    cancelled_at: list[float] = []

    def cancel() -> None:
        cancelled_at.append(time.perf_counter())
        token.cancel()

    timer = threading.Timer(0.5, cancel)
    timer.start()
    try:
        with pytest.raises(Cancelled):
            pg_empty_database.import_files([slow, second], cancel=token)
        latency = time.perf_counter() - cancelled_at[0]
        readers = [t for t in threading.enumerate() if t.name == "kmds-import-read-ahead"]
        assert readers, "the read had ended: nothing showed the cancel was not waiting for it"
        assert latency < 1.5, latency
        assert pg_empty_database.status()["documents"] == 0
    finally:
        timer.cancel()
        release.set()
    # The thread stops by itself at its next record (here the file's end), handing over nothing more.
    for thread in readers:
        thread.join(timeout=60)
        assert not thread.is_alive()


# -- 6. a .gz bomb stops at its cap; the message says the cap and how to raise it ---------------------------
def _zeros_gz(path: Path, mib: int, byte: bytes = b"\0") -> Path:
    """``mib`` MiB of ``byte`` as one gzip stream: about 1 KB on disk per MiB."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip container
    block = byte * (1 << 20)
    with path.open("wb") as fh:
        for _ in range(mib):
            fh.write(packer.compress(block))
        fh.write(packer.flush())
    return path


@pytest.mark.timeout(120)  # a guard against an unbounded read, not a timing
def test_a_gzip_bomb_stops_at_the_cap_and_says_how_to_raise_it(pg_empty_database, tmp_path, data_home,
                                                              monkeypatch):
    good = _jsonl(tmp_path / "a_good.jsonl", [_rec(1)])
    bomb = _zeros_gz(tmp_path / "b_bomb.jsonl.gz", 300)  # 300 MB of zeros in about 300 KB
    size = bomb.stat().st_size
    assert size < 400_000
    cap = max(size * MAX_GZIP_RATIO, MIN_GZIP_CAP)
    with pytest.raises(ImportFileError) as info:
        pg_empty_database.import_files([good, bomb])
    message = str(info.value)
    assert message.startswith(f"{bomb}: decompresses to more than {size_text(cap)}, the cap for this .gz "
                              "file")
    assert f"{MAX_GZIP_RATIO} times its {size_text(size)} on disk" in message
    assert f"gunzip it and import the plain file, or raise the cap with the environment variable " \
           f"{ENV_MAX_GZIP_RATIO} (now {MAX_GZIP_RATIO})" in message
    assert set(_rows(pg_empty_database.dsn)) == {"x:1"}  # the file before it stays, nothing of the bomb

    # Millions of blank lines: the same cap, and no longer minutes of CPU to get there.
    blank = _zeros_gz(tmp_path / "blank.jsonl.gz", 300, b"\n")
    with pytest.raises(ImportFileError, match="decompresses to more than"):
        list(read_records(blank))

    # Raised as the message says, the file is read to its end (each line skipped as too long).
    monkeypatch.setenv(ENV_MAX_GZIP_RATIO, "2000")
    items = list(read_records(bomb))
    assert items and all(isinstance(i, BadRecord) for i in items)


def test_the_gzip_cap_leaves_real_gz_files_alone(literature_data):
    """The shared MEDLINE file expands 6 times, the most any real corpus file here does."""
    path = literature_data / "raw" / "medline16n0902.xml.gz"
    text = gzip.decompress(path.read_bytes())
    assert len(text) > 5 * path.stat().st_size
    records = [i for i in read_records(path) if isinstance(i, Document)]
    assert len(records) == text.count(b"</MedlineCitation>") > 600  # every record, to the file's end


@pytest.mark.timeout(60)
def test_a_corpus_file_that_is_a_link_to_dev_zero_is_refused(pg_empty_database, tmp_path):
    link = tmp_path / "corpus.jsonl"
    link.symlink_to("/dev/zero")
    with pytest.raises(ImportFileError, match=r"corpus\.jsonl is a character device .*not a file"):
        pg_empty_database.import_files([link])
    with pytest.raises(ImportFileError, match=r"corpus\.jsonl is a character device"):
        list(read_records(link))


# -- 7. fields of the wrong type are refused with their line, not stored as their Python spelling --------
def test_fields_of_the_wrong_type_skip_the_record_with_its_line(pg_empty_database, tmp_path):
    path = _jsonl(tmp_path / "typed.jsonl", [
        _rec(1, abstract="A fine abstract.", year=2019),
        _rec(2, abstract=["a", "b"]),
        _rec(3, year=10**30),
        _rec(4, year="10000000"),
        _rec(5, year=1e30),
        {"id": "x:6", "source": "x", "title": 42},
        _rec(7, authors=["Doe J", {"name": "Roe R"}]),
        _rec(8, publication_date="100000-01-01"),
        _rec(9, year=True),
        _rec(10, year="2018", abstract=None, authors="Solo A"),
        _rec(11, year=2020.0),
        {"id": 123, "source": "x", "title": "A numeric id"},
    ])
    report = pg_empty_database.import_files([path])
    reasons = {s.position: s.message for s in report.skipped}
    assert reasons == {
        "line 2": "field 'abstract' is a list, expected text",
        "line 3": f"year {10**30} is not a year from 1000 to 9999",
        "line 4": "year '10000000' is not a year from 1000 to 9999",
        "line 5": "year 1e+30 is not a year from 1000 to 9999",
        "line 6": "field 'title' is a number, expected text",
        "line 7": "authors item 2 is an object, expected text",
        "line 8": "publication_date '100000-01-01' does not start with a 4-digit year",
        "line 9": "year is true/false, expected a number",
    }
    rows = _rows(pg_empty_database.dsn)
    assert set(rows) == {"x:1", "x:10", "x:11", "123"}
    assert rows["x:1"][1] == "A fine abstract." and rows["x:1"][4] == dt.date(2019, 1, 1)
    assert rows["x:10"][2] == ["Solo A"] and rows["x:11"][4] == dt.date(2020, 1, 1)
    assert not any(r[4] == dt.date(1000, 1, 1) for r in rows.values())  # 10^30 was once 1000-01-01


def test_a_skipped_record_reason_is_cut_to_a_readable_line(pg_empty_database, tmp_path):
    path = _jsonl(tmp_path / "long.jsonl", [_rec(1), {"id": "x:" + "9" * 200_000, "source": "x"}])
    report = pg_empty_database.import_files([path])
    (skipped,) = report.skipped
    assert skipped.position == "line 2" and skipped.message.startswith("record 'x:999")
    assert len(skipped.message) <= MESSAGE_LIMIT and "characters in all)" in skipped.message


def test_a_record_with_a_number_of_thousands_of_digits_is_skipped_and_the_file_goes_on(tmp_path):
    """json.loads refuses an integer of more than 4,300 digits with a plain ValueError, which once ended
    the whole import with no file or line named."""
    path = tmp_path / "digits.jsonl"
    path.write_text(json.dumps(_rec(1)) + "\n" + '{"id": ' + "1" * 5000 + ', "title": "x"}\n'
                    + json.dumps(_rec(3)) + "\n", encoding="utf-8")
    items = list(read_records(path))
    assert [type(i) for i in items] == [Document, BadRecord, Document]
    assert items[1].position == "line 2" and "not a usable record" in items[1].message
