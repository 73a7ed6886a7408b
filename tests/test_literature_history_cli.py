"""The workbench through the real CLI on the shared corpora: search → history → combine → check → report.

The known papers are the CF collection's own relevance judgements for its question 1; the expected
recall is computed here from the search's own JSON output and the corpus file, not hard-coded.
"""

from __future__ import annotations

import json

import rispy

from kmds_desktop.app.strategy import searches_overlap
from kmds_desktop.cli import main
from kmds_desktop.literature.strategy.history import SearchHistory

CF_QUESTION_ID = "1"


def _cf_question(literature_data) -> str:
    for line in (literature_data / "cf" / "queries.jsonl").read_text().splitlines():
        q = json.loads(line)
        if q["id"] == CF_QUESTION_ID:
            return q["text"]
    raise AssertionError("CF question 1 missing")


def _cf_relevant(literature_data) -> list[str]:
    lines = (literature_data / "cf" / "qrels.tsv").read_text().splitlines()[1:]
    return [cols[1] for cols in (line.split("\t") for line in lines) if cols[0] == CF_QUESTION_ID]


def _json(capsys, argv: list[str]) -> dict:
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    if argv[1] == "search":
        assert "recorded as #" in captured.err
    return json.loads(captured.out)


def test_cli_strategy_journey_on_cf_known_papers(pg_dsn, literature_data, capsys, data_home, tmp_path):
    question = _cf_question(literature_data)
    first = _json(capsys, ["literature", "search", question, "--models", "builtin:keywords",
                           "--queries-per-model", "2", "--max-rows", "200", "--dsn", pg_dsn, "--json"])
    second = _json(capsys, ["literature", "search", "cystic fibrosis sputum calcium", "--models",
                            "builtin:keywords", "--max-rows", "200", "--dsn", pg_dsn, "--json"])
    history = _json(capsys, ["literature", "history", "--json"])
    assert [s["number"] for s in history["sets"]] == [1, 2]
    assert history["sets"][0]["question"] == question and history["sets"][0]["state"] == "complete"
    assert [r["text"] for r in history["sets"][0]["rows"]] == [q["query"] for q in first["queries"]]
    rows = history["sets"][0]["rows"]
    assert [r["provenance"] for r in rows] == [q["provenance"] for q in first["queries"]]
    assert history["sets"][0]["rows"][0]["provenance"]["model"] == "builtin:keywords"
    assert history["sets"][1]["document_count"] == second["document_count"]

    ids1, ids2 = set(first["merged_ids"]), set(second["merged_ids"])
    count = _json(capsys, ["literature", "combine", "#1 OR #2", "--count", "--json"])
    assert count["count"] == len(ids1 | ids2)
    combined = _json(capsys, ["literature", "combine", "#1 OR #2", "--name", "either", "--json"])
    assert combined["number"] == 3 and combined["document_count"] == len(ids1 | ids2)
    assert main(["literature", "combine", "#1 OR OR #2"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "error: bad set expression at position 7: expected a set (#N) or '(' but found OR"

    # Known papers: CF question 1's judged documents, plus two that are in no database here.
    relevant = _cf_relevant(literature_data)
    corpus_ids = {json.loads(line)["id"] for line in (literature_data / "cf" / "corpus.jsonl").open()}
    in_db = [r for r in relevant if r in corpus_ids]
    known = tmp_path / "known.txt"
    known.write_text("\n".join(relevant) + "\ncf:999999\nPMID 999999999\n")
    check = _json(capsys, ["literature", "check", "--known", str(known), "--set", "1", "--set", "3",
                           "--dsn", pg_dsn, "--json"])
    assert {p["label"] for p in check["not_in_database"]} == {"cf:999999", "PMID 999999999"}
    assert check["in_database"] == len(in_db)
    found_by_1 = {d["external_id"] for d in first["documents"]} & set(in_db)
    found = {d["external_id"] for d in first["documents"] + second["documents"]}
    found_by_3 = found & set(in_db)
    sets = {s["label"]: s for s in check["sets"]}
    assert sets["#1"]["found"] == len(found_by_1) and sets["#3"]["found"] == len(found_by_3)
    assert sets["#3"]["recall"] == len(found_by_3) / len(in_db)
    missed = {m["external_id"] for m in check["missed"]}
    assert missed == set(in_db) - found_by_3  # misses are of the last set given: the strategy
    assert all(m["title"] and m["rows"] for m in check["missed"])
    reasons = [r for m in check["missed"] for r in m["rows"]]
    assert {r["row"] for r in reasons} == {f"#{n}.{k}" for n, q in ((1, first), (2, second))
                                           for k in range(1, len(q["queries"]) + 1)}
    assert all(r["missing_words"] or r["written_otherwise"] for r in reasons if not r["matches_query"])

    # The same papers as a RIS file (source ids in AN, as a reference manager keeps them).
    ris = tmp_path / "known.ris"
    ris.write_text(rispy.dumps([{"type_of_reference": "JOUR", "accession_number": r, "title": "x"}
                                for r in relevant]))
    text_out = main(["literature", "check", "--known", str(ris), "--set", "3", "--dsn", pg_dsn])
    out = capsys.readouterr().out
    assert text_out == 0
    recall = len(found_by_3) / len(in_db)
    assert f"#3 'either': finds {len(found_by_3)} of {len(in_db)}, recall {recall:.1%}" in out

    # The report of the combination, with the known-papers recall and the documents as RIS.
    md = tmp_path / "report.md"
    docs = tmp_path / "docs.ris"
    assert main(["literature", "report", "3", "--known", str(known), "--out", str(md),
                 "--documents", str(docs), "--dsn", pg_dsn]) == 0
    capsys.readouterr()
    text = md.read_text()
    assert question in text and "#1 OR #2" in text and f"recall {recall:.1%}" in text
    assert len(rispy.loads(docs.read_text())) == len(ids1 | ids2)
    report = _json(capsys, ["literature", "report", "3", "--json"])
    assert report["document_count"] == len(ids1 | ids2) and len(report["searches"]) == 2
    assert report["searches"][0]["rows"][0]["matches"] == first["queries"][0]["matches"]

    overlap = _json(capsys, ["literature", "overlap", "1", "--json"])
    assert len(overlap["rows"]) == len(first["queries"])
    assert overlap["union"] == len(ids1) and overlap["searches"] == [1]
    # A combination stands for the searches behind it, the same numbers as the window's Row overlap.
    both = _json(capsys, ["literature", "overlap", "3", "--json"])
    assert both["searches"] == [1, 2] and both["union"] == len(ids1 | ids2)
    assert main(["literature", "overlap", "3"]) == 0
    history = SearchHistory()
    try:
        assert capsys.readouterr().out == searches_overlap(history, [3]).text()
    finally:
        history.close()

    assert main(["literature", "history", "rename", "1", "CF calcium"]) == 0
    assert main(["literature", "history", "delete", "2"]) == 0
    capsys.readouterr()
    history = _json(capsys, ["literature", "history", "--json"])
    assert [(s["number"], s["name"]) for s in history["sets"]] == [(1, "CF calcium"), (3, "either")]
    # The combination keeps its documents after an operand is deleted, and its report says so.
    report = _json(capsys, ["literature", "report", "3", "--json"])
    assert report["document_count"] == len(ids1 | ids2)
    assert "set #2 was deleted from the history after it was combined" in report["notes"]
    assert main(["literature", "history", "show", "9"]) == 1
    assert capsys.readouterr().err.strip() == "error: there is no set #9 in the history"


def _waiting_on_a_lock(dsn: str) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                           "AND datname = current_database()").fetchone()
    return int(row[0]) if row else 0


def test_kill_9_of_the_cli_in_the_middle_of_a_run(pg_empty_database, fake_ollama, tmp_path):
    """The app killed while its queries run (held by a table lock): the run stays *incomplete*, with no
    rows and no documents, and the next search is recorded whole under the next number."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import psycopg
    from support.fake_ollama import ModelScript

    from kmds_desktop.config import Settings, save_settings
    from kmds_desktop.literature.strategy.history import SearchHistory

    corpus = tmp_path / "c.jsonl"
    record = {"id": "k:1", "source": "test", "title": "Cystic fibrosis in adults"}
    corpus.write_text(json.dumps(record) + "\n")
    pg_empty_database.import_files([corpus])
    fake_ollama.models["m"] = ModelScript(["cystic & fibrosis"])
    home = tmp_path / "home"
    home.mkdir()
    settings = Settings()
    settings.query_generation.ollama_host = fake_ollama.url
    # The query waits on the lock until it is killed, however slow a loaded machine is to see it waiting.
    settings.literature.statement_timeout_ms = 600_000
    save_settings(settings, home / "settings.json")
    dsn = pg_empty_database.dsn
    repo = Path(__file__).resolve().parent.parent
    argv = [sys.executable, "-m", "kmds_desktop", "--data-dir", str(home), "literature", "search",
            "Is cystic fibrosis different in adults?", "--models", "m", "--verbatim-models", "m",
            "--no-semantic", "--no-rerank",
            "--dsn", dsn]  # full-text rows only: nothing touches the locked table before the run
    env = {**os.environ, "PYTHONPATH": str(repo)}
    history_file = home / "history" / "search_history.sqlite3"

    def running_sets() -> int:
        if not history_file.exists():
            return 0
        history = SearchHistory(history_file)
        try:
            return sum(1 for s in history.list_sets() if s.status == "running")
        finally:
            history.close()

    with psycopg.connect(dsn) as locker:  # holds every search on the document table
        locker.execute("LOCK TABLE document IN ACCESS EXCLUSIVE MODE")
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            for _ in range(2400):  # bounded: until the run is numbered and its query waits on the lock
                if proc.poll() is not None:
                    raise AssertionError(f"the search ended early: {proc.stderr.read()[-2000:]}")
                if running_sets() == 1 and _waiting_on_a_lock(dsn) > 0:
                    break
                time.sleep(0.05)
            else:
                raise AssertionError("the search never reached its queries")
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=60)
        locker.rollback()
    assert proc.returncode == -signal.SIGKILL

    history = SearchHistory(history_file)
    (killed,) = history.list_sets()
    assert (killed.number, killed.state, killed.rows, killed.document_count) == (1, "incomplete", [], None)
    assert history.members(1) == [] and history.all_row_ids(1) == {}
    history.close()

    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "recorded as #2 in the search history" in done.stderr
    history = SearchHistory(history_file)
    states = [(s.number, s.state, len(s.rows), s.document_count) for s in history.list_sets()]
    assert states == [(1, "incomplete", 0, None), (2, "complete", 1, 1)]
    history.close()
