"""``kmds-desktop --self-test``: prove that an installed or bundled app works end to end.

Why: a researcher who got the app as a folder (PyInstaller bundle) has no Python environment to
debug in, and a bundle can look complete yet miss a Qt plugin, a data file of a library or the
PostgreSQL binaries. This check runs every part the app depends on, in the same process and the same
way the app does, and says in one line what worked or which step failed and why:

1. Qt: offscreen, create the main window briefly (the Qt platform plugin, styles and the app icon load);
2. the demo knowledge base opens;
3. its semantic index builds with the bundled embedding model (ChromaDB on disk) and answers a search;
4. the orchestrator answers a question in offline mode (no LLM);
5. the embedded PostgreSQL starts, a small built-in sample is imported, an ID-only query finds it and
   the documents are fetched; then the server is stopped.

Everything is written to a fresh temporary data folder, never the user's; it is removed afterwards
(kept only after a failure, so the server log can be read). The server the check started is stopped
whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from kmds_desktop import paths
from kmds_desktop.config import LiteratureSettings
from kmds_desktop.index.index_process import stop_all
from kmds_desktop.kb import load_kb

log = logging.getLogger(__name__)

#: The question asked in offline mode; the demo KB has data-quality findings to answer it from.
QUESTION = "What did we learn about data quality?"
#: A semantic search the demo KB must answer.
SEARCH_TEXT = "missing values and data quality"
#: An ID-only full-text query that matches exactly the sample records marked ``match`` below.
LITERATURE_QUERY = "insulin & resistance"

#: The tiny built-in literature sample (the shared JSONL corpus format): two records match
#: :data:`LITERATURE_QUERY`, one does not, so the check sees both that the query finds and that it filters.
SAMPLE_RECORDS: tuple[dict[str, Any], ...] = (
    {
        "id": "pubmed:90000001", "pmid": "90000001", "source": "pubmed", "year": 2021,
        "title": "Insulin resistance and physical activity in older adults",
        "abstract": "Regular exercise lowered insulin resistance in a cohort of 412 adults over 65.",
        "authors": ["Doe J", "Roe R"], "journal": "Self-test Journal", "doi": None, "origin": "self-test",
        "match": True,
    },
    {
        "id": "pubmed:90000002", "pmid": "90000002", "source": "pubmed", "year": 2019,
        "title": "Hepatic fat predicts insulin resistance",
        "abstract": "Liver fat content measured by MRI was associated with resistance to insulin.",
        "authors": ["Poe E"], "journal": "Self-test Journal", "doi": None, "origin": "self-test",
        "match": True,
    },
    {
        "id": "scifact:self-test-3", "pmid": None, "source": "scifact", "year": 2020,
        "title": "Sleep duration and memory consolidation",
        "abstract": "Short sleep impaired recall of word lists the next day.",
        "authors": [], "journal": None, "doi": None, "origin": "self-test",
        "match": False,
    },
)


_TORCH_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


class SelfTestError(Exception):
    """One step found the app broken; the message says what was expected and what happened."""


@dataclass
class _Context:
    """What the steps share: the temporary data folder, the loaded KB, the facts for the summary."""

    home: Path
    kb_path: Path | None = None
    kb: Any = None
    index: Any = None
    database: Any = None
    server: Any = None
    facts: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


def _require(condition: object, message: str) -> None:
    if not condition:
        raise SelfTestError(message)


# -- steps -------------------------------------------------------------------------------------------
def _step_qt(ctx: _Context) -> None:
    """Offscreen Qt: the platform plugin loads and the main window is created, shown and closed."""
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from kmds_desktop.ui.shell.smoke import open_main_window_briefly  # why: Qt loads only with the window

    info = open_main_window_briefly()
    _require(info.get("platform") == "offscreen", f"Qt platform is {info.get('platform')!r}, not offscreen")
    _require("KMDS" in str(info.get("title", "")),
             f"main window title {info.get('title')!r} lacks the app name")
    _require(info.get("icon"), "the main window has no application icon (resources/icons missing?)")
    _require("Fusion" in info.get("styles", []),
             f"Qt widget style Fusion missing (have {info.get('styles')})")
    ctx.facts.append(f"Qt {info.get('qt_version')} offscreen window {info.get('title')!r}")


def _step_kb(ctx: _Context) -> None:
    """The demo knowledge base ships with the app and opens."""
    ctx.kb_path = paths.demo_kb_path()
    _require(ctx.kb_path.is_file(), f"demo knowledge base missing: {ctx.kb_path}")
    ctx.kb = load_kb(ctx.kb_path)
    n_obs, n_wf = len(ctx.kb.observations), len(ctx.kb.workflows)
    _require(n_obs > 0 and n_wf > 0,
             f"demo knowledge base {ctx.kb_path} has {n_obs} observations, {n_wf} workflows")
    ctx.facts.append(f"demo KB {n_obs} observations/{n_wf} workflows")


def _step_index(ctx: _Context) -> None:
    """The bundled embedding model embeds the KB into the index on disk, which answers a search.

    The index is served by the app's index process, as in the window, so a bundle whose executable
    cannot start that process fails here rather than at the user's first search.
    """
    # why: start-up time: kmds_desktop.index loads its parts on first use
    from kmds_desktop.index import SemanticIndex

    assert ctx.kb_path is not None  # noqa: S101 - narrows: the KB step ran first
    index = SemanticIndex(persist_dir=paths.index_dir(), own_process=True)
    report = index.build(ctx.kb_path)
    _require(report.total > 0 and index.count() == report.total,
             f"index build stored {index.count()} of {report.total} entries")
    hits = index.search(SEARCH_TEXT, n_results=3)
    _require(hits, f"semantic search for {SEARCH_TEXT!r} found nothing in an index of {report.total} entries")
    ctx.index = index
    ctx.facts.append(f"index {report.total} entries (index process)")


def _step_ask(ctx: _Context) -> None:
    """The orchestrator answers in offline mode (no LLM), citing observations of the demo KB."""
    from kmds_desktop.ask import SearchOrchestrator  # why: start-up time: it loads httpx, ollama

    assert ctx.kb_path is not None  # noqa: S101 - narrows: the KB step ran first
    orchestrator = SearchOrchestrator(ctx.kb_path, persist_dir=paths.index_dir(), backend="offline",
                                      index=ctx.index)
    result = orchestrator.ask(QUESTION)
    _require(result.answer and result.answer.strip(), f"offline answer to {QUESTION!r} is empty")
    _require(result.results, f"offline answer to {QUESTION!r} cites no observations")
    _require(result.backend == "offline",
             f"asked in offline mode but the {result.backend!r} backend answered")
    ctx.facts.append(f"offline answer via {result.intent_class} ({len(result.results)} sources)")


def _write_sample(folder: Path) -> Path:
    path = folder / "self-test-sample.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for record in SAMPLE_RECORDS:
            fh.write(json.dumps({k: v for k, v in record.items() if k != "match"}) + "\n")
    return path


def _step_literature(ctx: _Context) -> None:
    """The embedded PostgreSQL starts; the sample imports; an ID-only query finds it; documents fetch."""
    # why: start-up time: kmds_desktop.literature loads its parts on first use
    from kmds_desktop.literature import open_database

    ctx.database = open_database(settings=LiteratureSettings(mode="embedded"))
    ctx.server = getattr(ctx.database, "server", None)
    _require(ctx.server is not None and ctx.server.is_running(),
             "the embedded PostgreSQL server is not running")
    _require(Path(ctx.server.root).is_relative_to(ctx.home),
             f"the self-test server lives in {ctx.server.root}, outside its temporary folder {ctx.home}")
    report = ctx.database.import_files([_write_sample(ctx.home)])
    _require(report.inserted == len(SAMPLE_RECORDS),
             f"imported {report.inserted} of {len(SAMPLE_RECORDS)} sample records ({report.summary()})")
    ids = ctx.database.find_abstract_ids(LITERATURE_QUERY, max_rows=10)
    expected = sorted(r["title"] for r in SAMPLE_RECORDS if r["match"])
    _require(len(ids) == len(expected),
             f"query {LITERATURE_QUERY!r} found {len(ids)} ids, expected {len(expected)}")
    documents = ctx.database.fetch_documents_by_ids(ids)
    titles = sorted(str(doc.get("title")) for doc in documents)
    _require(titles == expected, f"fetched {titles}, expected {expected}")
    ctx.facts.append(f"PostgreSQL: {len(SAMPLE_RECORDS)} imported, {len(ids)} ids, {len(documents)} fetched")


def _step_stop_server(ctx: _Context) -> None:
    """The server this check started stops (the app must not leave a server behind)."""
    _stop_database(ctx)
    _require(ctx.server is None or not ctx.server.is_running(), "the embedded PostgreSQL server did not stop")


STEPS: tuple[tuple[str, Callable[[_Context], None]], ...] = (
    ("Qt main window", _step_qt),
    ("demo knowledge base", _step_kb),
    ("semantic index", _step_index),
    ("offline answer", _step_ask),
    ("literature database", _step_literature),
    ("server stop", _step_stop_server),
)


# -- plumbing ----------------------------------------------------------------------------------------
def _stop_database(ctx: _Context) -> None:
    if ctx.database is not None:
        with contextlib.suppress(Exception):
            ctx.database.close(stop_server=True)
        ctx.database = None
    if ctx.server is not None and ctx.server.is_running():
        with contextlib.suppress(Exception):
            ctx.server.stop()


def _cleanup(ctx: _Context, keep: bool) -> None:
    _stop_database(ctx)

    stop_all()  # the index process, before its folder is removed
    if ctx.server is not None and not keep:
        with contextlib.suppress(Exception):
            ctx.server.destroy()  # also removes a socket folder outside the data folder
    if not keep:
        shutil.rmtree(ctx.home, ignore_errors=True)


@contextlib.contextmanager
def _log_to(folder: Path) -> Iterator[None]:
    """Send log records to the temporary folder while the check runs (not to the user's log file)."""
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    handler = logging.FileHandler(folder / "self-test.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for old in saved[0]:
        if isinstance(old, logging.FileHandler):
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(min(root.level or logging.INFO, logging.INFO))
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()
        for old in saved[0]:
            if old not in root.handlers:
                root.addHandler(old)
        root.setLevel(saved[1])


def run_self_test(out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run every step; print one summary line; return 0 when all passed, 1 with the reason otherwise."""
    out = out or sys.stdout
    err = err or sys.stderr
    started = time.perf_counter()
    previous_override = paths._override  # noqa: SLF001 - the data folder override, restored below; restored afterwards (in-process callers, tests)
    previous_env = {key: os.environ.get(key) for key in ("QT_QPA_PLATFORM", paths.ENV_HOME, _TORCH_CACHE_ENV)}
    home = Path(tempfile.mkdtemp(prefix="kmds-desktop-self-test-"))
    paths.set_data_dir(home)
    os.environ[paths.ENV_HOME] = str(home)  # for anything that reads the variable directly
    # torch creates a compiler cache folder under the temp dir when it loads; keep it in ours.
    os.environ[_TORCH_CACHE_ENV] = str(home / "torchinductor")
    ctx = _Context(home=home)
    failed: str | None = None
    try:
        with _log_to(home):
            for name, step in STEPS:
                step_started = time.perf_counter()
                log.info("self-test step: %s", name)
                try:
                    step(ctx)
                except Exception as exc:  # every failure becomes the one-line reason
                    log.exception("self-test step %s failed", name)
                    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    kind = "" if isinstance(exc, SelfTestError) else f"{type(exc).__name__}: "
                    failed = f"{name}: {kind}{reason}"
                    break
                ctx.timings[name] = time.perf_counter() - step_started
            log.info("self-test step times: %s",
                     ", ".join(f"{name} {secs:.1f} s" for name, secs in ctx.timings.items()))
    finally:
        _cleanup(ctx, keep=failed is not None)
        paths._override = previous_override  # noqa: SLF001 - restored
        for key, value in previous_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    seconds = time.perf_counter() - started
    if failed is not None:
        print(f"kmds-desktop self-test FAILED at {failed} (after {seconds:.1f} s; "
              f"log and data kept in {home})", file=err, flush=True)
        return 1
    print(f"kmds-desktop self-test OK in {seconds:.1f} s: " + "; ".join(ctx.facts), file=out, flush=True)
    return 0
