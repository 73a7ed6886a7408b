"""Asking the open knowledge base: the question, the answer it got, the history, and what a change of KB
means for an answer on screen.

Rules (the window and a script follow the same ones):

- A question needs text and an open KB; otherwise :class:`AskInputError` says what to do.
- The answer belongs to the KB it was asked of. Opening another KB (or the same file again) clears
  it: its records and citations would point into a KB that is no longer open. Editing the open KB
  keeps it but marks it *stale*: a cited record may have changed or been deleted since.
- The history keeps the last :data:`HISTORY_LIMIT` questions, newest last, without repeats.

:func:`answer_question` is the slow part (route, search, stream an answer), for a worker; the window
calls :meth:`AskSession.check` and :meth:`AskSession.started` on the GUI thread, runs it on a worker,
then calls :meth:`AskSession.finished`. A script or the CLI (``kmds-desktop ask``) does the same
steps in one call, :meth:`AskSession.answer`, so both faces give the same answer to the same question.
A command's options (``--backend``, ``--model``, ``--ollama-host``, ``--limit``) become settings
with :func:`settings_for_ask`, the settings the window's Preferences write. The semantic index is
opened on first need through the session's :class:`~kmds_desktop.app.workspace.IndexHolder` (under
its lock).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kmds_desktop.app.events import Observable
from kmds_desktop.app.preferences import api_address_error, server_address_error
from kmds_desktop.app.workspace import IndexHolder
from kmds_desktop.config import Settings, SettingsError, describe_validation_error
from kmds_desktop.text import plural

HISTORY_LIMIT = 100
#: The chunk that carries the records as soon as they are known (before the answer's text).
RETRIEVED = "retrieved"
#: The chunk that carries the finished answer rendered (by ``render``) on the worker.
RENDERED = "rendered"


#: What an :class:`AskSession` announces (:mod:`kmds_desktop.app.events`): a question went out; its records
#: were found; its answer arrived; the answer was cleared (another KB) or marked stale (the KB was edited).
ASKED = "ask.asked"
FOUND = "ask.found"
ANSWERED = "ask.answered"
CLEARED = "ask.cleared"
STALE = "ask.stale"


class AskInputError(ValueError):
    """The question cannot be asked yet (no text, no KB): the message says what to do."""


@dataclass
class AskSession(Observable):
    """The question/answer state of one window (or script); it announces each change (:data:`ASKED`,
    :data:`FOUND`, :data:`ANSWERED`, :data:`CLEARED`, :data:`STALE`)."""

    history: list[str] = field(default_factory=list)
    question: str = ""
    result: Any = None
    #: the running answer's route and records, once retrieved (its answer not written yet)
    retrieved: Any = None
    stale: bool = False
    _kb: Any = field(default=None, repr=False)  # the KB open now (as the session was last told)
    _asked_of: Any = field(default=None, repr=False)  # the KB the last question was asked of

    def check(self, question: str, kb: Any) -> str:
        """The question to ask, or :class:`AskInputError` saying what is missing."""
        text = (question or "").strip()
        if not text:
            raise AskInputError("Type a question first.")
        if kb is None:
            raise AskInputError("Open a knowledge base first (File > Open).")
        return text

    def started(self, question: str, kb: Any) -> None:
        """A question went out for ``kb``: it joins the history; the previous answer is gone."""
        self.question = question
        self.result = None
        self.retrieved = None
        self.stale = False
        self._kb = self._asked_of = kb
        self.remember(question)
        self.announce(ASKED)

    def found(self, retrieved: Any) -> None:
        """The running answer's route and records are known (its text is still being written)."""
        self.retrieved = retrieved
        self.announce(FOUND)

    def finished(self, result: Any) -> None:
        self.result = result
        self.announce(ANSWERED)

    @property
    def kb(self) -> Any:
        """The KB open now, as the session was last told (:meth:`kb_changed`, :meth:`started`)."""
        return self._kb

    def kb_name(self) -> str:
        """The open KB's file name ("" when none is open or it has no path)."""
        return Path(str(getattr(self._kb, "path", "") or "")).name

    def for_open_kb(self) -> bool:
        """Whether the last question (its answer running or shown) was asked of the KB open now.
        When another KB was opened meanwhile, what still arrives for it is dropped, not shown."""
        return self._asked_of is self._kb

    def answer(
        self,
        kb: Any,
        settings: Any,
        index_holder: IndexHolder,
        question: str,
        route: Any = None,
        *,
        progress: Any = None,
        cancel: Any = None,
    ) -> Any:
        """Ask ``question`` of ``kb`` and wait for the answer: the window's steps in one call.

        For a script or the CLI, on the calling thread. Raises :class:`AskInputError` like
        :meth:`check`; the answer is kept as :attr:`result`, the question joins the history.
        """
        text = self.check(question, kb)
        self.started(text, kb)
        result = answer_question(kb, settings, index_holder, text, route, progress=progress, cancel=cancel)
        self.finished(result)
        return result

    def remember(self, question: str) -> None:
        """``question`` joins the history (see :func:`remember_question`)."""
        remember_question(self.history, question)

    def kb_changed(self, kb: Any, *, edited: bool = False) -> str:
        """The open KB changed: ``"cleared"`` (another KB: the answer is gone), ``"stale"`` (the same
        KB was ``edited``: the answer stays, marked), or ``""`` (nothing asked yet, or the same KB
        unchanged: saved, or the settings changed)."""
        if self._kb is None or (self.result is None and not self.question):
            self._kb = kb
            return ""
        if kb is not self._kb:
            self.result = None
            self.retrieved = None
            self.question = ""
            self.stale = False
            self._kb = kb
            self.announce(CLEARED)
            return "cleared"
        if not edited:
            return ""
        self.stale = True
        self.announce(STALE)
        return "stale"


def remember_question(history: list[str], question: str, limit: int = HISTORY_LIMIT) -> list[str]:
    """Put ``question`` last in ``history`` (in place; returned too): no repeats, no blank questions,
    at most ``limit`` kept. The session's history and the question box's Up/Down both follow it."""
    question = (question or "").strip()
    if question:
        if question in history:
            history.remove(question)
        history.append(question)
        del history[:-limit]
    return history


_CITATION = re.compile(r"\[(\d{1,3})\]")
_ITEM = r"[ \t]*(?:[-*+]|\d+\.)[ \t]"
# A text line is "anything up to its last non-space, then blanks": written as ``.*\S.*``, a long
# line that is not followed by a list item backtracks quadratically (60 ms for a 3 kB answer,
# on the GUI thread); this form is linear and matches the same lines.
_LIST_AFTER_TEXT = re.compile(rf"(?m)^((?!{_ITEM})[^\n]*\S[^\S\n]*)\n({_ITEM})")
_TEXT_AFTER_LIST = re.compile(rf"(?m)^({_ITEM}.*)\n((?!{_ITEM})\S)")


def repair_answer_markdown(text: str) -> str:
    """The answer's Markdown with a blank line where a list starts or ends right beside a line of
    text: LLMs (and the extractive answer) often write a list under a line, and Markdown needs the
    blank line there, or the items run into the paragraph."""
    text = _LIST_AFTER_TEXT.sub(r"\1\n\n\2", text or "")
    return _TEXT_AFTER_LIST.sub(r"\1\n\n\2", text)


def link_citations(body_html: str, n_results: int) -> str:
    """``body_html`` with each ``[n]`` that names one of the ``n_results`` records turned into a
    ``cite:n`` link (an out-of-range number stays text: there is no record to show)."""

    def link(match: re.Match[str]) -> str:
        n = int(match.group(1))
        if 1 <= n <= n_results:
            return f'<a href="cite:{n}" title="Show record {n} in the KB browser">[{n}]</a>'
        return match.group(0)

    return _CITATION.sub(link, body_html)


def answer_html(text: str, n_results: int, to_html: Callable[[str], str]) -> str:
    """The answer as HTML: Markdown repaired, converted by ``to_html`` (the view's converter),
    citations linked to their records."""
    return link_citations(to_html(repair_answer_markdown(text)), n_results)


def citation_number(url: str) -> int | None:
    """The record number of a ``cite:n`` link (None for any other link)."""
    scheme, _, rest = (url or "").partition(":")
    if scheme != "cite" or not rest.strip().isdigit():
        return None
    return int(rest)


#: Added to the line under an answer whose KB was edited since it was asked (or while it was written).
STALE_NOTE = " The knowledge base was edited since: a cited record may have changed."


def answered_line(result: Any) -> str:
    """The line under the answer once it is complete: who answered, how long it took, how many
    records, and what it fell back to when it did."""
    timing = result.timings.get("total") if getattr(result, "timings", None) else None
    took = f" in {timing:.1f} s" if timing else ""
    records = plural(len(result.results), "record")
    synthesis = getattr(result, "synthesis", "")
    if synthesis == "extractive":
        # The LLM did not write this answer (it failed): never head the quotes as its answer.
        why = getattr(result, "synthesis_error", "") or "it failed"
        line = (f"Quoted from the records{took} ({records}): {result.backend} did not answer — "
                f"{one_line(why, 160).rstrip('.')}.")
    elif synthesis == "offline" or result.backend == "offline":
        line = f"Quoted from the records{took} (no LLM); {records}."
    else:
        line = f"Answered by {result.backend}{took}; {records}."
    model_wrote_it = synthesis not in ("extractive", "offline")
    if result.fallback_reason and getattr(result, "fallback_code", None) == "llm_error" and model_wrote_it:
        # the model failed to route but wrote the answer: why it failed is said here, once (the Route
        # box points here for it)
        line += (f" Fell back to {fallback_search(result)}: "
                 f"{one_line(result.fallback_reason, 160).rstrip('.')}.")
    elif result.fallback_reason:
        line += f" Fell back to {fallback_search(result)} (see Route)."
    if getattr(result, "speed_note", ""):
        line += f" {result.speed_note}"
    return line


def fallback_search(result: Any) -> str:
    """What ran when the route chosen could not: the offline router's route (a model's route failed,
    see :meth:`~kmds_desktop.ask.orchestrator.SearchOrchestrator.retrieve`) or the free-text search."""
    route = getattr(result, "route", None)
    return "the offline router" if getattr(route, "from_offline_router", False) else "semantic search"


def one_line(text: Any, width: int) -> str:
    """``text``'s first non-empty line without Markdown list/heading marks, cut to ``width`` with "…"."""
    line = next((ln.strip() for ln in str(text or "").splitlines() if ln.strip()), "")
    line = line.lstrip("#*- ").strip()
    return line if len(line) <= width else line[: width - 1] + "…"


#: :func:`edited_route`'s default ``workflow``: keep the previous route's.
KEEP_WORKFLOW = object()
#: The Route box's Workflow choice that does not narrow the records to one workflow.
ANY_WORKFLOW = "any"


def workflow_choices(kb: Any) -> list[str]:
    """The workflows a route may be narrowed to, by name, in the KB's order (none without a KB): the
    Route box offers these and "any"."""
    if kb is None:
        return []
    names = [str(w.name) for w in getattr(kb, "workflows", []) if getattr(w, "name", "")]
    return list(dict.fromkeys(names))


def edited_route(
    intent_class: str,
    *,
    obs_type: str | None = None,
    keyword: str | None = None,
    finding_min: int | None = None,
    finding_max: int | None = None,
    previous: Any = None,
    workflow: str | None | object = KEEP_WORKFLOW,
) -> Any:
    """The route a user edited (template, filters), validated by the orchestrator's route model;
    ``previous`` itself (its explanation and listing kept) when nothing was changed, so "Re-run on
    this route" without an edit runs the same route and gives the same records.

    ``workflow``: the workflow the records must belong to (None or "": any); by default the
    previous route's (a caller with no workflow field keeps what the router chose).

    Why here: the model accepts a range whose first finding is after its last, and the template
    then finds nothing with no word of why; the check comes first so the user reads the cause.
    Blank text filters and absent bounds (None) mean "no filter". Raises ValueError (pydantic's
    ValidationError is one) naming the problem.
    """
    # why: start-up time: the window imports this module at start, that one only when needed
    from kmds_desktop.ask.models import OrchestratorRoute

    if finding_min is not None and finding_max is not None and finding_min > finding_max:
        raise ValueError(
            f"the finding range {finding_min} to {finding_max} is empty: the first number must not be larger"
        )
    edited = OrchestratorRoute.model_validate(
        {
            "intent_class": intent_class,
            "filters": {
                "obs_type_filter": (obs_type or "").strip() or None,
                "keyword": (keyword or "").strip() or None,
                "finding_seq_min": finding_min,
                "finding_seq_max": finding_max,
                "workflow": ((previous.filters.workflow if previous is not None else None)
                             if workflow is KEEP_WORKFLOW else (str(workflow or "").strip() or None)),
            },
            "explanation": "Route edited by the user.",
        }
    )
    if previous is not None and previous.intent_class == edited.intent_class and (
            previous.filters.model_dump() == edited.filters.model_dump()):
        return previous
    return edited


def displayed_answer(result: Any) -> str:
    """The answer as the window, the CLI and the export show it: with the note on its citations
    (the records an LLM's answer drew on, or that it cited none), so an uncited answer never reads
    as cited."""
    notes = [n for n in (getattr(result, "weak_match", ""), getattr(result, "citation_note", "")) if n]
    if not notes or not result.answer:
        return result.answer
    return result.answer + "".join(f"\n\n*{n}*" for n in notes)


def answer_markdown(result: Any) -> str:
    """The answer as a Markdown document: the question, the answer, the numbered records it cites
    (``[n]`` is record n), the route and the backend. The window's *Export answer as Markdown* and
    ``kmds-desktop ask --markdown`` write this same document."""
    r = result
    lines = [f"# {r.question}", "", displayed_answer(r), "", "## Records", ""]
    for i, row in enumerate(r.results, 1):
        lines.append(f"[{i}] {one_line(row.get('finding'), 200)} — {row.get('obs_type')} ({row.get('iri')})")
    lines += ["", f"Route: {r.intent_class}. {r.route_explanation}"]
    lines += [f"Guard: {note}" for note in getattr(r, "route_notes", None) or []]
    if r.fallback_reason:
        lines.append(f"Fallback: {r.fallback_reason}")
    lines.append(f"Backend: {r.backend}" + llm_failure_suffix(r))
    return "\n".join(lines) + "\n"


def llm_failure_suffix(result: Any) -> str:
    """`` — the LLM did not write the answer: <why>`` for an answer the LLM failed to write when the
    route did not fail already ("" otherwise): the reason is said once, on the Fallback line when
    the router failed, here when only the answer did (the answer's heading no longer repeats it)."""
    data = result if isinstance(result, dict) else vars(result)
    if data.get("synthesis") != "extractive" or data.get("fallback_code") == "llm_error":
        return ""
    return f" — the LLM did not write the answer: {data.get('synthesis_error') or 'it failed'}"


def settings_for_ask(
    settings: Settings,
    *,
    backend: str | None = None,
    model: str | None = None,
    ollama_host: str | None = None,
    n_results: int | None = None,
    openai_base_url: str | None = None,
) -> Settings:
    """A copy of ``settings`` with one question's overrides (the CLI's options), validated as
    Preferences validates them (:class:`~kmds_desktop.config.SettingsError` names the value).

    ``model`` is the model of whichever backend answers (Ollama's, Google's and the OpenAI-compatible
    server's).
    """
    llm = settings.llm.model_copy()
    index = settings.index.model_copy()
    section = "llm."
    try:
        if backend:
            llm.backend = backend  # type: ignore[assignment]  # any str: pydantic validates on assignment
        if model:
            llm.ollama_model = model
            llm.google_model = model
            llm.openai_model = model
        if openai_base_url:
            # an API root keeps its path (``/v1``), unlike an Ollama host: Preferences checks it so too
            problem = api_address_error(openai_base_url)
            if problem:
                raise SettingsError(f"llm.openai_base_url: {problem}")
            llm.openai_base_url = openai_base_url
        if ollama_host:
            problem = server_address_error(ollama_host)
            if problem:  # the check Preferences makes on the same setting
                raise SettingsError(f"llm.ollama_host: {problem}")
            llm.ollama_host = ollama_host
        section = "index."
        if n_results is not None:
            index.n_results = n_results
    except ValidationError as err:
        raise SettingsError(describe_validation_error(err, section)) from None
    return settings.model_copy(update={"llm": llm, "index": index})


def warm_route_prompt(kb: Any, settings: Any, progress: Any = None, cancel: Any = None) -> bool:
    """Have the settings' local model server read the route prompt's instructions for ``kb`` before the
    first question (a worker's job: the window runs it once the KB is open and the server is ready);
    True when it was sent. ``progress``: taken for the job runner's sake (one step says nothing). See
    :meth:`~kmds_desktop.ask.orchestrator.SearchOrchestrator.warm_route`."""
    # why: start-up time: the window imports this module at start, that one only when needed
    from kmds_desktop.ask.orchestrator import SearchOrchestrator

    return SearchOrchestrator(kb, settings=settings, backend=settings.llm.backend).warm_route(cancel)


#: While an answer streams, the stage line counts its words every this many words.
STREAM_REPORT_WORDS = 10


def result_is_llm(orchestrator: Any) -> bool:
    """Whether the answer being written comes from the LLM (not the extractive quotes)."""
    return orchestrator.writing_stage() != "quoting the records"


def answer_question(
    kb: Any,
    settings: Any,
    index_holder: IndexHolder,
    question: str,
    route: Any = None,
    *,
    render: Callable[[str, int], str] | None = None,
    progress: Any = None,
    cancel: Any = None,
    chunk: Any = None,
) -> Any:
    """Route, search and stream an answer; returns the :class:`~kmds_desktop.ask.OrchestratorResult`.

    ``chunk`` receives ``(RETRIEVED, result)`` once the records are known, then text pieces, then
    ``(RENDERED, (answer, render(answer, n_records)))`` when ``render`` is given (a long answer's
    Markdown takes tens of ms to convert: the worker does it, not the window).
    """
    # why: start-up time: the window imports this module at start, that one only when needed
    from kmds_desktop.ask.orchestrator import SearchOrchestrator

    index = index_holder.get_or_open(settings, progress)
    orchestrator = SearchOrchestrator(
        kb,
        settings=settings,
        index=index,
        backend=settings.llm.backend,
        n_results=settings.index.n_results,
        embedding_model=settings.index.embedding_model,
    )
    stream = orchestrator.ask_stream(question, route=route, progress=progress, cancel=cancel)
    if chunk is not None:
        chunk((RETRIEVED, stream.result))
    if progress:
        progress(3, 4, orchestrator.writing_stage())
    written = 0
    for piece in stream:
        if chunk is not None:
            chunk(piece)
        if progress and isinstance(piece, str) and result_is_llm(orchestrator):
            before, written = written, written + len(piece.split())
            if written // STREAM_REPORT_WORDS > before // STREAM_REPORT_WORDS:
                progress(3, 4, f"{orchestrator.writing_stage()}: {plural(written, 'word')} so far")
    result = stream.result
    if chunk is not None and render is not None:
        shown = displayed_answer(result)
        chunk((RENDERED, (shown, render(shown, len(result.results)))))
    if progress:
        progress(4, 4, "done")
    return result
