"""Journeys against a real local model (issue 25, 3): the real-model tier, ``make test-real-model``.

A real GGUF model (SmolLM2-135M by default: fast, weak; it proves the plumbing, not answer quality)
answers through two servers, each through the client the app really uses:

- :mod:`support.ollama_llamacpp_server` (Ollama's API over llama.cpp) through the ``ollama`` client:
  the app's Ollama backend;
- llama.cpp's own ``python -m llama_cpp.server`` (the OpenAI API) through the app's OpenAI backend.

What each journey asserts is behaviour a user sees: a question routed by a schema-constrained reply
that validates and answered with citations into records of the KB; an answer streamed in several
chunks and a cancel that stops it; a literature round with the model under two names plus
``builtin:keywords`` whose queries PostgreSQL checks before any is offered as runnable, and that
run; a hypothetical-abstract row; a server that dies in the middle of a reply giving a clear error
while earlier results stay and the other models go on.

``scripts/real_model.sh`` installs llama-cpp-python, fetches and checks the model and sets
``KMDS_REAL_MODEL_GGUF``; without it this module is skipped (the ordinary suite has no model).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kmds_desktop.app.literature import (
    INVALID,
    VALID,
    LiteratureSession,
    check_queries,
    execute_run,
    generate_round,
)
from kmds_desktop.ask.orchestrator import SearchOrchestrator
from kmds_desktop.config import LiteratureSettings, QueryGenerationSettings, RetrievalSettings
from kmds_desktop.kb import load_kb
from kmds_desktop.llm import LLMUnreachable, OllamaBackend, OpenAIBackend
from kmds_desktop.tasks import Cancelled, CancelToken

GGUF = os.environ.get("KMDS_REAL_MODEL_GGUF", "")
pytestmark = [
    pytest.mark.real_model,
    pytest.mark.skipif(not GGUF, reason="the real-model tier: scripts/real_model.sh (make test-real-model)"),
]

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "support" / "ollama_llamacpp_server.py"
DEMO_KB = ROOT / "resources" / "demo_kb.xml"
QUESTION = "Which data quality problems were found in the penguin measurements?"
LIT_QUESTION = "Is Pseudomonas aeruginosa infection in cystic fibrosis treated with tobramycin?"
NOW = "2026-01-01T00:00:00+00:00"
#: Seconds a server may take to load the model and answer its first request.
START_TIMEOUT_S = 180
#: Seconds one request may take: a 2-core CI machine running other jobs is slow (grammar-constrained
#: decoding of SmolLM2 measured at 0.5 s per token there).
TIMEOUT_S = 300
#: Generation limit of the answers these tests ask for (tokens): enough for several chunks.
SHORT = {"num_predict": 48}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """A server process, its URL and its log (quoted when it fails)."""

    def __init__(self, proc: subprocess.Popen[str], url: str, log: Path) -> None:
        self.proc, self.url, self.log = proc, url, log

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return ""


def _start_ollama(tmp: Path, *names: str, die: tuple[int, int] | None = None) -> Served:
    """The Ollama-API server over the model under ``names``; fails loudly when it does not start."""
    log = tmp / f"ollama-{'-'.join(names)}.log"
    args = [sys.executable, str(SERVER), "--model", GGUF, "--threads", str(os.cpu_count() or 2)]
    for name in names:
        args += ["--name", name]
    if die is not None:
        args += ["--die-on-request", str(die[0]), "--die-after-chunks", str(die[1])]
    errors = log.open("w")
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=errors, text=True)
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline() if proc.stdout else ""),
                              daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    served = Served(proc, "", log)
    if not line or not line[0].startswith("LISTENING "):
        served.stop()
        pytest.fail(f"the Ollama-API server over llama.cpp did not start: {served.tail()}")
    served.url = f"http://127.0.0.1:{int(line[0].split()[1])}"
    return served


def _start_openai(tmp: Path, port: int | None = None) -> Served:
    """``python -m llama_cpp.server`` on ``port`` (default: a free one); fails loudly when it does not
    answer."""
    port = port or _free_port()
    log = tmp / f"llama_cpp_server_{port}.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", GGUF, "--model_alias", "smol",
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
         "--n_threads", str(os.cpu_count() or 2)],
        stdout=log.open("w"), stderr=subprocess.STDOUT, text=True)
    served = Served(proc, f"http://127.0.0.1:{port}/v1", log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            if httpx.get(f"{served.url}/models", timeout=2).status_code == 200:
                return served
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    served.stop()
    pytest.fail(f"llama_cpp.server did not start: {served.tail()}")


@pytest.fixture(scope="module")
def real_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(GGUF)
    assert path.is_file(), f"KMDS_REAL_MODEL_GGUF={GGUF} is not a file"
    return tmp_path_factory.mktemp("real-model")


@pytest.fixture(scope="module")
def ollama_server(real_tmp: Path) -> Iterator[Served]:
    served = _start_ollama(real_tmp, "smol-a", "smol-b")
    yield served
    served.stop()


@pytest.fixture(scope="module")
def openai_server(real_tmp: Path) -> Iterator[Served]:
    served = _start_openai(real_tmp)
    yield served
    served.stop()


@pytest.fixture(scope="module")
def demo_kb() -> Any:
    return load_kb(DEMO_KB)


@pytest.fixture(scope="module")
def demo_index(real_tmp: Path) -> Iterator[Any]:
    """One semantic index for both backends' journeys (the second finds the KB already indexed)."""
    from kmds_desktop.index import SemanticIndex

    index = SemanticIndex(real_tmp / "index")
    yield index
    index.close()


@pytest.fixture(scope="module")
def cf_database(pg_server: Any, literature_data: Path) -> Iterator[Any]:
    """A database of its own with the CF corpus (1,239 records: quick to import)."""
    import secrets as pysecrets

    import psycopg

    from kmds_desktop.literature.store.database import open_database

    name = f"kmds_real_{pysecrets.token_hex(4)}"
    admin = pg_server.conninfo("postgres")
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # generated identifier, not user input
    info = pg_server.conninfo(name)
    db = open_database(" ".join(f"{k}={v}" for k, v in info.items()),
                       settings=LiteratureSettings(statement_timeout_ms=30_000))
    report = db.import_files([literature_data / "cf" / "corpus.jsonl"])
    assert report.records > 1000, report.summary()
    yield db
    db.close()
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _ask_journey(backend: Any, kb: Any, index: Any) -> None:
    """Routed through a schema-constrained reply that validates, answered by the model, every
    citation and every record pointing into the KB; streamed in chunks; a cancel stops it."""
    orchestrator = SearchOrchestrator(kb, index=index, llm_fn=backend)
    result = orchestrator.ask(QUESTION)
    assert result.route_format == "schema", "the router was asked under the route's JSON schema"
    assert result.fallback_code not in ("invalid_route", "unknown_intent"), result.fallback_reason
    assert result.proposed_route is not None, "the constrained reply validated as a route"
    assert result.synthesis == "llm", result.synthesis_error
    assert result.answer.strip() and result.results
    iris = {o.iri for o in kb.observations}
    assert all(r["iri"] in iris for r in result.results)
    for n in map(int, re.findall(r"\[(\d+)\]", result.answer)):
        assert 1 <= n <= len(result.results) and result.citations[n] in iris

    stream = orchestrator.ask_stream(QUESTION, route=result.route)  # the route again: no second routing
    chunks = list(stream)
    assert len(chunks) > 1 and stream.result.synthesis == "llm"

    token = CancelToken()
    received: list[str] = []
    started = time.perf_counter()
    with pytest.raises(Cancelled):
        for chunk in backend.stream("Write a long story about penguins.", None, {"num_predict": 2000}, token):
            received.append(chunk)
            if len(received) == 3:
                token.cancel()
    assert len(received) == 3, "nothing arrives after the cancel"
    assert time.perf_counter() - started < 30
    assert backend.chat("Say hello.").strip(), "the server answers again after a cancel"


def test_ollama_question_routed_answered_streamed_and_cancelled(ollama_server, demo_kb, demo_index) -> None:
    backend = OllamaBackend(ollama_server.url, "smol-a", timeout=TIMEOUT_S, options=SHORT)
    _ask_journey(backend, demo_kb, demo_index)


def test_openai_question_routed_answered_streamed_and_cancelled(openai_server, demo_kb, demo_index) -> None:
    backend = OpenAIBackend(openai_server.url, "smol", timeout=TIMEOUT_S, api_key="", options=SHORT)
    _ask_journey(backend, demo_kb, demo_index)


def _literature_journey(models: list[str], db: Any, **settings: Any) -> LiteratureSession:
    """A round with ``models`` (two attempts each, so two temperatures per name), every row checked
    in PostgreSQL before it is runnable, the valid ones run; returns the session."""
    settings.setdefault("verbatim_query_models", [m for m in models if not m.startswith("builtin:")])
    qg = QueryGenerationSettings(multi_model_enabled=True, models=models, queries_per_model=2,
                                 temperature=0.1, timeout_s=TIMEOUT_S, **settings)
    session = LiteratureSession(qg, LiteratureSettings(max_rows=20),
                                RetrievalSettings(semantic_row=False, hypothetical_row=False))
    session.start_round(LIT_QUESTION, NOW)
    generate_round(session.agent(db), LIT_QUESTION, on_attempt=session.accept_attempt)
    session.finish_round()
    attempts = session.round.attempts
    assert [a.model for a in attempts] == [m for m in models for _ in range(2)]
    for model in models:
        assert sorted({a.temperature for a in attempts if a.model == model}) == [0.1, 0.3]
    for a in attempts:
        assert a.reply_format == ("" if a.model.startswith("builtin:") else "schema"), a
    items = session.take_checks()
    assert {r.uid for r in session.included_rows()} <= {i.uid for i in items}, "checked before it runs"
    check_queries(session.agent(db), items, chunk=session.apply_check)
    assert all(r.validity in (VALID, INVALID) for r in session.rows)
    for row in session.rows:
        if row.validity == INVALID:
            session.set_included(row.uid, False)
    assert any(r.validity == VALID and r.model == "builtin:keywords" for r in session.rows)
    plan = session.plan_run(NOW)
    result = execute_run(session.agent(db), plan, max_rows=20)
    session.apply_run(plan, result, NOW)
    assert all(stat.ok for stat in result.queries), [s.error for s in result.queries]
    assert result.documents, "the valid queries found documents"
    log = session.search_log()
    assert {a["reply_format"] for a in log["attempts"] if not a["model"].startswith("builtin:")} == {"schema"}
    return session


def test_ollama_literature_round_two_names_and_builtin(ollama_server, cf_database) -> None:
    session = _literature_journey(["smol-a", "smol-b", "builtin:keywords"], cf_database,
                                  ollama_host=ollama_server.url)
    assert {a.server for a in session.round.attempts if not a.model.startswith("builtin:")} == {
        f"ollama {ollama_server.url}"}


def test_openai_literature_round_and_hypothetical_row(openai_server, ollama_server, cf_database) -> None:
    session = _literature_journey(["openai:smol", "smol-b", "builtin:keywords"], cf_database,
                                  openai_base_url=openai_server.url, ollama_host=ollama_server.url)
    servers = {a.model: a.server for a in session.round.attempts}
    assert servers["openai:smol"] == f"openai {openai_server.url}"
    assert servers["smol-b"] == f"ollama {ollama_server.url}"
    agent = session.agent(cf_database)
    abstract = agent.hypothetical_abstract(LIT_QUESTION)
    assert len(abstract.split()) >= 5
    row = session.add_hypothetical(abstract, agent.llm_model() or "")
    assert row.kind == "hypothetical" and row.model == "openai:smol" and row.query == abstract
    assert row.provenance()["model"] == "openai:smol"


def test_ollama_server_killed_mid_reply(real_tmp, cf_database) -> None:
    """The server dies in the middle of its second reply: a clear error, the first attempt kept,
    the built-in generator goes on."""
    doomed = _start_ollama(real_tmp, "doomed", die=(2, 2))
    try:
        qg = QueryGenerationSettings(multi_model_enabled=True, models=["doomed", "builtin:keywords"],
                                     queries_per_model=3, ollama_host=doomed.url, timeout_s=TIMEOUT_S,
                                     verbatim_query_models=["doomed"])  # one call per attempt
        session = LiteratureSession(qg, LiteratureSettings(max_rows=20),
                                    RetrievalSettings(semantic_row=False, hypothetical_row=False))
        session.start_round(LIT_QUESTION, NOW)
        generate_round(session.agent(cf_database), LIT_QUESTION, on_attempt=session.accept_attempt)
        session.finish_round()
        first, second, third, *builtin = session.round.attempts
        assert first.error is None or "usable query" in first.error, first.error
        assert second.error_kind == "LLMUnreachable"
        assert "dropped the connection in the middle of the reply" in (second.error or "")
        assert third.skipped, "a server that went away is not asked again in this round"
        assert [b.model for b in builtin] == ["builtin:keywords"] * 3 and all(b.ok for b in builtin)
        assert doomed.proc.wait(10) == 3, "the server really died"
        if first.ok:
            assert any(r.model == "doomed" and r.query == first.query for r in session.rows), "nothing lost"
    finally:
        doomed.stop()


def test_openai_server_killed_mid_reply(real_tmp) -> None:
    served = _start_openai(real_tmp)
    try:
        backend = OpenAIBackend(served.url, "smol", timeout=TIMEOUT_S, api_key="")
        received: list[str] = []
        with pytest.raises(LLMUnreachable) as info:
            for chunk in backend.stream("Write a long story about penguins.", options={"num_predict": 2000}):
                received.append(chunk)
                if len(received) == 2:
                    served.proc.kill()
        assert "dropped the connection in the middle of the reply" in str(info.value)
        assert served.url in str(info.value)
        assert len(received) >= 2, "what had arrived is still there"
    finally:
        served.stop()


# -- the model earns its place (issue 34) ---------------------------------------------------------------

#: Questions worded as researchers word them, none naming a finding number, a workflow or a keyword the
#: model could take from it: any such filter in the model's route is its own invention. The last two say
#: what both workflows share ("the penguin work"), which tempts a model asked for a short route (filters
#: only where the question states them) to name one workflow anyway.
PLAIN_QUESTIONS = (
    "What problems were found in the data?",
    "Which model was selected and why?",
    "How were the features prepared before modelling?",
    "What did the exploratory analysis show?",
    "Which data quality problems were found in the penguin measurements?",
    "List the feature engineering steps of the penguin work",
    "Show the modelling assumptions of the penguin project",
)


@pytest.mark.timeout(1200)
def test_a_filter_the_model_invents_is_dropped_and_the_note_shown(ollama_server, demo_kb, demo_index) -> None:
    """The real model routes plain questions: what runs never carries a filter the question does not ask
    for, and every question is answered. Where the model adds such a filter, it is dropped before the
    search runs and the text the user reads says which filter was dropped and why. Asked for a short route
    (filters only where the question states them), the model may add none on these questions: then the
    drop-and-note path is the guard tests' (tests/test_ask_guard.py, a scripted model), and this journey
    proves the real model's routes ran with no invented filter."""
    from kmds_desktop.commands.ask import format_result

    backend = OllamaBackend(ollama_server.url, "smol-a", timeout=TIMEOUT_S, options=SHORT)
    orchestrator = SearchOrchestrator(demo_kb, index=demo_index, llm_fn=backend)
    guarded = None
    routed_by_model = 0
    for question in PLAIN_QUESTIONS:
        result = orchestrator.retrieve(question)
        assert result.results, question
        routed_by_model += result.model_route is not None
        ran = result.route.filters if result.route is not None else None
        if ran is not None:  # what ran carries no filter the question did not ask for
            assert ran.finding_seq_min is None and ran.finding_seq_max is None, (question, ran)
            assert ran.keyword is None or ran.keyword.lower() in question.lower(), (question, ran)
        if any(n.startswith("Dropped the model's filter") for n in result.route_notes):
            guarded = result
            break
    assert routed_by_model, "the real model's route was used for none of the plain questions"
    if guarded is None:  # the short route invented no filter on any of them
        return
    assert guarded.model_route is not None  # the model's own route, kept to be shown
    orchestrator.synthesize(guarded)
    assert guarded.answer.strip()
    text = format_result(guarded.to_dict())
    notes = [n for n in guarded.route_notes if n.startswith("Dropped the model's filter")]
    assert all(f"Guard: {n}" in text for n in notes), text


@pytest.mark.timeout(900)
def test_automatic_finds_a_llama_cpp_server_on_its_port_and_asks_first(real_tmp, demo_kb, demo_index) -> None:
    """llama.cpp's own server on its usual port (8080, or a free port named as llama.cpp's where 8080 is
    taken on this machine): "Automatic" finds it by its model list alone, asks "Found llama.cpp at … — use
    it?", and sends it no prompt until the user says yes; then questions are answered by it."""
    from kmds_desktop.app.llm_status import confirm_server
    from kmds_desktop.app.preferences import probe_llm_backend
    from kmds_desktop.config import LLMSettings
    from kmds_desktop.llm.factory import choose_backend

    port = 8080
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            port = _free_port()
    served = _start_openai(real_tmp, port=port)
    servers = (("llama.cpp", port),)
    try:
        llm = LLMSettings(backend="auto", ollama_host=f"http://127.0.0.1:{_free_port()}", openai_model="smol")
        found = probe_llm_backend(llm, openai_servers=servers)
        assert found.candidate is not None and found.text.startswith("offline")
        assert found.candidate.question == f"Found llama.cpp at 127.0.0.1:{port} — use it?"
        assert choose_backend(llm, openai_servers=servers).name == "offline"  # not used before the yes
        assert "/v1/models" in served.tail() and "/chat/completions" not in served.tail(), "no prompt yet"

        llm = confirm_server(llm, found.candidate.base_url)
        confirmed = probe_llm_backend(llm, openai_servers=servers)
        assert confirmed.text == f"openai · smol at 127.0.0.1:{port} (ready)"
        choice = choose_backend(llm, openai_servers=servers)
        assert choice.name == "openai" and f"using llama.cpp at {found.candidate.base_url}" in choice.note
        result = SearchOrchestrator(demo_kb, index=demo_index, llm_fn=choice.llm).ask(QUESTION)
        assert result.synthesis == "llm" and result.answer.strip(), result.synthesis_error
        assert "/chat/completions" in served.tail(), "the question went to the server once confirmed"
    finally:
        served.stop()


@pytest.mark.timeout(1200)
def test_scores_that_do_not_separate_keep_the_classifiers_order_and_say_so(ollama_server, tmp_path) -> None:
    """The reviewer's includes and excludes rest on what the records do not say (every record reads the
    same): whatever the real model scores, its scores cannot separate them. A scoring run scores the
    decided records first, finds that, leaves the scores out of the order (the queue is the classifier's
    as before) and says so in the run's line and the order bar's."""
    from kmds_desktop.app.screening import ScreeningSession
    from kmds_desktop.app.screening_scores import score_undecided
    from kmds_desktop.literature.screening.decisions import DecisionStore
    from kmds_desktop.literature.screening.records import ScreeningRecord

    store = DecisionStore(tmp_path / "screening.sqlite3")
    session = ScreeningSession.open(store, "r", question=LIT_QUESTION, background=False)
    session.add_records([
        ScreeningRecord(source="cf", external_id=str(i), rank=i + 1,
                        title="Follow-up of patients with cystic fibrosis",
                        abstract="Patients with cystic fibrosis were followed for one year in a clinic.")
        for i in range(14)
    ], origin="#1")
    try:
        for i in range(10):
            session.go_to(("cf", str(i)))
            if i % 2:
                session.include()
            else:
                session.exclude("wrong population")
        before = [session.records[i].key for i, _how in session.queue(4)]
        backend = OllamaBackend(ollama_server.url, "smol-a", timeout=TIMEOUT_S)
        summary = score_undecided(session, backend, ["smol-a"])
        assert summary.scored + len(summary.notes) == 14 and summary.scored >= 10, summary.notes
        check = next(c for c in session.score_checks() if c.model == "smol-a")
        assert check.enough and check.separates is False, check
        assert session.scores_in_model is False and session.features.score_columns == 0
        assert [session.records[i].key for i, _how in session.queue(4)] == before
        line = session.score_check_line()
        assert line.startswith("smol-a") and "do not separate includes from excludes" in line
        assert "left out of the order" in line and "left out of the order" in summary.line()
        assert len(session.decisions) == 10  # scores never decide
    finally:
        session.close()
        store.close()
