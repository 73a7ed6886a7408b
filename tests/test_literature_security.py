"""Fault injection on the embedded server: pre-empted socket folders, racing starts, stale pid files.

Real processes and a real PostgreSQL throughout; loops are bounded. When the suite runs as root (as
CI does) the "attacker" is a second OS user (``kmds-probe``, created with ``useradd`` if missing) so
the file-system permissions are what stops it, exactly as on a shared workstation.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psycopg
import pytest

from kmds_desktop.literature.errors import ServerStartError
from kmds_desktop.literature.store.server import EmbeddedServer, _check_private_dir

REPO = Path(__file__).resolve().parent.parent
ATTACKER = "kmds-probe"


def _attacker_prefix() -> list[str]:
    """Command prefix that runs as the second user when we are root (else as ourselves)."""
    if os.geteuid() != 0:
        return []
    import pwd

    try:
        pwd.getpwnam(ATTACKER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", ATTACKER],
                       check=True, capture_output=True)
    return ["runuser", "-u", ATTACKER, "--"]


def _as_attacker(code: str) -> subprocess.CompletedProcess[str]:
    """Run stdlib-only Python as the attacker (a system Python: the venv may be unreadable to it)."""
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    return subprocess.run([*_attacker_prefix(), python, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60)


def _long_root() -> Path:
    """A server root whose socket path is too long for sun_path (so the socket goes to the temp dir)."""
    base = Path(tempfile.mkdtemp(prefix="kmds-sec-"))
    root = base / ("long-folder-name-" * 5) / "postgres"
    root.mkdir(parents=True)
    assert len(str(root / "pgdata" / ".s.PGSQL.5432")) >= 100
    return root


def _old_predictable_name(root: Path) -> Path:
    pgdata = root.resolve() / "pgdata"
    return Path(tempfile.gettempdir()) / f"kmds-pg-{hashlib.sha256(str(pgdata).encode()).hexdigest()[:12]}"


def _cleanup(server: EmbeddedServer, *paths: Path) -> None:
    server.destroy()
    for path in paths:
        if path.is_symlink() or path.is_file():
            path.unlink(missing_ok=True)
        else:
            shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("attack", ["open-folder", "symlink"])
def test_a_pre_empted_socket_folder_is_never_used(attack):
    root = _long_root()
    predictable = _old_predictable_name(root)
    victim = Path(tempfile.mkdtemp(prefix="kmds-victim-"))  # what a symlink would make us chown
    victim.chmod(0o755)
    victim_before = victim.stat()
    if attack == "open-folder":
        where = str(predictable)
        made = _as_attacker(f"import os; os.mkdir({where!r}); os.chmod({where!r}, 0o777)")
    else:
        made = _as_attacker(f"import os; os.symlink({str(victim)!r}, {str(predictable)!r})")
    assert made.returncode == 0, made.stderr
    server = EmbeddedServer(root, durable=False)
    try:
        server.start()
        sock = server.socket_dir()
        assert sock is not None and sock != predictable and sock.resolve() != victim
        st = os.lstat(sock)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
        assert st.st_uid == (server._user[0] if server._user else os.getuid())
        with psycopg.connect(**server.conninfo(), connect_timeout=10) as conn:  # the app itself gets in
            assert conn.execute("SELECT 1").fetchone() == (1,)
        # nothing of ours went into the attacker's folder, and nothing of theirs was chowned or chmodded
        after = os.lstat(predictable)
        if attack == "open-folder":
            assert stat.S_IMODE(after.st_mode) == 0o777 and not any(predictable.iterdir())
        else:
            assert stat.S_ISLNK(after.st_mode)
        victim_after = victim.stat()
        assert (victim_after.st_uid, victim_after.st_mode) == (victim_before.st_uid, victim_before.st_mode)
        assert not any(victim.iterdir())
        # the attacker cannot reach the socket, even knowing where it is
        attempt = _as_attacker(
            f"""
            import socket, sys
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect({str(sock / '.s.PGSQL.5432')!r})
            except OSError as err:
                print(type(err).__name__); sys.exit(3)
            print("connected")
            """
        )
        if os.geteuid() == 0:  # a real second user: the 0700 folder stops it
            assert attempt.returncode == 3, attempt.stdout + attempt.stderr
            assert "PermissionError" in attempt.stdout
    finally:
        _cleanup(server, predictable, victim, root.parents[1])
    assert not sock.exists()  # the server's private socket folder goes with it


def test_a_socket_folder_others_may_enter_is_refused_with_a_clear_message():
    root = _long_root()
    server = EmbeddedServer(root, durable=False)
    try:
        server.start()
        sock = server.socket_dir()
        assert sock is not None
        sock.chmod(0o777)  # as if someone had loosened it
        with pytest.raises(ServerStartError) as info:
            server.conninfo()
        message = str(info.value)
        assert "refusing to use the socket folder" in message and "777" in message and "\n" not in message
        sock.chmod(0o700)
        with psycopg.connect(**server.conninfo(), connect_timeout=10) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        _cleanup(server, root.parents[1])


def test_private_folder_check_refuses_symlinks_and_foreign_owners(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    real.chmod(0o700)
    _check_private_dir(real, os.getuid(), "test folder")  # a real private folder passes
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(ServerStartError, match="is a symbolic link"):
        _check_private_dir(link, os.getuid(), "test folder")
    with pytest.raises(ServerStartError, match="belongs to uid"):
        _check_private_dir(real, os.getuid() + 1, "test folder")
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(ServerStartError, match="is not a folder"):
        _check_private_dir(afile, os.getuid(), "test folder")


_STARTER = """
import os, sys, time
from pathlib import Path
from kmds_desktop.literature import open_database
go, count = Path(sys.argv[1]), int(sys.argv[2])
(go.parent / f"ready-{os.getpid()}").touch()  # imported: the race starts when all are
for _ in range(2000):  # wait for the common start signal (bounded)
    if go.exists():
        break
    time.sleep(0.005)
db = open_database()
print(db.status()["schema_version"], db.server.pid(), flush=True)
# Stay until every process has its connection: one that finished and left first would stop the
# shared server as its last user, and the next would rightly start another.
(go.parent / f"in-{os.getpid()}").touch()
for _ in range(6000):  # bounded: 60 s
    if len(list(go.parent.glob("in-*"))) >= count:
        break
    time.sleep(0.01)
db.close()
"""


def test_processes_starting_at_once_on_a_fresh_data_folder_all_succeed():
    """2-3 processes race through initdb, server start, CREATE DATABASE and the schema, 4 times."""
    failures: list[str] = []
    for run in range(4):
        home = Path(tempfile.mkdtemp(prefix="kmds-race-"))
        go = home / "go"
        env = {**os.environ, "KMDS_DESKTOP_HOME": str(home), "PYTHONPATH": str(REPO)}
        count = 3 if run % 2 == 0 else 2
        procs = [subprocess.Popen([sys.executable, "-c", _STARTER, str(go), str(count)], cwd=REPO, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(count)]
        for _ in range(600):  # bounded: until every process has imported the app (60 s)
            if len(list(home.glob("ready-*"))) >= count:
                break
            time.sleep(0.1)
        go.touch()
        outs = [p.communicate(timeout=180) for p in procs]
        try:
            pids = set()
            for proc, (out, err) in zip(procs, outs, strict=True):
                if proc.returncode != 0 or "Traceback" in err:
                    failures.append(f"run {run}: exit {proc.returncode}: {err.strip()[-400:]}")
                    continue
                version, pid = out.split()
                pids.add(pid)
            assert len(pids) <= 1, f"run {run}: more than one server was started: {pids}"
            assert not EmbeddedServer(home / "postgres").is_running()  # the last one out stopped it
        finally:
            shutil.rmtree(home, ignore_errors=True)
    assert failures == []


def test_a_stale_pid_file_naming_another_postgres_is_recognised_as_stale(pg_server):
    """After a crash the pid in postmaster.pid may belong to another postgres: not ours, start anyway."""
    root = Path(tempfile.mkdtemp(prefix="kmds-stale-"))
    server = EmbeddedServer(root, durable=False)
    try:
        server.start()
        server.stop("immediate")
        other = (pg_server.pgdata / "postmaster.pid").read_text()  # a live postgres, another folder
        assert pg_server.is_running()
        (server.pgdata / "postmaster.pid").write_text(other)
        assert not server.is_running()
        server.start()
        assert server.is_running() and server.pid() != pg_server.pid()
        with psycopg.connect(**server.conninfo(), connect_timeout=10) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert pg_server.is_running()  # the other server was left alone
    finally:
        server.destroy()
        shutil.rmtree(root, ignore_errors=True)


def test_a_server_crash_gives_no_traceback_and_the_next_request_restarts_it():
    home = Path(tempfile.mkdtemp(prefix="kmds-crash-"))
    code = """
    import os, signal, time
    from kmds_desktop.literature import open_database
    from kmds_desktop.literature.errors import DatabaseUnavailable
    db = open_database()
    first = db.server.pid()
    os.kill(first, signal.SIGKILL)
    for _ in range(500):  # bounded wait until the postmaster is gone
        if not db.server.is_running():
            break
        time.sleep(0.01)
    try:
        db.status()
        print("no-error")
    except DatabaseUnavailable as err:
        print("unavailable:", str(err).splitlines()[0][:60])
    try:
        print(db.status()["schema_version"], db.server.pid() != first)
    except Exception:
        import sys
        print(open(db.server.log_path, errors="replace").read()[-4000:], file=sys.stderr)
        raise
    """
    env = {**os.environ, "KMDS_DESKTOP_HOME": str(home), "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        lines = done.stdout.strip().splitlines()
        assert lines[0].startswith("unavailable: lost the connection"), lines
        assert lines[1].endswith("True")  # a new server answered the next request
        assert not EmbeddedServer(home / "postgres").is_running()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_kill_during_exit_gives_no_traceback():
    """The server stopped by someone else just as the app exits: one log line, no traceback."""
    home = Path(tempfile.mkdtemp(prefix="kmds-exit-"))
    code = """
    import os, signal
    from kmds_desktop.literature import open_database
    db = open_database()
    os.kill(db.server.pid(), signal.SIGKILL)
    """
    env = {**os.environ, "KMDS_DESKTOP_HOME": str(home), "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_the_data_folder_and_what_the_app_writes_there_are_private():
    """A real CLI run: data folder, its sub-folders and files are the user's alone."""
    home = Path(tempfile.mkdtemp(prefix="kmds-perm-"))
    data = home / "data"
    data.mkdir()
    data.chmod(0o755)  # as an older version left it
    code = """
    import sys
    from pathlib import Path
    from kmds_desktop import cli, paths
    from kmds_desktop.config import Settings, save_settings
    from kmds_desktop.kb import load_kb, save_kb
    code = cli.main(["--data-dir", sys.argv[1], "kb", "show", str(paths.demo_kb_path())])
    save_settings(Settings())
    save_kb(load_kb(paths.demo_kb_path()), paths.sub_dir("recovery") / "demo.recovered.xml")
    from kmds_desktop.app.workspace import path_to_open
    path_to_open(paths.demo_kb_path())  # the user's copy of the demo KB
    sys.exit(code)
    """
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), str(data)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        written = [data, *data.rglob("*")]
        assert {p.name for p in written} >= {"logs", "kmds-desktop.log", "settings.json", "recovery",
                                             "demo.recovered.xml", "demo"}
        assert any(p.parent.name == "demo" and p.suffix == ".xml" for p in written)
        loose = [f"{p} {stat.S_IMODE(p.stat().st_mode):o}" for p in written
                 if stat.S_IMODE(p.stat().st_mode) & (0o066 if os.geteuid() == 0 else 0o077)]
        assert loose == []
    finally:
        shutil.rmtree(home, ignore_errors=True)
