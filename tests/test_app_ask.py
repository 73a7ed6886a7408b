"""One ask path for both faces: ``kmds-desktop ask`` and the window's steps give the same answer.

The window checks and starts a question on the GUI thread, runs
:func:`~kmds_desktop.app.ask.answer_question` on a worker and hands the result back to its
:class:`~kmds_desktop.app.ask.AskSession`; the CLI makes the same session do it in one call. Both are
run here on the demo KB, offline and with the fake Ollama server (real ``ollama`` client), with the
real embedding model and a real ChromaDB index, and their results compared field by field (apart
from timings). No Qt.
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from support.fake_ollama import ModelScript

from kmds_desktop.app import workspace
from kmds_desktop.app.ask import (
    AskInputError,
    AskSession,
    answer_markdown,
    answer_question,
    edited_route,
    one_line,
    settings_for_ask,
)
from kmds_desktop.config import Settings, SettingsError

MODEL = "router:1b"
QUESTION = "What data quality problems were found in the body mass workflow?"


def _cli(*argv: str) -> tuple[int, Any, str]:
    """Exit code, stdout (parsed when --json) and stderr of ``kmds-desktop ARGV``."""
    from kmds_desktop.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    text = out.getvalue()
    return code, (json.loads(text) if "--json" in argv else text), err.getvalue()


def _as_the_window_does(settings: Settings, holder: workspace.IndexHolder, question: str) -> Any:
    """The window's steps: check and start on "the GUI thread", answer on a worker, then finish."""
    session = AskSession()
    kb = workspace.load_kb(workspace.installed_demo_path())
    text = session.check(question, kb)
    session.started(text, kb)
    box: dict[str, Any] = {}
    chunks: list[Any] = []
    worker = threading.Thread(target=lambda: box.update(
        result=answer_question(kb, settings, holder, text, chunk=chunks.append)))
    worker.start()
    worker.join()
    session.finished(box["result"])
    assert session.result is box["result"] and session.history == [text]
    assert "".join(c for c in chunks if isinstance(c, str)) == box["result"].answer  # streamed in full
    return box["result"]


def _comparable(data: dict[str, Any]) -> dict[str, Any]:
    data = dict(data)
    data.pop("timings", None)
    return json.loads(json.dumps(data, default=str))


def test_offline_cli_and_window_give_the_same_answer(data_home: Path, tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    demo = str(workspace.installed_demo_path())
    code, cli, err = _cli("ask", demo, QUESTION, "--backend", "offline", "--json",
                          "--persist-dir", str(index_dir), "--limit", "7")
    assert code == 0, err
    settings = settings_for_ask(Settings(), backend="offline", n_results=7)
    result = _as_the_window_does(settings, workspace.IndexHolder.in_process(index_dir), QUESTION)
    window = _comparable(result.to_dict())
    assert _comparable(cli) == window
    assert window["backend"] == "offline" and window["results"] and window["limit"] == 7
    # --markdown prints the document the window's Export > Answer as Markdown writes
    code, markdown, err = _cli("ask", demo, QUESTION, "--backend", "offline", "--markdown",
                               "--persist-dir", str(index_dir), "--limit", "7")
    assert code == 0, err
    assert markdown == answer_markdown(result)
    assert markdown.startswith(f"# {QUESTION}\n") and f"[{len(result.results)}] " in markdown
    # the demo KB was read from the user's copy, as the window opens it
    assert workspace.demo_copy_path().exists()


def test_fake_ollama_cli_and_window_give_the_same_answer(
    fake_ollama, data_home: Path, tmp_path: Path
) -> None:
    route = {"intent_class": "exploratory_search", "listing": True, "explanation": "type named",
             "filters": {"obs_type_filter": "data quality", "workflow": "Penguin_Body_Mass_Regression"}}

    def reply(prompt: str, body: dict[str, Any]) -> str:
        return json.dumps(route) if "Reply with one JSON object" in prompt else "Two problems [1] [2]."

    fake_ollama.models[MODEL] = ModelScript(replies=[reply])
    index_dir = tmp_path / "index"
    code, cli, err = _cli("ask", str(workspace.installed_demo_path()), QUESTION, "--backend", "ollama",
                          "--model", MODEL, "--ollama-host", fake_ollama.url, "--json",
                          "--persist-dir", str(index_dir))
    assert code == 0, err
    asked_by_cli = len(fake_ollama.completion_requests())
    settings = settings_for_ask(Settings(), backend="ollama", model=MODEL, ollama_host=fake_ollama.url)
    window = _comparable(_as_the_window_does(settings, workspace.IndexHolder.in_process(index_dir),
                                             QUESTION).to_dict())
    assert _comparable(cli) == window
    assert window["answer"] == "Two problems [1] [2]." and window["backend"] == "ollama"
    assert window["route"]["filters"]["obs_type_filter"] == "Data Quality Observation"
    # both faces asked the model the same things: the router, then the synthesis
    prompts = [r.prompt for r in fake_ollama.completion_requests()]
    assert asked_by_cli == 2 and prompts[:2] == prompts[2:]


def test_a_command_option_out_of_range_is_a_settings_error_naming_it() -> None:
    with pytest.raises(SettingsError, match=r"^index\.n_results: "):
        settings_for_ask(Settings(), n_results=5000)
    with pytest.raises(SettingsError, match=r"^llm\.backend: "):
        settings_for_ask(Settings(), backend="telepathy")
    base = Settings()
    changed = settings_for_ask(base, model="m:1b", ollama_host="http://127.0.0.1:1")
    assert (changed.llm.ollama_model, changed.llm.google_model) == ("m:1b", "m:1b")
    assert base.llm.ollama_model != "m:1b"  # the settings given are not changed


def test_cli_question_rules_are_the_sessions(data_home: Path) -> None:
    """An empty question is refused by the session's rule, with the session's words, before any work."""
    code, out, err = _cli("ask", str(workspace.installed_demo_path()), "   ", "--backend", "offline")
    with pytest.raises(AskInputError) as refused:
        AskSession().check("   ", object())
    assert code == 1 and out == "" and err.strip() == f"error: {refused.value}"


def test_an_edited_route_is_checked_before_the_route_model_takes_it() -> None:
    route = edited_route("exploratory_search", obs_type="  EDA ", keyword="", finding_min=2, finding_max=2)
    assert route.filters.obs_type_filter == "EDA" and route.filters.keyword is None
    assert (route.filters.finding_seq_min, route.filters.finding_seq_max) == (2, 2)
    assert route.explanation == "Route edited by the user."
    open_ended = edited_route("semantic_search", finding_min=3)
    assert (open_ended.filters.finding_seq_min, open_ended.filters.finding_seq_max) == (3, None)
    with pytest.raises(ValueError, match="the finding range 5 to 2 is empty"):
        edited_route("exploratory_search", finding_min=5, finding_max=2)
    with pytest.raises(ValueError, match="intent_class"):
        edited_route("no_such_template")


def test_one_line_is_the_first_text_line_without_markdown_marks_cut_to_width() -> None:
    assert one_line("\n\n## **Residuals** look normal\nmore", 90) == "Residuals** look normal"
    assert one_line(None, 10) == "" and one_line("- item", 10) == "item"
    assert one_line("abcdefghijkl", 6) == "abcde…"


def test_the_line_under_an_answer_never_heads_quotes_as_the_llms_answer():
    from kmds_desktop.app.ask import answered_line
    from kmds_desktop.ask.models import OrchestratorResult

    records = [{"finding": "a", "obs_type": "Data Quality", "iri": "x"}]
    llm = OrchestratorResult("A [1].", "data_quality_search", "", records, backend="ollama", synthesis="llm",
                             timings={"total": 2.5})
    assert answered_line(llm).startswith("Answered by ollama in 2.5 s; 1 record.")
    failed = OrchestratorResult("quotes", "data_quality_search", "", records, backend="ollama",
                                synthesis="extractive",
                                synthesis_error="Ollama is not reachable at 127.0.0.1",
                                timings={"total": 0.02})
    line = answered_line(failed)
    assert "Answered by" not in line and line.startswith("Quoted from the records")
    assert "ollama did not answer" in line and "not reachable" in line
    assert ".." not in answered_line(OrchestratorResult(
        "q", "x", "", records, backend="ollama", synthesis="extractive",
        synthesis_error="Cannot reach the Ollama server. Set the host in Preferences → LLM."))
    offline = OrchestratorResult("quotes", "semantic_search", "", records * 2, backend="offline",
                                 synthesis="offline")
    assert answered_line(offline) == "Quoted from the records (no LLM); 2 records."
    # the model gave no usable route but wrote the answer: why its route failed is said here (the Route
    # box points here for it), not "see Route" back
    recovered = OrchestratorResult("A [1].", "semantic_search", "", records, backend="ollama",
                                   synthesis="llm", fallback_code="llm_error",
                                   fallback_reason="the LLM failed: no JSON route found in the reply")
    line = answered_line(recovered)
    assert "no JSON route found in the reply" in line and "see Route" not in line


def test_the_stage_line_names_the_models_work_while_it_routes_and_streams(
    fake_ollama, data_home: Path, tmp_path: Path
) -> None:
    """Never "preparing the index" while the model is the one working: the route step and the
    streamed answer name the model, and the answer's words are counted as they arrive."""
    route = {"intent_class": "exploratory_search", "listing": True, "explanation": "type named",
             "filters": {"obs_type_filter": "data quality"}}
    long_answer = " ".join(f"word{i}" for i in range(40)) + " [1]."

    def reply(prompt: str, body: dict[str, Any]) -> str:
        return json.dumps(route) if "Reply with one JSON object" in prompt else long_answer

    fake_ollama.models[MODEL] = ModelScript(replies=[reply], chunk_size=12)
    settings = settings_for_ask(Settings(), backend="ollama", model=MODEL, ollama_host=fake_ollama.url)
    kb = workspace.load_kb(workspace.installed_demo_path())
    stages: list[str] = []
    result = answer_question(kb, settings, workspace.IndexHolder.in_process(tmp_path / "index"), QUESTION,
                             progress=lambda done, total, message: stages.append(message),
                             chunk=lambda piece: None)
    assert result.synthesis == "llm"
    assert f"ollama · {MODEL} is choosing how to search" in stages
    writing = [s for s in stages if s.startswith(f"ollama · {MODEL} is writing the answer")]
    assert writing and any("words so far" in s for s in writing), stages
    assert stages.index(writing[0]) > stages.index(f"ollama · {MODEL} is choosing how to search")


def test_re_running_an_unchanged_route_runs_that_route_and_an_edit_keeps_its_workflow():
    from kmds_desktop.ask.models import OrchestratorRoute

    ran = OrchestratorRoute.model_validate({
        "intent_class": "exploratory_search", "listing": True,
        "explanation": "The question names data quality.",
        "filters": {"obs_type_filter": "Data Quality Observation", "workflow": "Penguin"}})
    same = edited_route("exploratory_search", obs_type="Data Quality Observation", previous=ran)
    assert same is ran  # same records, and the Why is not "Route edited by the user."
    changed = edited_route("exploratory_search", obs_type="Data Quality Observation", keyword="null",
                           previous=ran)
    assert changed is not ran and changed.explanation == "Route edited by the user."
    assert changed.filters.workflow == "Penguin" and changed.filters.keyword == "null"


def test_a_weak_match_is_flagged_under_the_answer(data_home: Path, tmp_path: Path) -> None:
    """A question the KB does not answer gets its nearest records with a note saying they match
    weakly (window, CLI and export alike); a question it answers gets no such note."""
    from kmds_desktop.app.ask import displayed_answer

    settings = settings_for_ask(Settings(), backend="offline", n_results=5)
    kb = workspace.load_kb(workspace.installed_demo_path())
    holder = workspace.IndexHolder.in_process(tmp_path / "index")
    off = answer_question(kb, settings, holder, "What is the boiling point of tungsten in a vacuum?")
    assert off.results and off.weak_match.startswith("Weak match: the best record's similarity")
    assert off.weak_match in displayed_answer(off) and off.weak_match in answer_markdown(off)
    assert off.to_dict()["weak_match"] == off.weak_match
    from kmds_desktop.commands.ask import format_result

    assert off.weak_match in format_result(off.to_dict())  # the CLI's plain text says it too
    good = answer_question(kb, settings, holder, QUESTION)
    assert good.results and good.weak_match == ""
