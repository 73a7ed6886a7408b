"""Claims and choices judged from the full texts, offline or with the configured model.

Qt-free, the code ``literature verdict`` / ``literature choose`` run and the window's Evidence view
calls. The backend is picked as :mod:`kmds_desktop.app.ask` picks it: the settings' backend (``auto``
probes Ollama and the confirmed OpenAI-compatible servers), overridden per call by ``backend`` /
``model``; no model found means the offline heuristic, and the verdict says which judged it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kmds_desktop.config import load_settings
from kmds_desktop.literature.evidence.quotes import verify_quote
from kmds_desktop.literature.evidence.search import choice_query, search_passages
from kmds_desktop.literature.evidence.verdict import (
    PASSAGES,
    ChoiceVerdict,
    ClaimVerdict,
    LLMFn,
    choose_offline,
    choose_with_model,
    claim_verdict,
    yes_no_maybe,
)
from kmds_desktop.literature.fulltext.store import FulltextStore


@dataclass(frozen=True)
class Judge:
    """The model that judges (``llm`` None: offline), its backend's name, and why it was chosen."""

    llm: LLMFn | None
    name: str
    note: str = ""


def pick_judge(backend: str | None = None, model: str | None = None) -> Judge:
    """The backend for a verdict: the settings' choice with this call's overrides (as ``ask`` does)."""
    if backend == "offline":
        return Judge(None, "offline", "offline chosen")
    from kmds_desktop.app.ask import settings_for_ask  # why: start-up time: it loads httpx, ollama
    from kmds_desktop.llm.factory import choose_backend  # why: start-up time: it loads httpx, ollama

    settings = settings_for_ask(load_settings(), backend=backend, model=model)
    choice = choose_backend(settings.llm)
    return Judge(choice.llm, choice.name, choice.note)


#: ``encoder(texts) -> unit vectors``: the window's index process (torch never loads in the window's
#: process); None: the shipped model in this process (the CLI).
Encoder = Callable[[Sequence[str]], Any]


def _embedders(encoder: Encoder | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The keyword arguments that make the passage search and the judging embed with ``encoder``."""
    if encoder is None:
        return {}, {}
    return {"embed_query": lambda text: encoder([text])[0]}, {"embed": encoder}


def verdict(store: FulltextStore, claim: str, judge: Judge | None = None,
            paper_ids: Sequence[int] | None = None, top: int = PASSAGES, *,
            encoder: Encoder | None = None) -> ClaimVerdict:
    """Each paper's stance on ``claim`` (supports / contradicts / not addressed, with its verified
    quote) and the balance; ``cannot tell`` when none addresses it."""
    judge = judge or Judge(None, "offline")
    if not claim or not claim.strip():
        raise ValueError("the claim is empty: type the statement to check against the papers")
    search_with, judge_with = _embedders(encoder)
    hits = search_passages(store, claim, top, paper_ids=paper_ids, **search_with)
    result = claim_verdict(store, claim, hits, llm=judge.llm, method=judge.name, **judge_with)
    if judge.note and judge.llm is None and judge.name == "offline" and judge.note != "offline chosen":
        result.notes.append(f"no model: {judge.note}")
    return result


def choose(store: FulltextStore, question: str, options: Sequence[str], judge: Judge | None = None,
           paper_ids: Sequence[int] | None = None, top: int = PASSAGES, *,
           encoder: Encoder | None = None) -> ChoiceVerdict:
    """The option the papers bear out, with the quote it rests on, or ``insufficient``."""
    judge = judge or Judge(None, "offline")
    if not question or not question.strip():
        raise ValueError("the question is empty: type the question the options answer")
    search_with, judge_with = _embedders(encoder)
    hits = search_passages(store, choice_query(question, options), top, paper_ids=paper_ids, **search_with)
    if judge.llm is None:
        result = choose_offline(store, question, options, hits, **judge_with)
        if judge.note and judge.name == "offline" and judge.note != "offline chosen":
            result.notes.append(f"no model: {judge.note}")
        return result
    return choose_with_model(store, question, options, hits, judge.llm, method=judge.name, **judge_with)


#: Bounds on the options typed in the window: a choice is a handful of short answers, and each option
#: is embedded and shown to a model, so a pasted page is refused rather than sent.
MAX_OPTIONS = 12
MAX_OPTION_CHARS = 300


def options_from_lines(text: str) -> list[str]:
    """The options typed one a line (blank lines and surrounding spaces dropped), checked before any
    search runs so a bad list costs nothing: at least two, at most :data:`MAX_OPTIONS`, each at most
    :data:`MAX_OPTION_CHARS` characters, no two the same."""
    options = [" ".join(line.split()) for line in text.splitlines()]
    options = [o for o in options if o]
    if len(options) < 2:
        raise ValueError("type at least two options, one a line, then choose again")
    if len(options) > MAX_OPTIONS:
        raise ValueError(f"{len(options)} options: keep at most {MAX_OPTIONS}, one a line")
    too_long = next((i for i, o in enumerate(options) if len(o) > MAX_OPTION_CHARS), None)
    if too_long is not None:
        raise ValueError(f"option {too_long + 1} has {len(options[too_long])} characters: shorten it to "
                         f"{MAX_OPTION_CHARS} or fewer")
    seen: set[str] = set()
    for option in options:
        if option.casefold() in seen:
            raise ValueError(f"\"{option}\" is listed twice: give each option once")
        seen.add(option.casefold())
    return options


def quoted_paper(store: FulltextStore, result: ChoiceVerdict,
                 paper_ids: Sequence[int] | None = None) -> int | None:
    """The store's paper the choice's quote is on, so the window can open its page.

    Why a lookup: a :class:`ChoiceVerdict` names its paper as a citation does (DOI, else file name),
    and two imported files can share a DOI; the paper is the one of that name, in scope, whose cited
    page holds the quote. None when nothing was quoted or no such paper is left."""
    if not result.quote or not result.pages or not result.label:
        return None
    allowed = None if paper_ids is None else set(paper_ids)
    for paper in store.papers():
        if paper.status != "ok" or paper.label != result.label:
            continue
        if allowed is not None and paper.id not in allowed:
            continue
        if verify_quote(result.quote, functools.partial(store.page_text, paper.id), result.pages[0]).verified:
            return paper.id
    return None


def yes_no(store: FulltextStore, question: str, judge: Judge | None = None,
           paper_ids: Sequence[int] | None = None, *, encoder: Encoder | None = None,
           ) -> tuple[str, ClaimVerdict]:
    """Yes / no / maybe (or ``cannot tell``) for a yes-no question, with the verdict behind it."""
    judged = verdict(store, question, judge, paper_ids, encoder=encoder)
    return yes_no_maybe(judged), judged


def verdict_dict(result: ClaimVerdict, answer: str | None = None) -> dict[str, Any]:
    data = result.as_dict()
    if answer is not None:
        data["answer"] = answer
    return data
