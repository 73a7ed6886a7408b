"""A multi-query run that loses queries says so (fault injection with real servers and processes).

The database goes away in the middle of a run: the embedded server is killed (API) or the CLI's
connection is terminated while its first query waits (CLI). The queries that ran keep their documents,
the lost ones are listed with their errors, the result and the search log say "incomplete", and the
CLI exits non-zero with a one-line message. Loops are bounded.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest
from support.fake_ollama import ModelScript

from kmds_desktop.config import QueryGenerationSettings
from kmds_desktop.literature import QueryAgent
from kmds_desktop.literature.queries.agent import IncompleteSearch, QueryRunStats
from kmds_desktop.literature.store.database import open_embedded

REPO = Path(__file__).resolve().parent.parent
QUESTION = "Is Pseudomonas aeruginosa infection in cystic fibrosis patients treated with antibiotics?"
QUERIES = ["cystic & fibrosis", "pseudomonas & aeruginosa", "antibiotic:*"]

_CORPUS = [
    ("c1", "Cystic fibrosis lung disease", "Airway infection in cystic fibrosis."),
    ("c2", "Pseudomonas aeruginosa in cystic fibrosis", "Chronic Pseudomonas aeruginosa infection."),
    ("c3", "Inhaled antibiotics", "Tobramycin and other antibiotics for Pseudomonas aeruginosa infection."),
    ("c4", "Antibiotic stewardship", "Antibiotics in hospitals."),
    ("c5", "Cystic fibrosis and antibiotics", "Antibiotic treatment in cystic fibrosis patients."),
]


def _corpus(path: Path) -> Path:
    path.write_text("".join(json.dumps({"id": f"test:{key}", "source": "test", "title": title,
                                        "abstract": abstract, "year": 2020}) + "\n"
                            for key, title, abstract in _CORPUS))
    return path


def _wait_gone(pid: int) -> None:
    for _ in range(1000):  # bounded: at most ~10 s
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not go away")


def _wait_until_waiting(watcher: psycopg.Connection, pid: int) -> None:
    for _ in range(1000):  # bounded: at most ~10 s
        row = watcher.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                              (pid,)).fetchone()
        if row and row[0] == "Lock":
            return
        time.sleep(0.01)
    raise AssertionError(f"backend {pid} never waited for the lock")


def _kill_database(db: Any) -> None:
    """kill -9 the embedded server and wait until it and our connection's backend are gone."""
    backend = db._conn.info.backend_pid
    postmaster = db.server.pid()
    os.kill(postmaster, signal.SIGKILL)
    _wait_gone(postmaster)
    _wait_gone(backend)


@pytest.fixture()
def private_db(tmp_path: Path):
    """An embedded server of its own (this test kills it), with a tiny corpus."""
    root = Path(tempfile.mkdtemp(prefix="kmds-incomplete-"))
    db = open_embedded(root / "postgres")
    assert db.import_files([_corpus(tmp_path / "corpus.jsonl")]).inserted == len(_CORPUS)
    yield db
    db.close()
    db.server.destroy()
    shutil.rmtree(root, ignore_errors=True)


def test_a_killed_database_mid_run_marks_the_result_incomplete(private_db):
    agent = QueryAgent(private_db)
    expected = {q: set(private_db.find_abstract_ids(q)) for q in QUERIES}

    def kill_after_first(stat: QueryRunStats) -> None:
        if stat.index == 0:
            _kill_database(private_db)

    result = agent.run_reviewed_queries(QUERIES, on_query=kill_after_first)
    assert result.incomplete
    assert [q.query for q in result.lost_queries] == [QUERIES[1]]
    assert "lost the connection" in result.lost_queries[0].error
    # nothing of what ran is lost: the first query's and the third's (after the restart) documents
    assert set(result.ids) == expected[QUERIES[0]] | expected[QUERIES[2]]
    assert {d["id"] for d in result.documents} == set(result.ids)
    message = result.incomplete_message()
    assert "1 of 3 queries could not run" in message and QUERIES[1] in message and "\n" not in message
    data = result.to_dict()
    assert data["incomplete"] is True
    assert [(f["query"], f["kind"]) for f in data["failed_queries"]] == [(QUERIES[1], "failed")]

    # an invalid query is listed but does not make a run incomplete (its text is at fault, not the run)
    fine = agent.run_reviewed_queries([QUERIES[0], "cystic & & ("])
    assert not fine.incomplete and [q.error_kind for q in fine.failed_queries] == ["invalid"]


def test_find_abstracts_multi_query_raises_after_the_documents_when_queries_were_lost(private_db):
    settings = QueryGenerationSettings(models=["builtin:keywords"], multi_model_enabled=True,
                                       queries_per_model=3)
    agent = QueryAgent(private_db, settings)
    killed: list[int] = []

    def kill_once(stat: QueryRunStats) -> None:
        if not killed:
            killed.append(stat.index)
            _kill_database(private_db)

    docs: list[dict[str, Any]] = []
    with pytest.raises(IncompleteSearch) as info:
        docs.extend(agent.find_abstracts_multi_query(QUESTION, on_query=kill_once))
    result = info.value.result
    assert result is agent.last_result and result.incomplete
    assert [d["id"] for d in docs] == result.ids and docs  # every document that was found came first
    assert "the search is incomplete" in str(info.value)



def test_cli_exits_non_zero_when_a_query_is_lost(pg_empty_database, fake_ollama, tmp_path):
    db = pg_empty_database
    assert db.import_files([_corpus(tmp_path / "corpus.jsonl")]).inserted == len(_CORPUS)
    dsn = db.dsn
    # the model (the fake Ollama server, real HTTP) proposes the three queries; generation needs no
    # database, so the first statement that reads ``document`` is the first query's search
    fake_ollama.models["probe"] = ModelScript(replies=list(QUERIES))
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps(
        {"query_generation": {"ollama_host": fake_ollama.url, "timeout_s": 10}}))
    env = {**os.environ, "KMDS_DESKTOP_HOME": str(home), "PYTHONPATH": str(REPO)}
    lock = "LOCK TABLE document IN ACCESS EXCLUSIVE MODE"
    with psycopg.connect(dsn) as first, psycopg.connect(dsn) as second, \
            psycopg.connect(dsn, autocommit=True) as watcher:
        lockers, held = [first, second], 0
        first.execute(lock)  # every statement of the CLI that reads ``document`` waits
        proc = subprocess.Popen(
            [sys.executable, "-m", "kmds_desktop", "literature", "search", QUESTION, "--models",
             "probe", "--verbatim-models", "probe", "--queries-per-model", "3", "--dsn", dsn, "--json"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            backend = None
            for _ in range(3000):  # bounded: at most ~60 s
                waiting = watcher.execute(
                    "SELECT pid, query FROM pg_stat_activity WHERE application_name = 'kmds-desktop' "
                    "AND wait_event_type = 'Lock' AND datname = current_database()").fetchall()
                search = [pid for pid, query in waiting if "search_vector @@" in query]  # a row's search
                if search:
                    backend = search[0]
                    break
                if waiting:  # a statement before the run (the status for the history): let it pass,
                    # with the other locker queued behind it so the first search waits again
                    other = 1 - held
                    queued = threading.Thread(target=lockers[other].execute, args=(lock,))
                    queued.start()
                    _wait_until_waiting(watcher, lockers[other].info.backend_pid)
                    lockers[held].rollback()
                    queued.join(timeout=60)
                    held = other
                if proc.poll() is not None:
                    break
                time.sleep(0.02)
            assert backend is not None, proc.communicate(timeout=60)
            watcher.execute("SELECT pg_terminate_backend(%s)", (backend,))  # connection lost mid-query
        finally:
            lockers[held].rollback()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err + out[:3000]
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: the search is incomplete: 1 of 3 queries could not run")
    data = json.loads(out)
    assert data["incomplete"] is True and len(data["failed_queries"]) == 1
    assert data["failed_queries"][0]["kind"] == "failed"
    ran = [q for q in data["queries"] if q["error"] is None]
    assert len(ran) == 2 and {d["id"] for d in data["documents"]} == set().union(*(q["ids"] for q in ran))


def test_cli_max_rows_is_capped_like_the_setting(pg_dsn, capsys, data_home):
    from kmds_desktop.cli import main

    code = main(["literature", "search", QUESTION, "--models", "builtin:keywords", "--max-rows", "100000000",
                 "--dsn", pg_dsn])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == ("error: --max-rows must be between 1 and 100,000 (the same limit as "
                                         "the literature.max_rows setting), not 100,000,000")
    assert main(["literature", "search", QUESTION, "--models", "builtin:keywords", "--max-rows", "0",
                 "--dsn", pg_dsn]) == 2
