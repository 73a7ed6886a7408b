"""Messages a person can read, and caps that are said where they apply.

Each test injects the fault for real: a history reference with row 0, a pipe whose reader has gone
before the command writes, a 60 KB query and ``!`` × 100,000 sent to the real PostgreSQL server, an
HTML error page served by a real HTTP server in front of the LLM clients, an invalid row run beside a
valid one and written into the search report, and a query on the shared corpora that matches more
documents than a row keeps.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kmds_desktop.cli import main
from kmds_desktop.text import MESSAGE_LIMIT

REPO_ROOT = Path(__file__).resolve().parent.parent
NOW = "2026-01-01T00:00:00+00:00"
#: "smoking" matches 125 documents of the shared corpora: more than the default 100 a row keeps.
BROAD_QUERY = "smoking"


def _true_count(db: Any, query: str) -> int:
    """The number of documents matching ``query``, counted by PostgreSQL itself (no app code)."""
    sql = "SELECT count(*) FROM document WHERE search_vector @@ to_tsquery('english', %s)"
    return int(db.run(lambda c: c.execute(sql, (query,)).fetchone()[0]))


# --- history references ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "position"), [("#1.0", 1), ("#1.00", 1), ("#1 AND #2.0", 8)])
def test_row_zero_is_not_a_history_reference(text: str, position: int) -> None:
    from kmds_desktop.literature.strategy.set_algebra import ExpressionError, parse

    with pytest.raises(ExpressionError) as caught:
        parse(text)
    assert caught.value.position == position
    assert "rows are numbered from 1" in str(caught.value) and "\n" not in str(caught.value)
    assert [t.text for t in parse("#1.1 OR #1")] == ["#1.1", "#1", "OR"]


def test_cli_combine_refuses_row_zero_in_one_line(data_home: Path, capsys) -> None:
    assert main(["literature", "combine", "#1.0", "--count"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("error: bad set expression at position 1: '#1.0' is not a row: rows are numbered "
                   "from 1, e.g. #1.1 (or #1 for the whole set)")


# --- a reader that goes away ----------------------------------------------------------------------


def _run_into_closed_pipe(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    """Run ``kmds-desktop ARGS`` with stdout a pipe whose read end is closed before the command
    starts, so its first write (or the flush at exit) meets a broken pipe, as ``| head`` does."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "KMDS_DESKTOP_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    try:
        return subprocess.run([sys.executable, "-m", "kmds_desktop", *args], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, env=env, timeout=300,
                              check=False)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("buffered", [False, True], ids=["unbuffered", "buffered"])
def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path, buffered: bool) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env_args = ["kb", "synth", str(tmp_path / "kb.xml"), "3"]
    if buffered:  # the write fits the buffer: the pipe breaks in the flush at exit
        read_end, write_end = os.pipe()
        os.close(read_end)
        env = {**os.environ, "KMDS_DESKTOP_HOME": str(home)}
        env.pop("PYTHONUNBUFFERED", None)
        try:
            done = subprocess.run([sys.executable, "-m", "kmds_desktop", *env_args], stdout=write_end,
                                  stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, env=env, timeout=300,
                                  check=False)
        finally:
            os.close(write_end)
    else:
        done = _run_into_closed_pipe(env_args, home)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr
    assert (tmp_path / "kb.xml").is_file(), "the command did its work before the reader went"


def test_topk_status_into_a_closed_pipe_has_no_traceback(pg_empty_database: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    done = _run_into_closed_pipe(["literature", "topk", "status", "--dsn", str(pg_empty_database.dsn)], home)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


# --- query text the server rejects ----------------------------------------------------------------


@pytest.mark.parametrize("text", ["!" * 100_000, "!" * 1_000 + "cancer", "(" * 60_000 + "cancer"],
                         ids=["bangs-only", "bangs-then-word", "deep-parentheses"])
def test_validate_tsquery_says_invalid_instead_of_raising(pg_empty_database: Any, text: str) -> None:
    valid, reason = pg_empty_database.validate_tsquery(text)
    assert valid is False
    assert reason and len(reason) <= MESSAGE_LIMIT and "\n" not in reason


def test_a_60_kb_query_gets_a_readable_error_everywhere(pg_database: Any) -> None:
    from kmds_desktop.app.literature import LiteratureSession
    from kmds_desktop.config import LiteratureSettings, QueryGenerationSettings
    from kmds_desktop.literature.errors import InvalidQuery, QueryAgentError
    from kmds_desktop.literature.queries.agent import QueryAgent

    query = "heart & " * 7_500 + "&"  # 60 KB; the server echoes it whole in its syntax error
    assert len(query) > 60_000
    valid, reason = pg_database.validate_tsquery(query)
    assert not valid and reason.startswith("syntax error in tsquery") and len(reason) <= MESSAGE_LIMIT
    with pytest.raises(InvalidQuery) as caught:
        pg_database.count_matches(query)
    assert len(str(caught.value)) <= 2 * MESSAGE_LIMIT and "syntax error in tsquery" in str(caught.value)

    agent = QueryAgent(pg_database)
    checked = agent.check_query(query)
    assert checked.valid is False and len(checked.error or "") <= 2 * MESSAGE_LIMIT
    with pytest.raises(QueryAgentError) as none_ran:
        agent.run_reviewed_queries([query, query.replace("heart", "lung")], fetch=False)
    assert "none of the 2 queries could run" in str(none_ran.value)
    assert len(str(none_ran.value)) <= 4 * MESSAGE_LIMIT

    session = LiteratureSession(QueryGenerationSettings(models=["builtin:keywords"]), LiteratureSettings())
    row = session.add_hand_written(query)
    session.apply_check(_check_result(row, checked))
    with pytest.raises(QueryAgentError) as refused:
        session.plan_run(NOW)
    assert "every ticked query is invalid" in str(refused.value)
    assert len(str(refused.value)) <= 3 * MESSAGE_LIMIT


def _check_result(row: Any, stat: Any) -> Any:
    from kmds_desktop.app.literature import CheckResult

    return CheckResult(row.uid, row.revision, bool(stat.valid), stat.invalid_reason or stat.normalized or "")


# --- an HTML error page in front of the LLM -------------------------------------------------------

NGINX_502 = ("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad "
             "Gateway</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n</body>\r\n</html>\r\n"
             + "<!-- a padding comment -->" * 40)


@pytest.fixture()
def html_gateway() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 that answers every request with nginx's 502 page."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _page(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            body = NGINX_502.encode()
            self.send_response(502)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _page  # noqa: N815 - http.server's names

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _clean(message: str) -> None:
    assert "the server answered with an HTML page (HTTP 502: Bad Gateway)" in message, message
    assert "<" not in message and "nginx" not in message and len(message) <= 2 * MESSAGE_LIMIT, message


def test_llm_backends_name_an_html_error_page_instead_of_quoting_it(html_gateway: str) -> None:
    from kmds_desktop.llm import OllamaBackend, OpenAIBackend
    from kmds_desktop.llm.errors import LLMError

    for backend in (OpenAIBackend(f"{html_gateway}/v1", "m", timeout=10, api_key="k"),
                    OllamaBackend(html_gateway, "m", timeout=10)):
        with pytest.raises(LLMError) as caught:
            backend.chat("hello")
        _clean(str(caught.value))


def test_the_ask_fallback_reason_names_the_html_page(html_gateway: str, kmds_data: Path,
                                                     tmp_path: Path) -> None:
    from kmds_desktop.config import LLMSettings, Settings
    from kmds_desktop.kb import load_kb
    from kmds_desktop.search import SearchOrchestrator

    kb = load_kb(kmds_data / "example_analytics_kb_app_workflow.xml")
    settings = Settings(llm=LLMSettings(ollama_host=html_gateway, ollama_model="router:1b", timeout_s=10))
    orchestrator = SearchOrchestrator(kb, persist_dir=tmp_path / "index", backend="ollama", settings=settings)
    result = orchestrator.ask("What about tickets?")
    assert result.fallback_code == "llm_error" and result.results
    _clean(result.fallback_reason or "")


# --- the search report: an invalid row was not run -----------------------------------------------


def test_report_lists_an_invalid_row_as_not_run_and_counts_only_rows_that_ran(
        pg_database: Any, tmp_path: Path) -> None:
    from kmds_desktop.literature.strategy.history import SearchHistory
    from kmds_desktop.literature.strategy.search_report import build_report, report_markdown
    from kmds_desktop.literature.strategy.workbench import SearchWorkbench

    history = SearchHistory(tmp_path / "history.sqlite3")
    try:
        bench = SearchWorkbench(history, pg_database)
        hand = {"kind": "hand-written"}
        saved = bench.run("smoking and asthma", [(BROAD_QUERY, hand), ("asthma & & (", hand),
                                                 ("asthma", hand)], max_rows=50)
        rows = history.get(saved.number).rows
        assert [r.invalid for r in rows] == [False, True, False]
        assert rows[1].outcome.startswith("not run (invalid: ") and "syntax error" in rows[1].outcome
        assert rows[1].summary().endswith(rows[1].outcome)

        report = build_report(history, saved.number)
        search = report["searches"][0]
        assert search["row_kinds"] == {"full-text": 2} and search["rows_not_run"] == 1
        assert [r["run"] for r in search["rows"]] == [True, False, True]
        text = report_markdown(report)
        assert "- Rows run: 2 full-text queries; 1 more row was not run (invalid: see the table)" in text
        assert "search of 2 rows" in text and "search of 3 rows" not in text
        invalid_line = next(line for line in text.splitlines() if line.startswith(f"| #{saved.number}.2 "))
        assert "not run (invalid: " in invalid_line and "error:" not in invalid_line
    finally:
        history.close()


# --- a row cut at the documents-per-query limit says so -------------------------------------------


def test_app_run_says_a_row_is_capped_and_keeps_the_true_count(pg_database: Any) -> None:
    from kmds_desktop.app.literature import MAX_ROWS_WHERE, LiteratureSession, execute_run
    from kmds_desktop.config import LiteratureSettings, QueryGenerationSettings

    true_count = _true_count(pg_database, BROAD_QUERY)
    limit = LiteratureSettings().max_rows
    assert true_count > limit == 100, "the shared corpora no longer give this query more than 100 matches"
    session = LiteratureSession(QueryGenerationSettings(models=["builtin:keywords"]), LiteratureSettings())
    capped = session.add_hand_written(BROAD_QUERY)
    narrow = session.add_hand_written("vitamin <-> d")
    for row in (capped, narrow):
        session.apply_check(_check_result(row, session.agent(pg_database).check_query(row.query)))
    plan = session.plan_run(NOW)
    result = execute_run(session.agent(pg_database), plan, max_rows=session.literature.max_rows)
    session.apply_run(plan, result, NOW)

    broad, small = result.queries
    assert (broad.matches, broad.ids_returned, broad.capped) == (true_count, limit, True)
    assert small.capped is False and small.ids_returned == small.matches == _true_count(pg_database,
                                                                                        "vitamin <-> d")
    assert capped.matches == true_count, "the table shows the true count, not the rows kept"
    infos = [text for level, text in session.run_messages() if level == "info"]
    assert f"Row 1: showing {limit} of {true_count} matching documents: raise the limit in " \
           f"{MAX_ROWS_WHERE}." in infos
    assert not any("row 2" in text for text in infos)


def test_cli_search_says_where_a_row_is_capped(pg_database: Any, pg_dsn: str, data_home: Path,
                                              capsys) -> None:
    code = main(["literature", "search", "smoking", "--models", "builtin:keywords", "--queries-per-model",
                 "1", "--max-rows", "20", "--no-semantic", "--no-hypothetical", "--dsn", pg_dsn])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    ran = re.search(r"ran #1 '(?P<query>[^']+)': (?P<matches>\d+) matches, (?P<returned>\d+) returned.*"
                    r"; showing (?P<shown>\d+) of (?P<of>\d+): raise the limit in Preferences → Literature "
                    r"database → Documents per query \(or --max-rows\)", captured.err)
    assert ran, captured.err
    true_count = _true_count(pg_database, ran["query"])
    assert int(ran["matches"]) == int(ran["of"]) == true_count > 20
    assert int(ran["returned"]) == int(ran["shown"]) == 20

    assert main(["literature", "history", "show", "1"]) == 0  # lists the set's first 10 and says so
    shown = capsys.readouterr().out
    assert "documents:  20" in shown
    assert "showing 10 of 20 documents: --json lists them all, 'literature report 1 --documents FILE' " \
           "exports them" in shown


def test_preferences_set_the_documents_per_query_limit(qtbot, jobs, data_home: Path) -> None:
    from kmds_desktop.config import Settings, load_settings
    from kmds_desktop.ui.preferences.dialog import PreferencesDialog

    dialog = PreferencesDialog(Settings(), jobs, settings_path=data_home / "settings.json")
    page = dialog.literature_page
    qtbot.addWidget(dialog)
    dialog.show()
    assert page.lit_max_rows.text() == "100"
    page.lit_max_rows.setText("0")
    assert dialog.save() is False
    assert not dialog.field_errors["literature.max_rows"].isHidden()
    page.lit_max_rows.setText("500")
    assert dialog.save() is True
    assert load_settings(data_home / "settings.json").literature.max_rows == 500
