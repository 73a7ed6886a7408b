"""Importing a folder of MEDLINE files (the PubMed baseline's shape) into a real PostgreSQL database:
name order, a ledger that makes a second run skip what the first committed, resuming after a cancel
and after SIGKILL, changed files read again, one monotone progress total, safe bounded XML parsing."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from kmds_desktop.cli import main
from kmds_desktop.literature.errors import ImportFileError
from kmds_desktop.literature.store.importers import read_records
from kmds_desktop.literature.store.loading import ImportLedger, ledger_path
from kmds_desktop.tasks import Cancelled, CancelToken

REPO = Path(__file__).resolve().parent.parent
MEDLINE = "medline16n0902.xml.gz"  # 604 citations (and one DeleteCitation)
CURRENT = "test_current_medline.xml.gz"  # 4 articles, current PubMed DTD
RECORDS = {MEDLINE: 604, CURRENT: 4}


def _folder(literature_data: Path, tmp_path: Path, names: dict[str, str] | None = None) -> Path:
    """Copies of the shared MEDLINE files (``names``: copy name -> shared file), with things a
    download folder also holds that are not imported (checksums, a hidden partial file, a subfolder)."""
    folder = tmp_path / "baseline"
    folder.mkdir()
    for copy, shared in (names or {MEDLINE: MEDLINE, CURRENT: CURRENT}).items():
        shutil.copy2(literature_data / "raw" / shared, folder / copy)
        (folder / f"{copy}.md5").write_text("not imported\n", encoding="utf-8")
    (folder / ".partial.xml.gz").write_bytes(b"half a download")
    (folder / "README.txt").write_text("PubMed baseline\n", encoding="utf-8")
    (folder / "sub").mkdir()
    shutil.copy2(literature_data / "raw" / CURRENT, folder / "sub" / "elsewhere.xml.gz")
    return folder


def _names(paths: list[str]) -> list[str]:
    return [Path(p).name for p in paths]


def _read_ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "kmds-import-read-ahead"]


def test_a_folder_imports_its_files_in_name_order_and_a_second_run_skips_them(
        pg_empty_database, literature_data, tmp_path, data_home):
    db = pg_empty_database
    folder = _folder(literature_data, tmp_path)

    first = db.import_files(folder)
    assert [Path(f.path).name for f in first.files] == [MEDLINE, CURRENT]  # name order, nothing else
    assert first.records == first.inserted == 608 and not first.skipped and first.already_imported == []
    assert db.status()["documents"] == 608

    second = db.import_files([folder])
    assert second.files == [] and second.records == 0  # nothing was parsed again
    assert _names(second.already_imported) == [MEDLINE, CURRENT]
    assert "2 files skipped as already imported" in second.summary()
    assert db.status()["documents"] == 608

    ledger = ImportLedger(ledger_path(db)).entries()
    assert {name: e["records"] for name, e in ledger.items()} == RECORDS
    assert ledger[MEDLINE]["size"] == (folder / MEDLINE).stat().st_size


def test_the_ledger_is_kept_private_in_the_data_folder_never_in_the_database(
        pg_empty_database, literature_data, tmp_path, data_home):
    folder = _folder(literature_data, tmp_path)
    pg_empty_database.import_files(folder)
    path = ledger_path(pg_empty_database)
    assert path.parent == data_home / "imports" and path.is_file()
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    os.chmod(path.parent, 0o755)  # opened up by something else: tightened again, as every app folder
    (folder / CURRENT).touch()
    pg_empty_database.import_files(folder)
    keep = 0o001 if os.geteuid() == 0 else 0  # root keeps others' traverse bit (see kmds_desktop.paths)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700 | keep
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    tables = pg_empty_database.fetch_all(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
    assert not any("import" in str(t[0]) for t in tables)


def test_a_cancelled_folder_import_loses_only_the_file_in_progress_and_resumes_there(
        pg_empty_database, literature_data, tmp_path, data_home):
    db = pg_empty_database
    folder = _folder(literature_data, tmp_path)
    first_size = (folder / MEDLINE).stat().st_size
    token = CancelToken()

    def progress(done: int, total: int | None, message: str) -> None:
        if message.startswith("1/2 files") and done > first_size:  # reading the second file
            token.cancel()

    with pytest.raises(Cancelled):
        db.import_files(folder, progress=progress, cancel=token)
    assert token.cancelled and db.status()["documents"] == 604  # the first file stays committed
    assert not _read_ahead_threads()  # the thread parsing ahead stopped with the import
    assert set(ImportLedger(ledger_path(db)).entries()) == {MEDLINE}

    resumed = db.import_files(folder)
    assert [Path(f.path).name for f in resumed.files] == [CURRENT] and resumed.inserted == 4
    assert _names(resumed.already_imported) == [MEDLINE]
    assert db.status()["documents"] == 608


def test_an_import_killed_with_sigkill_goes_on_with_the_files_it_had_not_committed(
        pg_empty_database, literature_data, tmp_path, data_home):
    """A real ``kmds-desktop literature import FOLDER`` process, killed once the ledger shows its first
    file committed; the next run of the same import reads only what the ledger does not have."""
    db = pg_empty_database
    folder = _folder(literature_data, tmp_path, {"pubmed01.xml.gz": CURRENT, "pubmed02.xml.gz": MEDLINE,
                                                 "pubmed03.xml.gz": MEDLINE})
    ledger = ImportLedger(ledger_path(db))
    env = {**os.environ, "KMDS_DESKTOP_HOME": str(data_home)}
    proc = subprocess.Popen([sys.executable, "-m", "kmds_desktop", "literature", "import", str(folder),
                             "--dsn", db.dsn, "--quiet"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    try:
        while not ledger.entries():
            assert proc.poll() is None, f"the import ended before it was killed: {proc.stdout.read()!r}"
            assert time.monotonic() < deadline, "no file was committed within 120 s"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    recorded = set(ledger.entries())
    assert "pubmed01.xml.gz" in recorded and "pubmed03.xml.gz" not in recorded  # killed mid-folder
    assert db.status()["documents"] in (4, 608)  # whole files only: none half written

    resumed = db.import_files(folder)
    assert sorted(_names(resumed.already_imported)) == sorted(recorded)
    assert [Path(f.path).name for f in resumed.files] == sorted(
        {"pubmed01.xml.gz", "pubmed02.xml.gz", "pubmed03.xml.gz"} - recorded)
    assert db.status()["documents"] == 608
    assert set(ledger.entries()) == {"pubmed01.xml.gz", "pubmed02.xml.gz", "pubmed03.xml.gz"}


def test_a_file_changed_since_its_import_is_imported_again(
        pg_empty_database, literature_data, tmp_path, data_home):
    db = pg_empty_database
    folder = _folder(literature_data, tmp_path)
    extra = folder / "extra.jsonl"
    line = ('{"id": "pubmed:99000001", "pmid": "99000001", "source": "pubmed", "title": "Sweat chloride '
            'in adults", "abstract": "A test record.", "year": 2020}\n')
    extra.write_text(line, encoding="utf-8")
    assert db.import_files(folder).inserted == 609

    later = time.time() + 5
    os.utime(folder / MEDLINE, (later, later))  # touched: same bytes, another time
    with extra.open("a", encoding="utf-8") as fh:  # appended: another size
        fh.write(line.replace("99000001", "99000002"))
    again = db.import_files(folder)
    assert [Path(f.path).name for f in again.files] == ["extra.jsonl", MEDLINE]
    assert _names(again.already_imported) == [CURRENT]
    medline = again.files[1]
    assert medline.records == medline.unchanged == 604 and medline.inserted == 0
    assert again.inserted == 1 and db.status()["documents"] == 610
    assert db.import_files(folder).files == []  # and recorded as it is now


def test_progress_is_one_line_for_the_whole_folder_against_one_monotone_total(
        pg_empty_database, literature_data, tmp_path, data_home):
    folder = _folder(literature_data, tmp_path)
    sizes = sum((folder / n).stat().st_size for n in RECORDS)
    calls: list[tuple[int, int | None, str]] = []
    pg_empty_database.import_files(folder, progress=lambda d, t, m: calls.append((d, t, m)))

    assert calls and {t for _, t, _ in calls} == {sizes}  # one total: the bytes of the files to read
    done = [d for d, _, _ in calls]
    assert done == sorted(done) and done[-1] == sizes
    line = re.compile(r"^(\d+)/2 files, ([\d,]+) records, ([\d.,]+)/([\d.,]+) MB, ([\d,]+|-) rec/s, "
                      r"ETA (\S+)$")
    # The import's own top-k step comes last, on the same full bar, in words of its own.
    step = [m for _, _, m in calls if m.startswith("fast search index: ")]
    assert step and step[-1] == "fast search index: indexed 608 of 608 documents"
    assert all(m.startswith("fast search index: ") for _, _, m in calls[-len(step):])
    parsed = [line.match(m) for _, _, m in calls[:-len(step)]]
    assert all(parsed), [m for (_, _, m), p in zip(calls, parsed, strict=False) if not p]
    files = [int(p.group(1)) for p in parsed]
    records = [int(p.group(2).replace(",", "")) for p in parsed]
    assert files == sorted(files) and files[-1] == 2
    assert records == sorted(records) and records[-1] == 608
    assert {p.group(4) for p in parsed} == {f"{sizes / 1e6:.1f}"}
    assert all(len(m) <= 78 for _, _, m in calls)  # fits the CLI's one rewritten line


def test_the_cli_imports_a_folder_and_says_how_many_files_it_skipped(
        pg_empty_database, literature_data, tmp_path, data_home, capsys):
    folder = _folder(literature_data, tmp_path)
    dsn = pg_empty_database.dsn
    assert main(["literature", "import", str(folder), "--dsn", dsn]) == 0
    out, err = capsys.readouterr()
    assert f"{folder}: 2 files imported, 608 records, 608 new" in out
    assert "0 files skipped as already imported" in out
    assert "2/2 files, 608 records" in err  # the progress line

    assert main(["literature", "import", str(folder), "--dsn", dsn, "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert f"{folder}: 0 files imported, 0 records" in out
    assert "2 files skipped as already imported into this database" in out and err == ""

    assert main(["literature", "import", str(folder), "--dsn", dsn, "--quiet", "--again"]) == 0
    out, _ = capsys.readouterr()
    assert "2 files imported, 608 records, 0 new, 0 updated, 608 unchanged" in out


def test_an_unreadable_file_stops_the_folder_and_the_next_run_goes_on_from_it(
        pg_empty_database, literature_data, tmp_path, data_home):
    db = pg_empty_database
    folder = _folder(literature_data, tmp_path,
                     {"a.xml.gz": CURRENT, "b.xml.gz": MEDLINE, "c.xml.gz": CURRENT})
    good = (folder / "b.xml.gz").read_bytes()
    (folder / "b.xml.gz").write_bytes(good[: len(good) // 2])  # a download cut short
    with pytest.raises(ImportFileError, match="b.xml.gz"):
        db.import_files(folder)
    assert db.status()["documents"] == 4 and set(ImportLedger(ledger_path(db)).entries()) == {"a.xml.gz"}
    assert not _read_ahead_threads()

    (folder / "b.xml.gz").write_bytes(good)  # downloaded again
    resumed = db.import_files(folder)
    assert [Path(f.path).name for f in resumed.files] == ["b.xml.gz", "c.xml.gz"]
    assert db.status()["documents"] == 608


def test_files_named_one_by_one_are_always_read(pg_empty_database, literature_data, tmp_path, data_home):
    folder = _folder(literature_data, tmp_path)
    pg_empty_database.import_files(folder)
    again = pg_empty_database.import_files([folder / CURRENT])
    assert again.records == again.unchanged == 4 and again.already_imported == []


def _unsafe(tmp_path: Path, name: str, doctype: str, title: str) -> Path:
    path = tmp_path / name
    path.write_text(f'<?xml version="1.0"?>\n{doctype}\n<PubmedArticleSet><PubmedArticle><MedlineCitation>'
                    f"<PMID>1</PMID><Article><ArticleTitle>{title}</ArticleTitle></Article></MedlineCitation>"
                    "</PubmedArticle></PubmedArticleSet>\n", encoding="utf-8")
    return path


def test_entity_declarations_and_external_references_are_refused_and_nothing_is_fetched(
        pg_empty_database, tmp_path, data_home):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET", encoding="utf-8")
    dtd = tmp_path / "evil.dtd"
    dtd.write_text('<!ENTITY leak "TOP SECRET">', encoding="utf-8")
    laughs = "".join(f'<!ENTITY l{i} "{("&l" + str(i - 1) + ";") * 10}">' for i in range(1, 10))
    cases = {
        "entity.xml": ('<!DOCTYPE PubmedArticleSet [<!ENTITY a "x">]>', "&a;"),
        "laughs.xml": (f'<!DOCTYPE PubmedArticleSet [<!ENTITY l0 "lol">{laughs}]>', "&l9;"),
        "xxe.xml": (f'<!DOCTYPE PubmedArticleSet [<!ENTITY leak SYSTEM "{secret.as_uri()}">]>', "&leak;"),
        "param.xml": (f'<!DOCTYPE PubmedArticleSet [<!ENTITY % p SYSTEM "{dtd.as_uri()}"> %p;]>', "&leak;"),
        "external_dtd.xml": (f'<!DOCTYPE PubmedArticleSet SYSTEM "{dtd.as_uri()}">', "t &leak;"),
    }
    folder = tmp_path / "unsafe"
    folder.mkdir()
    for name, (doctype, title) in cases.items():
        path = _unsafe(folder, name, doctype, title)
        with pytest.raises(ImportFileError, match="refused unsafe XML|undefined entity") as info:
            list(read_records(path))
        assert "TOP SECRET" not in str(info.value)
        with pytest.raises(ImportFileError):
            pg_empty_database.import_files([path])
    assert pg_empty_database.status()["documents"] == 0
    # The DOCTYPE every PubMed file has (an external DTD, never loaded) is fine.
    ok = _unsafe(folder, "pubmed.xml", '<!DOCTYPE PubmedArticleSet PUBLIC "-//NLM//DTD PubMedArticle, 1st '
                 'January 2024//EN" "https://dtd.nlm.nih.gov/ncbi/pubmed/out/pubmed_240101.dtd">', "A title")
    assert [r.title for r in read_records(ok)] == ["A title"]


def _repeated(literature_data: Path, path: Path, times: int) -> Path:
    """The 2016 MEDLINE file with its citations repeated ``times`` times in one file."""
    text = gzip.decompress((literature_data / "raw" / MEDLINE).read_bytes()).decode("utf-8")
    head, rest = text.split("<MedlineCitation ", 1)
    body, tail = ("<MedlineCitation " + rest).rsplit("</MedlineCitation>", 1)
    body += "</MedlineCitation>"
    path.write_bytes(gzip.compress((head + body * times + tail).encode("utf-8"), compresslevel=1))
    return path


def test_parsing_memory_stays_bounded_whatever_the_file_size(literature_data, tmp_path):
    def peak(path: Path) -> tuple[int, int]:
        tracemalloc.start()
        try:
            count = sum(1 for _ in read_records(path))
            return count, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small_n, small = peak(_repeated(literature_data, tmp_path / "one.xml.gz", 1))
    big_n, big = peak(_repeated(literature_data, tmp_path / "eight.xml.gz", 8))
    assert big_n == 8 * 604 + 1 and small_n == 605  # citations (and the DeleteCitation)
    assert big < small * 1.5 + 1_000_000, (small, big)  # 8x the file, not 8x the memory


def test_each_database_has_a_ledger_of_its_own(pg_empty_database, pg_server, literature_data, tmp_path,
                                               data_home):
    import psycopg

    from kmds_desktop.config import LiteratureSettings
    from kmds_desktop.literature.store.database import open_database

    folder = _folder(literature_data, tmp_path)
    assert pg_empty_database.import_files(folder).inserted == 608
    admin = pg_server.conninfo("postgres")
    name = f"kmds_test_other_{os.getpid()}"
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # generated identifier, not user input
    other = open_database(" ".join(f"{k}={v}" for k, v in pg_server.conninfo(name).items()),
                          settings=LiteratureSettings(statement_timeout_ms=30_000))
    try:
        assert ledger_path(other) != ledger_path(pg_empty_database)
        report = other.import_files(folder)
        assert report.inserted == 608 and report.already_imported == []
    finally:
        other.close()
        with psycopg.connect(**admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_ledger_kept_under_the_servers_address_is_moved_and_still_skips_its_files(
        pg_empty_database, literature_data, tmp_path, data_home):
    """The ledger's name once hashed the address the server was reached by too; such a ledger is moved
    to the database's identity once, and the folder's files it records are not read again."""
    import hashlib

    from kmds_desktop import paths
    from kmds_desktop.literature.store.topk_build import identities

    db = pg_empty_database
    folder = _folder(literature_data, tmp_path)
    db.import_files(folder)
    path = ledger_path(db)
    identity, legacy = identities(db)
    assert identity != legacy
    old = paths.sub_dir("imports") / f"{hashlib.sha256(legacy.encode()).hexdigest()[:16]}.json"
    path.rename(old)  # as an older version left it
    assert ledger_path(db) == path and path.exists() and not old.exists()
    again = db.import_files(folder)
    assert again.files == [] and sorted(_names(again.already_imported)) == sorted([CURRENT, MEDLINE])
