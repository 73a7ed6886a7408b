"""Crash tests as SQLite does them: kill a job at many points, start it again, compare every count.

Why: each job that writes (an import, embedding, the top-k build, a KB save, screening decisions)
claims that a ``kill -9`` anywhere loses at most the step in flight and that the next start repairs
what the kill left. This harness checks the claim the only way that convinces: a real child process
runs the job over real PostgreSQL, tantivy, SQLite and files, is killed (SIGKILL), and is started
again; then every count must equal a clean run's. No duplicate, no loss.

Where a job is killed:

- **named crash points** (:mod:`kmds_desktop.crashpoints`): a clean run with ``KMDS_CRASH_TRACE``
  records which points the job passes and how often; a trial sets ``KMDS_CRASH_AT=<name>:<n>`` and
  the child kills itself at that pass, exactly between the two writes a resumable job gets wrong;
- **random moments**: SIGKILL after a random delay within the clean run's working time.

Each trial starts from the same prepared state (a database cloned from a template, a copy of the
data folder), so trials never see each other's leftovers.

Adding a job is one entry in :data:`JOBS`: how to prepare its input, how to run it (in the child;
running it again must go on or repair), and how to count what it left. Qt-free; used by
``tests/test_crash_points.py`` (a few kills per job) and ``bench/crash_test.py`` (many).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CF_CORPUS = REPO.parent / "shared" / "data" / "literature" / "cf" / "corpus.jsonl"
#: How long one child run may take before the harness calls it hung (a failure, never a pass).
CHILD_TIMEOUT_S = 600.0
_STARTED = "crash-harness: job started"


@dataclass(frozen=True)
class Workspace:
    """Where one run of a job keeps its state: a folder (with the data folder ``home`` inside it) and,
    for a job that needs one, a database."""

    folder: Path
    dsn: str = ""

    @property
    def home(self) -> Path:
        return self.folder / "home"


@dataclass(frozen=True)
class CrashJob:
    """One job the harness kills. ``prepare`` and ``run`` run in a child process with the workspace's
    data folder (``prepare`` once per job, its result copied for every trial); ``run`` is the job as
    the app runs it, and running it again must go on from where a kill left it; ``count`` runs in the
    harness and returns the numbers a clean run and a killed-then-restarted run must share."""

    name: str
    prepare: Callable[[Workspace], None]
    run: Callable[[Workspace], None]
    count: Callable[[Workspace], dict[str, Any]]
    needs_database: bool = False
    #: Loads what the job needs before its work begins (a model): a random kill falls in the work.
    preload: Callable[[], None] | None = None


# -- the jobs -----------------------------------------------------------------------------------------
def _cf_records(n: int) -> list[str]:
    with open(CF_CORPUS, encoding="utf-8") as fh:
        return [line for _, line in zip(range(n), fh, strict=False)]


def _database(ws: Workspace) -> Any:
    from kmds_desktop.config import LiteratureSettings
    from kmds_desktop.literature.store.database import open_database

    return open_database(ws.dsn, settings=LiteratureSettings(statement_timeout_ms=60_000))


def _sql(ws: Workspace, query: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(ws.dsn) as conn:
        return conn.execute(query).fetchall()


def _topk_counts(ws: Workspace) -> dict[str, Any]:
    """The top-k index's documents, distinct ids and whether its state says finished (none: absent)."""
    folders = sorted((ws.home / "topk").glob("*/state.json"))
    if not folders:
        return {"topk": "none"}
    from kmds_desktop.literature.store.topk_index import BuildState, TopKIndex

    [state_path] = folders
    state = BuildState.load(state_path)
    ids = TopKIndex(state_path.parent).all_ids()
    return {"topk_documents": len(ids), "topk_distinct": len(set(ids)),
            "topk_complete": bool(state and state.complete),
            "topk_state_documents": state.documents if state else -1}


def _document_counts(ws: Workspace) -> dict[str, Any]:
    [(documents, keys)] = _sql(ws, "SELECT count(*), count(DISTINCT (source_id, external_id)) FROM document")
    return {"documents": documents, "distinct_keys": keys}


IMPORT_FILES = 5
IMPORT_RECORDS = 300


def _prepare_import(ws: Workspace) -> None:
    folder = ws.folder / "in"
    folder.mkdir()
    lines = _cf_records(IMPORT_RECORDS)
    per = len(lines) // IMPORT_FILES
    for i in range(IMPORT_FILES):
        (folder / f"part-{i}.jsonl").write_text("".join(lines[i * per:(i + 1) * per]), encoding="utf-8")


def _run_import(ws: Workspace) -> None:
    """A folder import (a ledger of the files committed) whose index step builds the top-k index."""
    from kmds_desktop.literature.store import topk_build

    topk_build.BATCH = 50  # several batches (and crash points) in 300 documents
    db = _database(ws)
    try:
        db.import_files([ws.folder / "in"])
    finally:
        db.close()


def _count_import(ws: Workspace) -> dict[str, Any]:
    files: dict[str, Any] = {}
    for ledger in (ws.home / "imports").glob("*.json"):
        files.update(json.loads(ledger.read_text(encoding="utf-8")).get("files", {}))
    return {**_document_counts(ws), "ledger_files": len(files),
            "ledger_records": sum(int(entry.get("records", 0)) for entry in files.values()),
            **_topk_counts(ws)}


def _prepare_database(ws: Workspace, documents: int = 200) -> None:
    """A database of CF documents (its top-k index removed: jobs that build it start without)."""
    source = ws.folder / "cf.jsonl"
    source.write_text("".join(_cf_records(documents)), encoding="utf-8")
    db = _database(ws)
    try:
        db.import_files([source])
    finally:
        db.close()
    shutil.rmtree(ws.home / "topk", ignore_errors=True)


def _run_topk(ws: Workspace) -> None:
    from kmds_desktop.literature.store.topk_build import build_index, index_folder
    from kmds_desktop.literature.store.topk_index import TopKIndex

    db = _database(ws)
    try:
        build_index(db, TopKIndex(index_folder(db)), batch=25)
    finally:
        db.close()


def _count_topk(ws: Workspace) -> dict[str, Any]:
    return {**_document_counts(ws), **_topk_counts(ws)}


EMBED_MODEL = "all-MiniLM-L6-v2"
#: Few documents, small batches: the model's CPU time is the harness's largest cost.
EMBED_DOCUMENTS = 60
EMBED_BATCH = 10


def _prepare_embed(ws: Workspace) -> None:
    _prepare_database(ws, EMBED_DOCUMENTS)


def _load_embedding_model() -> None:
    from kmds_desktop.index.embeddings import encode

    encode(["warm up"], EMBED_MODEL)


def _run_embed(ws: Workspace) -> None:
    from kmds_desktop.literature.store.vectors import embed_documents

    db = _database(ws)
    try:
        embed_documents(db, model_name=EMBED_MODEL, batch_size=EMBED_BATCH)
    finally:
        db.close()


def _count_embed(ws: Workspace) -> dict[str, Any]:
    [(vectors, documents, models)] = _sql(
        ws, "SELECT count(*), count(DISTINCT document_id), count(DISTINCT model) FROM kmds_document_vector")
    return {**_document_counts(ws), "vectors": vectors, "vector_documents": documents, "models": models}


KB_OBSERVATIONS = 120
KB_EDITS = 12
_KB_MARK = "checked: "


def _prepare_kb(ws: Workspace) -> None:
    from kmds_desktop.kb.synthetic import write_synthetic_kb

    write_synthetic_kb(ws.folder / "kb.xml", KB_OBSERVATIONS)


def _run_kb(ws: Workspace) -> None:
    """Edit the first observations one at a time, saving after each (as a user's edits are)."""
    from kmds_desktop.kb import load_kb, save_kb

    kb = load_kb(ws.folder / "kb.xml")
    for obs in list(kb.observations)[:KB_EDITS]:
        if not obs.finding.startswith(_KB_MARK):
            kb.update_observation(obs.iri, finding=_KB_MARK + obs.finding)
            save_kb(kb)
    save_kb(kb)  # the next start's save removes what a killed one left


def _count_kb(ws: Workspace) -> dict[str, Any]:
    from kmds_desktop.kb import load_kb
    from kmds_desktop.kb.save_temp import temp_pattern

    kb = load_kb(ws.folder / "kb.xml")
    pattern = temp_pattern("kb.xml")
    return {"observations": len(kb.observations),
            "edited": sum(o.finding.startswith(_KB_MARK) for o in kb.observations),
            "edited_twice": sum(o.finding.startswith(_KB_MARK * 2) for o in kb.observations),
            "temp_files": sum(bool(pattern.fullmatch(p.name)) for p in ws.folder.iterdir())}


SCREEN_RECORDS = 80
_REVIEW = "crash-test"


def _prepare_screening(ws: Workspace) -> None:
    from kmds_desktop.literature.screening.decisions import DecisionStore
    from kmds_desktop.literature.screening.records import ScreeningRecord

    store = DecisionStore(ws.folder / "screening.sqlite3")
    store.create_review(_REVIEW, question="does it hold?")
    store.add_records(_REVIEW, [ScreeningRecord(source="cf", external_id=str(i), title=f"record {i}")
                                for i in range(SCREEN_RECORDS)], origin="crash test")


def _run_screening(ws: Workspace) -> None:
    """Decide every record not yet decided (what a reviewer does after a restart), one commit each."""
    from kmds_desktop.literature.screening.decisions import EXCLUDE, INCLUDE, MAYBE, DecisionStore

    store = DecisionStore(ws.folder / "screening.sqlite3")
    done = store.decisions(_REVIEW)
    for record in store.records(_REVIEW):
        if record.key in done:
            continue
        n = int(record.external_id)
        choice = (INCLUDE, EXCLUDE, MAYBE)[n % 3]
        store.decide(_REVIEW, record.key, choice, reason="wrong population" if choice == EXCLUDE else "")


def _count_screening(ws: Workspace) -> dict[str, Any]:
    con = sqlite3.connect(f"file:{ws.folder / 'screening.sqlite3'}?mode=ro", uri=True)
    try:
        def one(query: str) -> Any:
            return con.execute(query).fetchone()[0]

        return {"records": one("SELECT count(*) FROM review_record"),
                "decisions": one("SELECT count(*) FROM decision"),
                "log_entries": one("SELECT count(*) FROM decision_log"),
                "log_records": one("SELECT count(DISTINCT source || '/' || external_id) FROM decision_log"),
                "excluded": one("SELECT count(*) FROM decision WHERE decision = 'exclude'")}
    finally:
        con.close()


#: Every job the harness kills, by name. A new job (the full-text import, review updates) is one entry.
JOBS: dict[str, CrashJob] = {job.name: job for job in (
    CrashJob("import", _prepare_import, _run_import, _count_import, needs_database=True),
    CrashJob("embed", _prepare_embed, _run_embed, _count_embed, needs_database=True,
             preload=_load_embedding_model),
    CrashJob("topk", _prepare_database, _run_topk, _count_topk, needs_database=True),
    CrashJob("kb-save", _prepare_kb, _run_kb, _count_kb),
    CrashJob("screening", _prepare_screening, _run_screening, _count_screening),
)}


# -- the harness ----------------------------------------------------------------------------------
@dataclass
class Trial:
    """One kill and restart: where it was killed, whether the kill landed, what the restart counted."""

    job: str
    point: str
    killed: bool
    counts: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] = field(default_factory=dict)

    @property
    def survived(self) -> bool:
        return self.killed and self.counts == self.expected

    def describe(self) -> str:
        if not self.killed:
            return f"{self.job} @ {self.point}: the job ended before the kill"
        if self.survived:
            return f"{self.job} @ {self.point}: survived"
        diff = {k: (self.counts.get(k), v) for k, v in self.expected.items() if self.counts.get(k) != v}
        return f"{self.job} @ {self.point}: counts differ (got, clean run's): {diff}"


class Databases:
    """Databases of one PostgreSQL server for the trials: a template per job, a clone per trial."""

    def __init__(self, conninfo: Callable[[str], dict[str, object]]) -> None:
        self._conninfo = conninfo

    def dsn(self, name: str) -> str:
        return " ".join(f"{k}={v}" for k, v in self._conninfo(name).items())

    def create(self, name: str, template: str | None = None) -> str:
        import psycopg

        with psycopg.connect(**self._conninfo("postgres"), autocommit=True) as conn:  # type: ignore[arg-type]
            # generated identifiers, never user input
            conn.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
        return self.dsn(name)

    def drop(self, name: str) -> None:
        import psycopg

        with psycopg.connect(**self._conninfo("postgres"), autocommit=True) as conn:  # type: ignore[arg-type]
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


class CrashHarness:
    """Runs :data:`JOBS` in child processes, clean and killed, in folders under ``root``."""

    def __init__(self, root: Path, databases: Databases | None) -> None:
        self.root = Path(root)
        self.databases = databases
        self._templates: dict[str, tuple[Workspace, str]] = {}
        self._clean: dict[str, tuple[dict[str, Any], Counter[str], float]] = {}
        self._made: list[str] = []

    # child processes
    def _child(self, mode: str, job: CrashJob, ws: Workspace, *, crash_at: str | None = None,
               trace: Path | None = None, kill_after: float | None = None) -> tuple[int, float, str]:
        """Run ``mode`` (prepare, run) of ``job`` in a child; ``(return code, seconds of work, output)``.
        ``kill_after``: SIGKILL that many seconds after the job started (after the imports)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("KMDS_CRASH_")}
        env.update(KMDS_DESKTOP_HOME=str(ws.home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                   ANONYMIZED_TELEMETRY="False", PYTHONPATH=str(REPO))
        if crash_at is not None:
            env["KMDS_CRASH_AT"] = crash_at
        if trace is not None:
            env["KMDS_CRASH_TRACE"] = str(trace)
        command = [sys.executable, str(Path(__file__).resolve()), mode, job.name, str(ws.folder),
                   ws.dsn or "-"]
        child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True)
        assert child.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + CHILD_TIMEOUT_S
        started = None
        for line in child.stdout:  # up to the start line: the imports are not the job
            lines.append(line)
            if line.strip() == _STARTED:
                started = time.monotonic()
                break
        try:
            if started is not None and kill_after is not None:
                try:
                    child.wait(timeout=kill_after)
                except subprocess.TimeoutExpired:
                    child.send_signal(signal.SIGKILL)
            rest, _ = child.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            rest, _ = child.communicate()
            raise AssertionError(f"{job.name} {mode} hung for {CHILD_TIMEOUT_S:.0f} s:\n{''.join(lines)}"
                                 f"{rest}") from None
        worked = time.monotonic() - started if started is not None else 0.0
        return child.returncode, worked, "".join(lines) + (rest or "")

    def _checked(self, mode: str, job: CrashJob, ws: Workspace, **kwargs: Any) -> float:
        code, seconds, output = self._child(mode, job, ws, **kwargs)
        if code != 0:
            raise AssertionError(f"{job.name} {mode} failed (exit {code}) in {ws.folder}:\n{output[-4000:]}")
        return seconds

    # workspaces
    def _template(self, job: CrashJob) -> tuple[Workspace, str]:
        if job.name not in self._templates:
            folder = self.root / f"{job.name}-template"
            folder.mkdir(parents=True)
            name, dsn = self._new_database(job)
            ws = Workspace(folder, dsn)
            ws.home.mkdir()
            self._checked("prepare", job, ws)
            self._templates[job.name] = (ws, name)
        return self._templates[job.name]

    def _new_database(self, job: CrashJob, template: str | None = None) -> tuple[str, str]:
        if not job.needs_database:
            return "", ""
        if self.databases is None:
            raise AssertionError(f"the {job.name} job needs a PostgreSQL server; none was given")
        name = f"crash_{job.name.replace('-', '_')}_{secrets.token_hex(4)}"
        dsn = self.databases.create(name, template)
        self._made.append(name)
        return name, dsn

    def _copy(self, job: CrashJob, label: str) -> tuple[Workspace, str]:
        template, template_db = self._template(job)
        folder = self.root / f"{job.name}-{label}-{secrets.token_hex(3)}"
        shutil.copytree(template.folder, folder, symlinks=True)
        name, dsn = self._new_database(job, template_db or None)
        return Workspace(folder, dsn), name

    def _discard(self, ws: Workspace, name: str) -> None:
        shutil.rmtree(ws.folder, ignore_errors=True)
        if name and self.databases is not None:
            self.databases.drop(name)
            self._made.remove(name)

    # runs
    def clean_run(self, job: CrashJob) -> tuple[dict[str, Any], Counter[str], float]:
        """The counts a run that nobody kills leaves, the crash points it passes (how often), and its
        working time."""
        if job.name not in self._clean:
            ws, name = self._copy(job, "clean")
            trace = ws.folder / "crash-trace.txt"
            seconds = self._checked("run", job, ws, trace=trace)
            passes = Counter(trace.read_text(encoding="utf-8").split()) if trace.exists() else Counter()
            counts = job.count(ws)
            self._checked("run", job, ws)  # a second run of a finished job changes nothing
            again = job.count(ws)
            if again != counts:
                raise AssertionError(f"{job.name}: running it again after it finished changed the counts "
                                     f"{counts} -> {again}")
            self._discard(ws, name)
            self._clean[job.name] = (counts, passes, seconds)
        return self._clean[job.name]

    def kill_points(self, job: CrashJob) -> list[tuple[str, int]]:
        """Every ``(crash point, pass)`` a clean run of ``job`` goes through, in order."""
        _, passes, _ = self.clean_run(job)
        return [(name, n) for name, total in sorted(passes.items()) for n in range(1, total + 1)]

    def trial(self, job: CrashJob, *, point: tuple[str, int] | None = None,
              delay: float | None = None) -> Trial:
        """Kill ``job`` at a named crash point or after ``delay`` seconds of work, run it again (the
        next start goes on and repairs), and count."""
        expected, _, _ = self.clean_run(job)
        label = f"{point[0]}:{point[1]}" if point is not None else f"{delay:.2f}s"
        ws, name = self._copy(job, "trial")
        try:
            code, _, output = self._child("run", job, ws, crash_at=label if point is not None else None,
                                          kill_after=delay)
            killed = code == -signal.SIGKILL
            if not killed and code != 0:
                raise AssertionError(f"{job.name} @ {label} failed instead of being killed (exit {code}):\n"
                                     f"{output[-4000:]}")
            self._checked("run", job, ws)
            return Trial(job.name, label, killed, job.count(ws), expected)
        finally:
            self._discard(ws, name)

    def random_trials(self, job: CrashJob, kills: int, rng: random.Random) -> Iterator[Trial]:
        """``kills`` trials, about half at named crash points (drawn from every pass of every point),
        half at random moments of the clean run's working time."""
        points = self.kill_points(job)
        _, _, seconds = self.clean_run(job)
        for n in range(kills):
            if points and n % 2 == 0:
                yield self.trial(job, point=rng.choice(points))
            else:
                # the clean run's time ends with the interpreter's exit: stay within the work
                yield self.trial(job, delay=rng.uniform(0.0, max(0.9 * seconds, 0.05)))

    def spread(self, job: CrashJob, kills: int) -> list[tuple[str, int]]:
        """``kills`` named points spread over every point the job passes: each point's first pass,
        then its last, then evenly between (deterministic: a failure reproduces)."""
        points = self.kill_points(job)
        by_name: dict[str, list[int]] = {}
        for name, n in points:
            by_name.setdefault(name, []).append(n)
        order: list[tuple[str, int]] = []
        for choose in (lambda ns: ns[0], lambda ns: ns[-1], lambda ns: ns[len(ns) // 2]):
            for name, ns in sorted(by_name.items()):
                candidate = (name, choose(ns))
                if candidate not in order:
                    order.append(candidate)
        return order[:kills]

    def close(self) -> None:
        """Drop every database the harness made (the folders go with ``root``)."""
        if self.databases is not None:
            for name in list(self._made):
                self.databases.drop(name)
        self._made.clear()


def summary(trials: Sequence[Trial]) -> tuple[int, int]:
    """``(kills survived, kills tried)``: a trial whose job ended before the kill was no kill."""
    tried = [t for t in trials if t.killed]
    return sum(t.survived for t in tried), len(tried)


# -- the child ------------------------------------------------------------------------------------
def _main(argv: Sequence[str]) -> int:
    mode, name, folder, dsn = argv
    job = JOBS[name]
    ws = Workspace(Path(folder), "" if dsn == "-" else dsn)
    if mode == "run" and job.preload is not None:
        job.preload()
    print(_STARTED, flush=True)
    (job.prepare if mode == "prepare" else job.run)(ws)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
