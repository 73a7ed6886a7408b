"""Real faults for the embedded PostgreSQL: a small disk that fills, a server left shutting down, a
stale ``postmaster.pid``, a hot SQLite journal, and the app run as a separate process.

Each fault is made the way it happens to a user: an earlier app process that started the server and
then died without releasing it (``os._exit``, as after ``kill -9``), a backend that never ends
(SIGSTOP) while a fast shutdown waits for it, a postmaster killed with SIGKILL, a write transaction
whose process died with its journal on disk. Nothing is simulated in the app's code.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]


def run_cli(home: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``kmds-desktop --data-dir HOME ARGS`` as a separate process, as a user runs it."""
    env = {**os.environ, "KMDS_DESKTOP_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "kmds_desktop", "--data-dir", str(home), *args], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=timeout)


def run_python(code: str, home: Path, timeout: float = 180) -> str:
    """Run ``code`` in a new interpreter with the data folder ``home``; its stdout (must exit 0)."""
    env = {**os.environ, "KMDS_DESKTOP_HOME": str(home)}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@contextlib.contextmanager
def small_disk(mount_point: Path, size: str) -> Iterator[Path]:
    """A real file system of ``size`` (tmpfs) at ``mount_point``: a disk that fills for real.

    Needs root (CI runs as root); where the mount is refused the test FAILS with the reason, never
    skips: the fault tests are the evidence that a full disk is survived."""
    mount_point.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"cannot mount a {size} tmpfs at {mount_point} for the full-disk test (run the tests as "
                    f"root, as CI does): {done.stderr.strip() or done.returncode}")
    try:
        yield mount_point
    finally:
        if subprocess.run(["umount", str(mount_point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def fill_disk(path: Path) -> Path:
    """Write ``path`` until the disk is full (ENOSPC); the filler file, to delete to free the space."""
    chunk = b"\0" * (1 << 16)
    with open(path, "ab", buffering=0) as fh:  # unbuffered: nothing left over for close() to fail on
        try:
            while fh.write(chunk):
                pass
        except OSError:
            pass
    return path


def server_processes(pgdata: Path) -> list[psutil.Process]:
    """The postmaster of ``pgdata`` (from its pid file) and its children, if it runs."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().splitlines()[0])
        postmaster = psutil.Process(pid)
        return [postmaster, *postmaster.children(recursive=True)]
    except (OSError, ValueError, IndexError, psutil.Error):
        return []


def kill_processes(processes: list[psutil.Process]) -> None:
    """SIGKILL what is left of the processes a test made stuck (teardown after a failure)."""
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(processes, timeout=10)


_DEAD_INSTANCE = """
    import os
    from kmds_desktop.literature.store.server import EmbeddedServer
    server = EmbeddedServer({root!r}).start()  # registers this process
    {then}
    print(server.pid(), flush=True)
    os._exit(0)  # gone without releasing the server: as after kill -9
"""


def dead_instance_left_server(home: Path, then: str = "") -> int:
    """An earlier app process started the embedded server of ``home`` and died without releasing it
    (its pid stays in ``clients.json``, dead). Runs ``then`` (code using ``server``) before dying;
    returns the postmaster's pid."""
    code = textwrap.dedent(_DEAD_INSTANCE).format(root=str(home / "postgres"), then=then)
    return int(run_python(code, home).splitlines()[-1])


def leave_server_shutting_down(home: Path) -> int:
    """The embedded server of ``home`` stuck "shutting down" for good: a backend that never ends
    (SIGSTOP) holds up the fast shutdown an earlier app process asked for before dying. Returns the
    postmaster's pid once its ``postmaster.pid`` says "stopping"."""
    pid = dead_instance_left_server(home, then=textwrap.dedent("""
        import signal, psycopg
        conn = psycopg.connect(**server.conninfo("postgres"), autocommit=True)
        os.kill(conn.execute("SELECT pg_backend_pid()").fetchone()[0], signal.SIGSTOP)
        """))
    os.kill(pid, signal.SIGINT)  # what `pg_ctl stop -m fast` sends
    pid_file = home / "postgres" / "pgdata" / "postmaster.pid"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lines = pid_file.read_text().splitlines()
        if len(lines) >= 8 and lines[7].strip() == "stopping":
            return pid
        time.sleep(0.1)
    raise AssertionError(f"the server did not reach 'stopping': {pid_file.read_text()!r}")


def leave_stale_pid_file(home: Path) -> int:
    """The embedded server of ``home`` killed with SIGKILL (postmaster and children), its
    ``postmaster.pid`` left behind naming a dead process. Returns that pid."""
    pid = dead_instance_left_server(home)
    processes = server_processes(home / "postgres" / "pgdata")
    kill_processes(processes)
    assert (home / "postgres" / "pgdata" / "postmaster.pid").exists()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    return pid


def leave_hot_journal(db: Path, rows: int = 10) -> None:
    """A SQLite database with ``rows`` committed rows and a hot rollback journal: a process died in
    the middle of a write transaction that had already spilled pages into the database file."""
    code = f"""
        import os, sqlite3
        con = sqlite3.connect({str(db)!r}, isolation_level=None)
        con.execute("PRAGMA journal_mode=DELETE")
        con.execute("CREATE TABLE IF NOT EXISTS t (x BLOB)")
        con.execute("INSERT INTO t SELECT randomblob(100) FROM (WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL "
                    "SELECT i + 1 FROM c WHERE i < {rows}) SELECT i FROM c)")
        con.execute("PRAGMA cache_size=1")  # the write below spills into the file before any commit
        con.execute("BEGIN")
        con.execute("INSERT INTO t SELECT randomblob(4000) FROM (WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL "
                    "SELECT i + 1 FROM c WHERE i < 500) SELECT i FROM c)")
        os._exit(0)  # killed mid-transaction
    """
    run_python(code, db.parent)
    journal = db.with_name(db.name + "-journal")
    assert journal.exists() and journal.stat().st_size > 0, "no hot journal was left"


def sqlite_rows(db: Path) -> int:
    import sqlite3

    con = sqlite3.connect(str(db))
    try:
        return int(con.execute("SELECT count(*) FROM t").fetchone()[0])
    finally:
        con.close()


def load_json(text: str) -> Any:
    return json.loads(text)
