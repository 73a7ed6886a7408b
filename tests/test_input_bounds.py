"""Files the user names are read bounded, typed and with clear errors, through the real CLI.

Each fault is real: a symlink to ``/dev/zero`` (read naively, it fills memory: 2 to 4 GB before the
kernel stops it), a FIFO nobody writes to (read naively, it hangs), a CSV field of 200,000 characters
(over the ``csv`` module's 131,072 limit, which aborted the whole file), a quote left open (which
swallowed the lines after it), a file over its size limit and the environment variable that raises it.
The timeouts only guard against a hang or a read that never ends; nothing here is timed.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from kmds_desktop.cli import main
from kmds_desktop.literature.screening.decisions import DecisionStore
from kmds_desktop.user_files import (
    ENV_MAX_FILE_MB,
    UserFileError,
    open_user_file,
    read_user_bytes,
    read_user_text,
)

_ZERO = Path("/dev/zero")
_RECORD_COLUMNS = ["title", "abstract", "authors", "year", "pmid"]
_CSV_DEFAULT_FIELD_LIMIT = 131_072


def _zero_link(folder: Path, name: str) -> Path:
    """A symlink called ``name`` to ``/dev/zero``: endless bytes, size 0 to ``stat``."""
    assert _ZERO.is_char_device(), "this test needs /dev/zero"
    link = folder / name
    link.symlink_to(_ZERO)
    return link


def _records_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=_RECORD_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def _row(n: int, **fields: str) -> dict[str, str]:
    return {"title": f"Record {n} on calcium", "abstract": f"Abstract {n}.", "authors": "Doe J",
            "year": "2019", "pmid": str(93000000 + n), **fields}


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


def _review_records(store: Path, review: str = "rev") -> list:
    with DecisionStore(store) as decisions:
        return decisions.records(review)


# -- 1. the three commands refuse a link to /dev/zero, at once and in one line -----------------------
@pytest.mark.timeout(120)
def test_check_known_refuses_a_link_to_dev_zero(pg_empty_database, data_home, tmp_path, capsys):
    link = _zero_link(tmp_path, "known.ris")
    code = main(["literature", "check", "--known", str(link), "--dsn", pg_empty_database.dsn])
    assert code == 1
    err = _one_error_line(capsys)
    assert str(link) in err and "character device" in err and "not a file" in err


@pytest.mark.timeout(60)
def test_screen_add_file_refuses_a_link_to_dev_zero_and_adds_nothing(data_home, tmp_path, capsys):
    store = tmp_path / "screening.sqlite3"
    good = _records_csv(tmp_path / "good.csv", [_row(1), _row(2)])
    assert main(["literature", "screen", "add", "rev", "--file", str(good), "--store", str(store)]) == 0
    capsys.readouterr()
    for name in ("refs.csv", "refs.ris"):  # both readers
        link = _zero_link(tmp_path, name)
        assert main(["literature", "screen", "add", "rev", "--file", str(link), "--store", str(store)]) == 1
        err = _one_error_line(capsys)
        assert str(link) in err and "character device" in err
    assert len(_review_records(store)) == 2  # what was there is kept, nothing was added


@pytest.mark.timeout(60)
def test_screen_import_decisions_refuses_a_link_to_dev_zero(data_home, tmp_path, capsys):
    store = tmp_path / "screening.sqlite3"
    good = _records_csv(tmp_path / "good.csv", [_row(1)])
    assert main(["literature", "screen", "add", "rev", "--file", str(good), "--store", str(store)]) == 0
    capsys.readouterr()
    link = _zero_link(tmp_path, "theirs.csv")
    assert main(["literature", "screen", "import-decisions", "rev", str(link), "--store", str(store)]) == 1
    err = _one_error_line(capsys)
    assert str(link) in err and "character device" in err and "decisions file" in err


@pytest.mark.timeout(60)
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "known.txt"
    os.mkfifo(fifo)
    with pytest.raises(UserFileError, match="named pipe"):
        read_user_text(fifo, 1000, "known-papers file")
    with pytest.raises(UserFileError, match="is a folder"):
        open_user_file(tmp_path, "records file")
    with pytest.raises(UserFileError, match="no such file"):
        open_user_file(tmp_path / "missing.csv", "records file")


# -- 2. a file over its limit: the number, and where to raise it ----------------------------------------
def test_a_file_over_its_limit_says_the_limit_and_the_variable_that_raises_it(
        data_home, tmp_path, capsys, monkeypatch):
    store = tmp_path / "screening.sqlite3"
    rows = [_row(n, abstract="calcium " * 2000) for n in range(1, 101)]  # about 1.6 MB
    big = _records_csv(tmp_path / "big.csv", rows)
    assert (1 << 20) < big.stat().st_size < (2 << 20)
    monkeypatch.setenv(ENV_MAX_FILE_MB, "1")
    assert main(["literature", "screen", "add", "rev", "--file", str(big), "--store", str(store)]) == 1
    err = _one_error_line(capsys)
    assert "larger than 1 MB, the limit for a records file" in err and ENV_MAX_FILE_MB in err
    monkeypatch.setenv(ENV_MAX_FILE_MB, "2")  # raised as the message says: read
    assert main(["literature", "screen", "add", "rev", "--file", str(big), "--store", str(store)]) == 0
    assert len(_review_records(store)) == 100
    monkeypatch.setenv(ENV_MAX_FILE_MB, "lots")
    with pytest.raises(UserFileError, match=f"{ENV_MAX_FILE_MB}='lots' is not a positive whole number"):
        from kmds_desktop.user_files import file_limit

        file_limit(10)


def test_a_bounded_read_stops_one_byte_past_the_limit(tmp_path):
    path = tmp_path / "ten.txt"
    path.write_bytes(b"0123456789")
    assert read_user_bytes(path, 10) == b"0123456789"
    with pytest.raises(UserFileError, match="larger than 9 bytes"):
        read_user_bytes(path, 9, "decisions file")
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"title\nCaf\xe9\n")
    with pytest.raises(UserFileError, match="line 2 is not UTF-8 text"):
        read_user_text(latin, 1000, "records file")


# -- 3. CSV: a 200,000-character field, an unclosed quote ------------------------------------------------
@pytest.fixture()
def csv_default_limit():
    """The ``csv`` module's field limit as a fresh process has it (131,072): an earlier reader in this
    process may have raised it, which would hide the fault."""
    before = csv.field_size_limit(_CSV_DEFAULT_FIELD_LIMIT)
    yield
    csv.field_size_limit(before)


def test_a_200000_character_csv_field_imports_with_the_rest(data_home, tmp_path, capsys, csv_default_limit):
    store = tmp_path / "screening.sqlite3"
    long_abstract = "calcium " * 25_000  # 200,000 characters, over csv's 131,072 default
    assert len(long_abstract) == 200_000 > csv.field_size_limit()
    path = _records_csv(tmp_path / "refs.csv", [_row(1), _row(2, abstract=long_abstract), _row(3)])
    assert main(["literature", "screen", "add", "rev", "--file", str(path), "--store", str(store)]) == 0
    assert "3 new records" in capsys.readouterr().out
    records = {r.pmid: r for r in _review_records(store)}
    assert set(records) == {"93000001", "93000002", "93000003"}
    assert records["93000002"].abstract == long_abstract.strip()


def test_a_long_note_in_a_decisions_file_imports_with_the_rest(data_home, tmp_path, capsys,
                                                               csv_default_limit):
    store = tmp_path / "screening.sqlite3"
    path = _records_csv(tmp_path / "refs.csv", [_row(1), _row(2)])
    assert main(["literature", "screen", "add", "rev", "--file", str(path), "--store", str(store)]) == 0
    theirs = tmp_path / "theirs.csv"
    with theirs.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["pmid", "decision", "note"])
        writer.writerow(["93000001", "include", "n" * 200_000])
        writer.writerow(["93000002", "exclude", "short"])
    capsys.readouterr()
    assert main(["literature", "screen", "import-decisions", "rev", str(theirs), "--reviewer", "ann",
                 "--store", str(store)]) == 0
    assert capsys.readouterr().out.startswith("2 decisions of ann imported")
    with DecisionStore(store) as decisions:
        theirs_now = decisions.other_decisions("rev", "ann")
    assert {k[1]: d.decision for k, d in theirs_now.items()} == {"93000001": "include", "93000002": "exclude"}
    assert len(theirs_now[("pubmed", "93000001")].note) == 200_000


def test_an_unclosed_quote_in_a_records_file_is_refused_naming_its_line(data_home, tmp_path, capsys):
    """Read leniently, the quote on line 3 swallowed lines 4 to 6 into one abstract, silently."""
    store = tmp_path / "screening.sqlite3"
    path = tmp_path / "refs.csv"
    path.write_text("title,abstract,pmid\n"
                    "First on calcium,Fine.,93000001\n"
                    'Second on calcium,"Opened and never closed,93000002\n'
                    "Third on calcium,Fine.,93000003\n"
                    "Fourth on calcium,Fine.,93000004\n"
                    "Fifth on calcium,Fine.,93000005\n", encoding="utf-8")
    assert main(["literature", "screen", "add", "rev", "--file", str(path), "--store", str(store)]) == 1
    err = _one_error_line(capsys)
    assert "lines 3–6" in err and "a quote opened on line 3 is never closed" in err
    assert "nothing was added" in err
    assert _review_records(store) == []


def test_a_quote_closed_lines_later_is_reported_and_the_rows_after_it_import(data_home, tmp_path, capsys):
    store = tmp_path / "screening.sqlite3"
    path = _records_csv(tmp_path / "refs.csv", [_row(1), _row(2), _row(3), _row(4)])
    assert main(["literature", "screen", "add", "rev", "--file", str(path), "--store", str(store)]) == 0
    theirs = tmp_path / "theirs.csv"
    theirs.write_text("pmid,decision,note\n"
                      "93000001,include,fine\n"
                      '93000002,exclude,"opened here\n'
                      "93000003,include,swallowed\n"
                      '93000004,"maybe",closed"late\n'
                      "93000004,maybe,after it\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["literature", "screen", "import-decisions", "rev", str(theirs), "--reviewer", "ann",
                 "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "1 broken line skipped (line 3)" in out
    assert "line 3: lines 3–5: broken quoting" in out and "a quote opened on line 3 runs on to line 5" in out
    with DecisionStore(store) as decisions:
        theirs_now = decisions.other_decisions("rev", "ann")
    assert {k[1]: d.decision for k, d in theirs_now.items()} == {"93000001": "include", "93000004": "maybe"}


def test_an_unclosed_quote_at_the_end_of_a_decisions_file_is_reported(data_home, tmp_path, capsys):
    store = tmp_path / "screening.sqlite3"
    path = _records_csv(tmp_path / "refs.csv", [_row(1), _row(2)])
    assert main(["literature", "screen", "add", "rev", "--file", str(path), "--store", str(store)]) == 0
    theirs = tmp_path / "theirs.csv"
    theirs.write_text('pmid,decision,note\n93000001,include,fine\n93000002,exclude,"never closed\nmore\n',
                      encoding="utf-8")
    capsys.readouterr()
    assert main(["literature", "screen", "import-decisions", "rev", str(theirs), "--reviewer", "ann",
                 "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 decision of ann imported") and "a quote opened on line 3 is never closed" in out
    assert "lines 3–4" in out
