"""The local index in a process of its own, reachable only by this user over a private channel.

ChromaDB's Rust bindings hold Python's GIL for the whole of every write and read call (10-25 ms,
spikes of ~100 ms), so indexing inside the desktop app froze its window however small the calls
were made. The app therefore opens the index folder in a child process and sends it each ChromaDB
call; the GUI process then only waits on a socket.

Why not ``chroma run`` on 127.0.0.1 (as before): chromadb 1.x's server has no working
authentication, so every local user could read and write the index while the app ran. The child
serves its client on a Unix socket in a fresh 0700 folder, behind an HMAC handshake with a random
key (:mod:`~kmds_desktop.index.private_channel`); no TCP port is opened.

One process owns a folder at a time. Whoever opens the folder, the index process or a plain
in-process client (the CLI, the self-test), first takes ``.kmds-index.lock`` in it. The index
process also writes ``kmds-index-process.json`` (socket, key, pid; mode 0600) once it listens, so
a CLI command of the same user run while the app is open uses the app's process instead of
opening the folder a second time. The child reads its standard input until end-of-file and exits
then, so it never outlives the app, even one that crashed; a file left by a killed process is
recognised as dead (its socket does not answer) and ignored.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import secrets
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kmds_desktop.index import embedding_service
from kmds_desktop.index.errors import IndexStoreError
from kmds_desktop.index.private_channel import SOCKET_NAME, RemoteClient, Server, private_socket_path

LOCK_FILE = ".kmds-index.lock"
SERVER_FILE = "kmds-index-process.json"
LOG_FILE = "kmds-index-process.log"
#: The hidden command-line word that runs :func:`serve` (see ``kmds_desktop.cli``).
COMMAND = "_index-process"
#: How long the app waits for a new index process to answer.
START_TIMEOUT_S = 60.0
#: How long a liveness check waits for an index process's heartbeat.
ANSWER_TIMEOUT_S = 10.0
#: How much lower the index process's CPU priority is than the app's (POSIX ``nice``).
NICENESS = 10
#: The environment variable that hands the child its token (the embedding service's password).
TOKEN_ENV = "KMDS_INDEX_TOKEN"  # noqa: S105 - the variable's name, not a secret
#: Exit status of a child that found the folder locked by another program.
EXIT_LOCKED = 3
#: A log larger than this is moved to ``<log>.1`` (replacing the one there) when a process starts.
LOG_KEEP_BYTES = 1 << 20
#: The line the app writes in the log before each start (the child's output follows it).
LOG_START_LINE = "--- index process starting {when} (app process {pid}) ---\n"


@dataclass(frozen=True)
class ServerAddress:
    """Where an index process answers: ChromaDB on its private ``socket`` (HMAC key ``authkey``),
    embeddings on 127.0.0.1:``embed_port`` (bearer ``token``)."""

    socket: str
    authkey: str = field(repr=False)  # hex; never shown
    pid: int
    host: str = "127.0.0.1"
    embed_port: int = 0
    token: str = field(default="", repr=False)

    def client(self) -> RemoteClient:
        return RemoteClient(self.socket, bytes.fromhex(self.authkey))


def _address(info: dict[str, Any]) -> ServerAddress:
    return ServerAddress(
        str(info["socket"]), str(info["authkey"]), int(info["pid"]), str(info.get("host") or "127.0.0.1"),
        int(info.get("embed_port") or 0), str(info.get("token") or ""),
    )


def folder_lock(folder: Path) -> Any:
    """The inter-process lock of an index folder (held by whichever process opened it).

    The same lock library as the embedded PostgreSQL's data folder uses. Take it with
    ``acquire(blocking=False)``, which answers at once whether another process has the folder.
    """
    import fasteners  # why: fasteners loads on first use, not at start-up

    return fasteners.InterProcessLock(str(folder / LOCK_FILE))


def live_server(folder: Path) -> ServerAddress | None:
    """The address of an index process serving ``folder``, if one is running and answers."""
    address = _read_server_file(folder)
    return address if address is not None and _answers(address) else None


def _read_server_file(folder: Path, token: str | None = None) -> ServerAddress | None:
    """The address the folder's server file names; None when there is none, it is damaged, or it is not
    this user's own file (its key is trusted, and the process it names answers in pickles: a file
    another user could write would be code run in this one)."""
    path = folder / SERVER_FILE
    try:
        info_stat = path.stat()
        if info_stat.st_uid != os.getuid() or info_stat.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None
        info = json.loads(path.read_text(encoding="utf-8"))
        if token is not None and info.get("token") != token:
            return None
        return _address(info)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError):
        return None


def _answers(address: ServerAddress, timeout: float = ANSWER_TIMEOUT_S) -> bool:
    """Whether the process at ``address`` passes the handshake and answers a heartbeat in time.

    The check runs on a helper thread that is left behind if the process never answers (a hung
    process must not hang the app; a live one answers in milliseconds, or after a long ChromaDB
    call in it has finished).
    """
    answered = threading.Event()

    def check() -> None:
        client = address.client()
        try:
            client.heartbeat()
            answered.set()
        except Exception:  # noqa: BLE001, S110 - gone, or not ours: not answering is the answer
            pass
        finally:
            client.close()

    thread = threading.Thread(target=check, name="kmds-index-heartbeat", daemon=True)
    thread.start()
    thread.join(timeout)
    return answered.is_set()


def _remove_dead_socket(folder: Path) -> None:
    """Remove the socket folder named in ``folder``'s server file (its process no longer answers)."""
    address = _read_server_file(folder)
    if address is not None:
        _remove_socket_folder(address)


def _remove_socket_folder(address: ServerAddress) -> None:
    """Remove the socket folder a killed index process left behind (in /tmp or the runtime
    folder): only a folder of ours, named as we name them, holding at most our socket."""
    sock = Path(address.socket)
    parent = sock.parent
    try:
        info = os.lstat(parent)
        if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid()
                or not parent.name.startswith("kmds-index-") or sock.name != SOCKET_NAME):
            return
        if {p.name for p in parent.iterdir()} - {SOCKET_NAME}:
            return
        if sock.exists() and stat.S_ISSOCK(os.lstat(sock).st_mode):
            sock.unlink()
        parent.rmdir()
    except OSError:
        pass


class IndexProcess:
    """A started index process of this app (stopped by :meth:`stop` or when the app exits)."""

    def __init__(self, folder: Path, process: subprocess.Popen[bytes], address: ServerAddress) -> None:
        self.folder = folder
        self.process = process
        self.address = address

    @property
    def log_path(self) -> Path:
        return self.folder / LOG_FILE

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """End the child: closing its standard input is its signal; killed if it does not go."""
        if self.process.poll() is None:
            try:
                if self.process.stdin is not None:
                    self.process.stdin.close()
                self.process.wait(timeout=timeout)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(timeout=timeout)
        _remove_server_file(self.folder, self.address.pid)
        _remove_socket_folder(self.address)  # a killed process cannot remove it itself


_started: dict[str, IndexProcess] = {}
_start_lock = threading.Lock()


def running(folder: Path) -> ServerAddress | None:
    """The address of this app's index process of ``folder`` while that process is alive."""
    with _start_lock:
        mine = _started.get(str(folder))
        return mine.address if mine is not None and mine.alive() else None


def ensure_server(folder: Path) -> ServerAddress:
    """The address of the index process of ``folder``: this app's, another copy's, or a new one."""
    key = str(folder)
    with _start_lock:
        mine = _started.get(key)
        if mine is not None and mine.alive():
            return mine.address
        if mine is not None:
            mine.stop(timeout=2)
            del _started[key]
        running = live_server(folder)  # e.g. a second window of the app on the same data folder
        if running is not None:
            return running
        _remove_dead_socket(folder)
        started = _start(folder)
        _started[key] = started
        return started.address


def recover(folder: Path) -> None:
    """After a call failed on the wire: replace this app's index process of ``folder`` if it no
    longer answers (a killed process can take a moment to be reaped, and looks alive meanwhile)."""
    key = str(folder)
    with _start_lock:
        mine = _started.get(key)
        if mine is None or (mine.alive() and _answers(mine.address)):
            return
        del _started[key]
    mine.stop(timeout=5)


def forget(folder: Path) -> None:
    """Stop this app's index process of ``folder`` (before the folder is moved aside)."""
    with _start_lock:
        mine = _started.pop(str(folder), None)
    if mine is not None:
        mine.stop()


def stop_all() -> None:
    """Stop every index process this app started (at exit)."""
    with _start_lock:
        procs = list(_started.values())
        _started.clear()
    for proc in procs:
        with contextlib.suppress(Exception):  # exiting must go on
            proc.stop()


atexit.register(stop_all)


def launch_command() -> list[str]:
    """How to run :func:`serve`: the bundle's own executable, or this Python with ``-m``."""
    if getattr(sys, "frozen", False):
        return [sys.executable, COMMAND]
    return [sys.executable, "-m", "kmds_desktop", COMMAND]


def _start(folder: Path) -> IndexProcess:
    token = uuid.uuid4().hex
    package_root = str(Path(__file__).resolve().parent.parent.parent)
    # Warnings and errors only: at its default level the server logs every request.
    env = dict(os.environ, ANONYMIZED_TELEMETRY="False", RUST_LOG=os.environ.get("KMDS_INDEX_LOG", "warn"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env[TOKEN_ENV] = token  # not on the command line, which every user of the machine can read
    # What the child says reaches its log at once, even when it ends without Python's clean-up
    # (os._exit, a library's exit(), a crash): its standard output to a file is otherwise held in
    # an 8 KiB buffer, and a child that printed why it stopped left an empty log. A fatal signal
    # (a crash in ChromaDB's or torch's native code) writes the Python stack there too.
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    log_path = folder / LOG_FILE
    try:
        log, start_offset = _open_log(log_path)
    except OSError as err:
        raise IndexStoreError(f"cannot write in the index folder {folder}: {err.strerror or err}") from None
    try:
        process = subprocess.Popen(
            [*launch_command(), "--path", str(folder)],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(folder),
            env=env,
        )
    except OSError as err:
        raise IndexStoreError(f"cannot start the index process: {err.strerror or err}") from None
    finally:
        log.close()
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        code = process.poll()
        if code is not None:
            raise IndexStoreError(_start_failure(folder, code, log_path, start_offset))
        address = _read_server_file(folder, token)
        if address is not None:
            return IndexProcess(folder, process, address)
        time.sleep(0.05)
    process.kill()
    process.wait(10)
    raise IndexStoreError(
        f"the index process for {folder} did not answer within {START_TIMEOUT_S:.0f} s; see {log_path}"
    )


def _open_log(log_path: Path) -> tuple[Any, int]:
    """The log for one more start, opened to append (handed to the child), and where this start's
    part begins.

    Appended, not rewritten: a failed start is followed by another one, which the app recovers
    with; rewritten, the log had lost the failure's output by the time the user read it. A log
    over :data:`LOG_KEEP_BYTES` is moved to ``<log>.1`` first. Each start begins with a line
    saying when (:data:`LOG_START_LINE`).
    """
    with contextlib.suppress(FileNotFoundError):
        if log_path.stat().st_size > LOG_KEEP_BYTES:
            os.replace(log_path, log_path.with_name(log_path.name + ".1"))
    log = open(log_path, "ab")  # noqa: SIM115 - handed to the child, closed right after
    try:
        line = LOG_START_LINE.format(when=time.strftime("%Y-%m-%d %H:%M:%S"), pid=os.getpid())
        log.write(line.encode("utf-8"))
        log.flush()
        return log, log.tell()
    except BaseException:
        log.close()
        raise


def _start_failure(folder: Path, code: int, log_path: Path, start_offset: int = 0) -> str:
    """Why the child ended before it served: what it wrote to its log at this start (the exception
    of a traceback, a fatal error's line, else its last lines), or that it wrote nothing."""
    if code == EXIT_LOCKED:
        return (
            f"the index folder {folder} is in use by another program (a `kmds-desktop index` or "
            "`ask` command still running?); semantic search works again once it has finished"
        )
    try:
        with open(log_path, "rb") as fh:
            fh.seek(start_offset)
            said = fh.read(LOG_KEEP_BYTES).decode("utf-8", errors="replace")
    except OSError:
        said = ""
    reason = start_reason(said)
    detail = f": {reason}" if reason else "; it wrote nothing to its log"
    return f"the index process for {folder} stopped at start ({_exit_words(code)}){detail}; see {log_path}"


def start_reason(output: str) -> str:
    """The reason in a child's output: the exception after the last traceback, or the line of a
    fatal error (faulthandler's), else its last three lines; "" when it wrote nothing."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith("Fatal Python error")]
    if fatal:
        return fatal[-1]
    headers = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if headers:
        after = [line for line in lines[headers[-1] + 1:] if not line[:1].isspace()]
        if after:
            return " | ".join(after[-3:])
    return " | ".join(lines[-3:])


def _exit_words(code: int) -> str:
    """``exit status N``, or the signal that ended the process (``killed by SIGSEGV``)."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _remove_server_file(folder: Path, pid: int) -> None:
    """Remove the server file if it is still the one of process ``pid`` (not a newer process's)."""
    path = folder / SERVER_FILE
    try:
        if int(json.loads(path.read_text(encoding="utf-8")).get("pid", -1)) == pid:
            path.unlink()
    except (OSError, ValueError, TypeError, AttributeError, OverflowError, RecursionError):
        pass


# ---------------------------------------------------------------------- the child


def serve(argv: list[str]) -> int:
    """Run the index process (the child side): lock the folder, serve it, exit on stdin's end."""
    parser = argparse.ArgumentParser(
        prog=f"kmds-desktop {COMMAND}", description="internal: the app's index process"
    )
    parser.add_argument("--path", required=True)
    parser.add_argument("--token", default="")
    args = parser.parse_args(argv)
    token = args.token or os.environ.pop(TOKEN_ENV, "") or uuid.uuid4().hex
    folder = Path(args.path).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder_lock(folder)
    if not lock.acquire(blocking=False):
        print(f"the index folder {folder} is locked by another process", file=sys.stderr, flush=True)
        return EXIT_LOCKED
    pid = os.getpid()
    if hasattr(os, "nice"):
        # Background work: when the index writes or compacts, the window's process gets the CPU first.
        with contextlib.suppress(OSError):
            os.nice(NICENESS)
    # why: chromadb loads on first use, not at start-up
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(folder), settings=Settings(anonymized_telemetry=False,
                                                                           allow_reset=False))

    authkey = secrets.token_bytes(32)
    server = Server(client, private_socket_path(), authkey, embed=embedding_service.encode_here)

    def finish() -> None:
        _remove_server_file(folder, pid)
        server.close()
        with contextlib.suppress(Exception):  # already released by the other path
            lock.release()

    def watch_parent() -> None:
        with contextlib.suppress(Exception):  # a broken pipe says the same as end-of-file
            sys.stdin.buffer.read()  # returns at end-of-file: the app closed the pipe or is gone
        finish()
        os._exit(0)

    # The app's embeddings are computed here too, so torch never loads in the window's process.
    embed_port = embedding_service.start(token)
    threading.Thread(target=watch_parent, name="kmds-index-parent", daemon=True).start()
    info = {"socket": str(server.path), "authkey": authkey.hex(), "pid": pid, "token": token,
            "host": "127.0.0.1", "embed_port": embed_port}
    # Only the user may read it: the key opens the index, the token the embedding service.
    _write_private(folder / SERVER_FILE, json.dumps(info))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        finish()
    return 0


def _write_private(path: Path, text: str) -> None:
    """Write ``path`` atomically with mode 0600 from the start."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
