"""Diagnose the data folder: the embedded server, the indexes, interrupted writes, free space, logs.

Why one function for ``kmds-desktop doctor`` and Help > Diagnose data folder: a user whose imports
fail after a full disk or a crash needs one place that says what state everything is in, repairs
what is safe to repair and says where the logs are, in the window and in a terminal alike.

What "safe" means here: the embedded PostgreSQL is brought back the way every start brings it back
(:meth:`~kmds_desktop.literature.store.server.EmbeddedServer.repair`: only when no live app process
uses it; committed data is kept, the WAL is replayed); an interrupted SQLite write is finished by
SQLite itself, opening the file read-write (it rolls a hot journal back only when no other
connection holds a lock on it). Nothing is deleted, rebuilt or moved: a damaged index is reported
with the command that rebuilds it.

Each check is a :class:`Finding` (``ok``, ``repaired``, ``warning``, ``problem`` or ``info``); the
report is text for the terminal and the dialog, and a dict for ``--json``.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kmds_desktop import paths
from kmds_desktop.config import load_settings
from kmds_desktop.index.store import finish_and_check, journal_of
from kmds_desktop.literature.errors import LiteratureError
from kmds_desktop.tasks import CancelToken, ProgressFn, check, report

#: The words of a finding's status, in the order a reader should look at them.
STATUSES = ("problem", "warning", "repaired", "ok", "info")
#: Below this much free space the report warns: an import of a few hundred MB would be refused.
LOW_SPACE_WARNING_BYTES = 1_000_000_000
_SQLITE_SUFFIXES = (".sqlite3", ".sqlite", ".db")


@dataclass
class Finding:
    """One thing checked: its area (server, indexes, journals, space), what, the verdict, and why."""

    area: str
    name: str
    status: str
    detail: str


@dataclass
class DoctorReport:
    """Everything :func:`diagnose_data_folder` found, and where the logs are."""

    data_folder: str
    findings: list[Finding] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)
    repaired: bool = False

    def add(self, area: str, name: str, status: str, detail: str) -> Finding:
        finding = Finding(area, name, status, detail)
        self.findings.append(finding)
        return finding

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "problem"]

    @property
    def healthy(self) -> bool:
        """No problem left (warnings, and what was repaired, do not count)."""
        return not self.problems

    def summary(self) -> str:
        """One line: the verdict and the counts."""
        counts = {s: sum(1 for f in self.findings if f.status == s) for s in STATUSES}
        parts = [f"{n} {s}" for s, n in counts.items() if n and s != "info"]
        verdict = "problems found" if counts["problem"] else "healthy"
        return f"{verdict} ({', '.join(parts) or 'nothing checked'})"

    def to_text(self) -> str:
        lines = [f"Data folder: {self.data_folder}", f"Diagnosis: {self.summary()}", ""]
        width = max((len(f.name) for f in self.findings), default=0)
        for finding in self.findings:
            lines.append(f"{finding.status.upper():<9} {finding.name:<{width}}  {finding.detail}")
        if self.logs:
            lines += ["", "Logs:"] + [f"  {name}: {path}" for name, path in self.logs.items()]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"data_folder": self.data_folder, "healthy": self.healthy, "summary": self.summary(),
                "repair": self.repaired, "findings": [asdict(f) for f in self.findings], "logs": self.logs}


def server_notes(database: Any) -> list[str]:
    """What the embedded server's start found and did (one sentence each, given out once): the
    window shows them as a message, the CLI as ``note:`` lines. None for an external database."""
    server = getattr(database, "server", None)
    return list(server.take_notes()) if server is not None else []


def diagnose_data_folder(*, repair: bool = True, settings: Any = None, progress: ProgressFn | None = None,
                         cancel: CancelToken | None = None) -> DoctorReport:
    """Check the data folder (see the module docstring); with ``repair``, repair what is safe.

    Blocks for seconds when the server needs bringing back (run it on a worker in the window)."""
    settings = settings or load_settings()
    root = paths.data_dir()
    result = DoctorReport(data_folder=str(root), repaired=repair)
    report(progress, 0, 4, "checking the embedded PostgreSQL")
    _check_server(result, root, settings, repair)
    check(cancel)
    report(progress, 1, 4, "checking the indexes")
    _check_indexes(result, root)
    check(cancel)
    report(progress, 2, 4, "checking for interrupted writes")
    _check_journals(result, root, repair)
    check(cancel)
    report(progress, 3, 4, "checking free space")
    _check_space(result, root)
    _list_logs(result, root)
    report(progress, 4, 4, "diagnosis done")
    return result


def _check_server(result: DoctorReport, root: Path, settings: Any, repair: bool) -> None:
    # why: start-up time: it loads fasteners, psycopg
    from kmds_desktop.literature.store.server import EmbeddedServer, format_bytes

    literature = getattr(settings, "literature", None)
    if literature is not None and getattr(literature, "mode", "embedded") == "external":
        result.add("server", "literature database", "info",
                   f"an external PostgreSQL ({literature.host}:{literature.port}, database "
                   f"{literature.dbname}) is configured; it is not diagnosed here")
    folder = root / "postgres"
    if not (folder / "pgdata").exists():
        result.add("server", "embedded PostgreSQL", "info", "not created yet (the first use creates it)")
        return
    try:
        server = EmbeddedServer(folder)
        diag = server.diagnose()
    except LiteratureError as err:
        result.add("server", "embedded PostgreSQL", "problem", str(err))
        return
    result.logs["embedded PostgreSQL"] = str(diag.log_path)
    users = (f"; used by KMDS Desktop process {', '.join(map(str, diag.clients))}" if diag.clients
             else "")
    if not (diag.wedged or diag.state == "stale"):
        status = "ok" if diag.state in ("ready", "stopped", "busy") else "info"
        result.add("server", "embedded PostgreSQL", status, diag.describe() + users)
        return
    if not repair:
        result.add("server", "embedded PostgreSQL", "problem",
                   f"{diag.describe()}{users}; run 'kmds-desktop doctor' without --no-repair to bring "
                   "it back")
        return
    try:
        note, after = server.repair()
    except LiteratureError as err:
        result.add("server", "embedded PostgreSQL", "problem", f"{diag.describe()}{users}; {err}")
        return
    if after.state != "ready":
        result.add("server", "embedded PostgreSQL", "problem",
                   f"{note or diag.describe()} It did not come back: {after.describe()}; see its log "
                   f"{after.log_path}")
        return
    stopped = "" if after.clients else " It answered, and was stopped again as no KMDS Desktop uses it."
    result.add("server", "embedded PostgreSQL", "repaired", f"{note}{stopped}")
    if after.low_space:
        result.add("server", "embedded PostgreSQL disk", "problem",
                   f"only {format_bytes(after.free_bytes or 0)} free on {after.data_folder}: free space "
                   "there")


def _check_indexes(result: DoctorReport, root: Path) -> None:
    _check_topk(result, root / "topk")
    _check_chroma(result, root / "index")


def _check_topk(result: DoctorReport, folder: Path) -> None:
    """Each database's top-k index folder: its ``state.json`` says whether its build finished."""
    # why: start-up time: the window imports this module at start, that one only when needed
    from kmds_desktop.literature.store.topk_index import BuildState

    try:
        indexes = sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        result.add("indexes", "fast search index", "info", "none built yet")
        return
    for index in indexes:
        name = f"fast search index {index.name[:12]}"
        state = BuildState.load(index / "state.json")
        if state is None:
            result.add("indexes", name, "warning",
                       f"{index}: no readable state.json (a first build was interrupted); File > Build fast "
                       "search index (or 'kmds-desktop literature topk build') builds it again")
        elif not state.complete:
            result.add("indexes", name, "warning",
                       f"{index}: an unfinished build (up to document id {state.last_id:,}); building again "
                       "goes on from there")
        else:
            result.add("indexes", name, "ok", f"complete, {state.documents:,} documents ({index})")


def _check_chroma(result: DoctorReport, folder: Path) -> None:
    """The semantic index's ChromaDB database: present, and SQLite opens it and reads its tables."""
    db = folder / "chroma.sqlite3"
    if not db.exists():
        result.add("indexes", "semantic index", "info", f"none built yet ({folder})")
        return
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            tables = int(con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
        finally:
            con.close()
    except sqlite3.DatabaseError as err:
        if journal_of(db) is not None:  # a read-only open cannot finish an interrupted write: see journals
            result.add("indexes", "semantic index", "warning", f"{db} has an interrupted write ({err}); "
                       "see the journal line below")
            return
        result.add("indexes", "semantic index", "problem",
                   f"{db} cannot be read ({err}); 'kmds-desktop index rebuild' (View > Rebuild the "
                   "semantic index) builds it again from the knowledge bases")
        return
    result.add("indexes", "semantic index", "ok", f"ChromaDB database opens, {tables} schema entries ({db})")


def _sqlite_files(root: Path) -> list[Path]:
    """The app's SQLite files: at most two folders deep in the data folder (index/, screening/ ...)."""
    found: list[Path] = []
    for pattern in ("*", "*/*"):
        found += [p for p in root.glob(pattern) if p.is_file() and p.name.endswith(_SQLITE_SUFFIXES)]
    return sorted(found)


def _check_journals(result: DoctorReport, root: Path, repair: bool) -> None:
    """A journal or WAL left beside a SQLite file: a write a kill or a full disk interrupted (or one
    in progress in a running app). With ``repair`` SQLite finishes it: a read-write open rolls a hot
    journal back or replays the WAL, and leaves a journal that another connection is using alone."""
    journals = [(db, j) for db in _sqlite_files(root) if (j := journal_of(db)) is not None]
    if not journals:
        result.add("journals", "interrupted writes", "ok", "no SQLite journal left behind")
        return
    for db, journal in journals:
        name = f"journal of {db.name}"
        if not repair:
            result.add("journals", name, "warning",
                       f"{journal} ({journal.stat().st_size:,} bytes): an interrupted write, or one in "
                       "progress in a running app; 'kmds-desktop doctor' finishes it")
            continue
        lock = _index_lock(db)
        if lock is not None and not lock.acquire(blocking=False):
            result.add("journals", name, "info", f"{journal}: the index is open in a running app, whose "
                       "write it is")
            continue
        try:
            verdict = finish_and_check(db)
        except sqlite3.DatabaseError as err:
            result.add("journals", name, "problem", f"{db} cannot be opened to finish its write ({err})")
            continue
        finally:
            if lock is not None:
                lock.release()
        if verdict != "ok":
            result.add("journals", name, "problem", f"{db} fails SQLite's check ({verdict})")
        elif journal_of(db) is None:
            result.add("journals", name, "repaired", f"SQLite finished the interrupted write of {db}")
        else:
            result.add("journals", name, "info", f"{journal} stays: another connection is using {db}")


def _index_lock(db: Path) -> Any | None:
    """The semantic index folder's lock for ChromaDB's file (its process holds it), else None."""
    if db.name != "chroma.sqlite3":
        return None
    # why: start-up time: the window imports this module at start, that one only when needed
    from kmds_desktop.index.index_process import folder_lock

    return folder_lock(db.parent)


def _check_space(result: DoctorReport, root: Path) -> None:
    # why: start-up time: it loads fasteners, psycopg
    from kmds_desktop.literature.store.server import LOW_SPACE_BYTES, format_bytes, free_bytes, import_room

    free = free_bytes(root)
    if free is None:
        result.add("space", "free space", "warning", f"the free space on {root} cannot be read")
        return
    text = (f"{format_bytes(free)} free on {root}: room to import about {format_bytes(import_room(free))} "
            "of files (the import's own estimate)")
    if free < LOW_SPACE_BYTES:
        result.add("space", "free space", "problem", f"{text}; the disk is full: free space there or "
                   "choose another data folder (--data-dir or KMDS_DESKTOP_HOME)")
    elif free < LOW_SPACE_WARNING_BYTES:
        result.add("space", "free space", "warning", text)
    else:
        result.add("space", "free space", "ok", text)


def _list_logs(result: DoctorReport, root: Path) -> None:
    logs = root / "logs"
    try:
        for path in sorted(logs.glob("*.log")):
            result.logs.setdefault(path.stem, str(path))
    except OSError:
        pass
    if not any(name != "embedded PostgreSQL" for name in result.logs):
        result.logs["app"] = str(logs / "kmds-desktop.log")
