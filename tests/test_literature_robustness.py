"""Injection strings, cancel, statement timeout, withdrawn documents, and a server that goes away."""

from __future__ import annotations

import contextlib
import json
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from kmds_desktop.config import LiteratureSettings
from kmds_desktop.literature import open_database
from kmds_desktop.literature.errors import (
    DatabaseUnavailable,
    InvalidQuery,
    LiteratureError,
    QueryCancelled,
    QueryTimeout,
)
from kmds_desktop.literature.store.database import open_embedded
from kmds_desktop.tasks import Cancelled, CancelToken

INJECTIONS = [
    "'; DROP TABLE document; --",
    "cancer') OR 1=1 --",
    "x'); DELETE FROM sources; --",
    "$$; SELECT pg_sleep(10); $$",
    "\\'; TRUNCATE document CASCADE; --",
    "%s %(q)s {0} %%",
    "cancer & !therapy | 'x' <-> y:* ; DROP TABLE sources",
    "Robert'); DROP TABLE students;--",
]


def _counts(dsn: str) -> tuple[int, int]:
    with psycopg.connect(dsn) as conn:
        docs = conn.execute("SELECT count(*) FROM document").fetchone()[0]
        srcs = conn.execute("SELECT count(*) FROM sources").fetchone()[0]
    return docs, srcs


@contextmanager
def _table_locked(dsn: str) -> Iterator[None]:
    """Hold an exclusive lock on ``document`` so that any query on it waits (a "long statement")."""
    conn = psycopg.connect(dsn)
    conn.execute("LOCK TABLE document IN ACCESS EXCLUSIVE MODE")
    try:
        yield
    finally:
        conn.rollback()
        conn.close()


def test_injection_strings_through_every_search_entry_point(pg_database, pg_dsn):
    before = _counts(pg_dsn)
    for text in INJECTIONS:
        assert isinstance(pg_database.find_abstract_ids(text, plain=True), set)
        try:
            pg_database.find_abstract_ids_ranked(text)
        except InvalidQuery as err:
            assert "tsquery" in str(err)
        with contextlib.suppress(InvalidQuery):
            assert pg_database.count_matches(text, plain=False) >= 0
        assert pg_database.count_matches(text, plain=True) >= 0
        ok, message = pg_database.validate_tsquery(text)
        assert isinstance(ok, bool) and isinstance(message, str)
        with pytest.raises(LiteratureError):
            pg_database.find_abstract_ids("cancer", from_date=text)
        with pytest.raises(LiteratureError):
            pg_database.fetch_documents_by_ids([text])
        with pytest.raises(LiteratureError):
            open_database(dsn=text)
    with pytest.raises(InvalidQuery):
        pg_database.find_abstract_ids("cancer\x00; DROP TABLE document")
    assert _counts(pg_dsn) == before
    assert pg_database.count_matches("cancer") > 0


def test_injection_strings_in_imported_records_are_stored_verbatim(pg_empty_database, tmp_path: Path):
    path = tmp_path / "evil.jsonl"
    rows = [
        {"id": f"evil:{i}", "source": text, "title": text, "abstract": f"cancer study {text}",
         "authors": [text], "journal": text, "doi": text, "year": 2001, "pmid": None}
        for i, text in enumerate(INJECTIONS)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    report = pg_empty_database.import_files([path])
    assert report.inserted == len(INJECTIONS) and not report.skipped
    docs = pg_empty_database.fetch_documents_by_ids(pg_empty_database.find_abstract_ids("cancer & study"))
    assert sorted(d["title"] for d in docs) == sorted(INJECTIONS)
    assert {d["source_name"] for d in docs} == {t.lower() for t in INJECTIONS}  # source keys are case-folded
    assert _counts(pg_empty_database.dsn) == (len(INJECTIONS), len(INJECTIONS))


def _wait_for_lock_waiter(dsn: str) -> None:
    """Until a statement of another session waits for a lock in this database."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                               " AND datname = current_database()").fetchone()
        if row and row[0]:
            return
        time.sleep(0.05)
    raise AssertionError("no statement started waiting for the lock")


def test_cancel_current_stops_a_long_statement_from_another_thread(pg_database, pg_dsn):
    outcome: dict[str, BaseException | object] = {}

    def run() -> None:
        try:
            outcome["result"] = pg_database.find_abstract_ids("cancer")
        except BaseException as err:  # noqa: BLE001 - handed to the test thread
            outcome["error"] = err

    with _table_locked(pg_dsn):
        worker = threading.Thread(target=run)
        worker.start()
        _wait_for_lock_waiter(pg_dsn)  # the statement is inside the server, waiting for the lock
        assert worker.is_alive()
        pg_database.cancel_current()
        worker.join(30)  # the cancel ends it; the lock is still held, so nothing else could
        assert not worker.is_alive()
    assert isinstance(outcome.get("error"), QueryCancelled)
    assert isinstance(outcome["error"], Cancelled)
    assert pg_database.count_matches("cancer") > 0  # the connection is usable afterwards


def test_cancel_token_cancels_the_running_statement(pg_database, pg_dsn):
    token = CancelToken()
    index = pg_database.topk_index()
    pg_database.attach_topk_index(None)  # the statement must run in PostgreSQL (the index needs no table)
    try:
        _cancel_while_locked(pg_database, pg_dsn, token)
    finally:
        pg_database.attach_topk_index(index)
    with pytest.raises(Cancelled):
        pg_database.find_abstract_ids("cancer", cancel=token)  # already cancelled: not even started


def _cancel_while_locked(pg_database, pg_dsn, token) -> None:
    with _table_locked(pg_dsn):
        timer = threading.Timer(0.4, token.cancel)
        timer.start()
        with pytest.raises(QueryCancelled):
            pg_database.count_matches("cancer", cancel=token)
        timer.join()


def test_statement_timeout_raises_a_clear_error(pg_dsn):
    db = open_database(pg_dsn, settings=LiteratureSettings(statement_timeout_ms=300))
    try:
        # the lock is held until after the call: only the timeout can end it
        with _table_locked(pg_dsn), pytest.raises(QueryTimeout, match="statement timeout"):
            db.find_abstract_ids("cancer")
        assert db.find_abstract_ids("cancer", max_rows=3)
    finally:
        db.close()


def test_withdrawn_documents_are_excluded(pg_empty_database, tmp_path: Path):
    path = tmp_path / "w.jsonl"
    path.write_text("\n".join(json.dumps({"id": f"t:{i}", "source": "t", "title": f"malaria vaccine {i}",
                                          "abstract": None}) for i in range(5)), encoding="utf-8")
    pg_empty_database.import_files(path)
    assert pg_empty_database.count_matches("malaria") == 5
    with psycopg.connect(pg_empty_database.dsn, autocommit=True) as conn:
        conn.execute("UPDATE document SET withdrawn_date = current_date WHERE external_id IN ('t:1', 't:3')")
    ids = pg_empty_database.find_abstract_ids("malaria")
    assert len(ids) == 3 and pg_empty_database.count_matches("malaria") == 3
    titles = {d["title"] for d in pg_empty_database.fetch_documents_by_ids(ids)}
    assert titles == {"malaria vaccine 0", "malaria vaccine 2", "malaria vaccine 4"}


def test_server_stopped_mid_session_then_back(literature_data):
    # A server of its own (same code as the app's), so other tests' open connections are not broken.
    db = open_embedded(Path(tempfile.mkdtemp(prefix="kmds-stop-test-")), statement_timeout_ms=10_000)
    server = db.server
    try:
        db.import_files(literature_data / "raw/test_current_medline.xml.gz")
        assert db.count_matches("pain") > 0
        server.stop()
        assert not server.is_running()
        with pytest.raises(DatabaseUnavailable) as info:
            db.count_matches("pain")
        message = str(info.value)
        assert "lost the connection" in message and "reconnects" in message and str(server.pgdata) in message
        server.start()
        assert db.count_matches("pain") > 0
        assert db.validate_tsquery("pain")[0]
        db.close()
    finally:
        server.destroy()


def test_unreachable_external_server_is_a_clear_error():
    with pytest.raises(DatabaseUnavailable, match="cannot connect.*127.0.0.1:1"):
        open_database("host=127.0.0.1 port=1 dbname=x user=y connect_timeout=2")
