"""ChromaDB clients: the local store in a folder, an in-memory store, or a Chroma server.

ChromaDB keeps one internal "system" per folder and refuses a second client for the same folder
with different settings, so every client here is made from one process-wide settings template
(telemetry off) and clients are shared per folder. Collections are always created *and* fetched
with ``embedding_function=None``: the index supplies its own vectors, and without that argument
ChromaDB would try to download its default ONNX model.

Failures become :class:`~kmds_desktop.index.errors.SemanticIndexError` subclasses whose message
names the folder or server and what to do.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import logging
import re
import shutil
import socket
import sqlite3
import stat
import threading
import time
from pathlib import Path
from typing import Any

from kmds_desktop.index import index_process
from kmds_desktop.index.errors import (
    ChromaServerUnreachable,
    IndexCorruptedError,
    IndexProcessStopped,
    IndexStoreError,
    SemanticIndexError,
)

#: Bumped when the layout of entries changes; stored on the collection.
INDEX_FORMAT = 3
SERVER_CONNECT_TIMEOUT_S = 3.0
_SQLITE_FILE = "chroma.sqlite3"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

log = logging.getLogger(__name__)

_settings_template: Any = None
_clients: dict[str, Any] = {}
_locks: dict[str, Any] = {}
_lock = threading.Lock()


def _settings() -> Any:
    """A copy of the one settings template of this process (ChromaDB mutates what it is given)."""
    global _settings_template
    from chromadb.config import Settings  # why: chromadb loads on first use, not at start-up

    if _settings_template is None:
        _settings_template = Settings(anonymized_telemetry=False, allow_reset=False)
    return _settings_template.model_copy(deep=True)


def rebuild_hint(persist_dir: str | Path) -> str:
    return (
        f"rebuild it with `kmds-desktop index KB_FILE --rebuild` (the damaged index at {persist_dir} "
        "is moved aside, never deleted; your KB files are not touched)"
    )


def local_client(persist_dir: str | Path) -> Any:
    """The shared client of ``persist_dir``: in this process, or the app's index process if it runs.

    Opening a folder in-process takes its lock (see :mod:`~kmds_desktop.index.index_process`), so
    two processes never write one folder; a folder the app is serving is used through its process.
    """
    path = _usable_folder(persist_dir)
    key = str(path)
    with _lock:
        client = _clients.get(key)
        if client is not None:
            return client
        _check_sqlite(path)
        address = index_process.live_server(path)
        if address is not None:
            client = _process_channel(address, path)
            _clients[key] = client
            return client
        lock = _take_folder_lock(path)
        import chromadb  # why: chromadb loads on first use, not at start-up

        try:
            client = chromadb.PersistentClient(path=key, settings=_settings())
            client.heartbeat()
        except Exception as err:  # noqa: BLE001 - ChromaDB raises many types for a damaged store
            _forget_system(key)
            lock.release()
            raise IndexCorruptedError(
                f"the index folder {path} cannot be opened ({type(err).__name__}: {_first_line(err)}); "
                + rebuild_hint(path),
                str(path),
            ) from None
        _clients[key] = client
        _locks[key] = lock
        return client


def process_client(persist_dir: str | Path) -> Any:
    """A client of the app's index process for ``persist_dir`` (started when none runs).

    Used by the desktop app: ChromaDB calls made in the app's own process hold the GIL and freeze
    the window, calls to the index process only wait on a socket. It runs before every index call,
    so while this app's process is alive the cached client is returned without touching the folder.
    """
    path = Path(persist_dir).expanduser().resolve()
    key = f"process:{path}"
    running = index_process.running(path)
    with _lock:
        cached = _clients.get(key)
        if running is not None and cached is not None and cached[0] == running:
            return cached[1]
    path = _usable_folder(path)
    with _lock:
        if str(path) in _locks:
            raise IndexStoreError(
                f"the index folder {path} is already open in this process; it cannot also be served"
            )
        _check_sqlite(path)
    address = index_process.ensure_server(path)
    with _lock:
        cached = _clients.get(key)
        if cached is not None and cached[0] == address:
            return cached[1]
        client = _process_channel(address, path)
        _clients[key] = (address, client)
        return client


def _process_channel(address: index_process.ServerAddress, folder: Path) -> Any:
    """A client of the index process at ``address`` (its private, authenticated channel)."""
    client = address.client()
    try:
        client.heartbeat()
    except Exception as err:  # noqa: BLE001 - the process went away between the check and now
        raise IndexStoreError(
            f"the index process for {folder} does not answer ({type(err).__name__}: {_first_line(err)}); "
            "try again (a new one is started)"
        ) from None
    return client


def _usable_folder(persist_dir: str | Path) -> Path:
    path = Path(persist_dir).expanduser()
    if path.exists() and not path.is_dir():
        raise not_a_folder(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        path = path.resolve()
        mode = path.stat().st_mode
        if mode & (stat.S_IWGRP | stat.S_IWOTH) and not mode & stat.S_ISVTX:
            # its server file and socket would be another user's to replace (the default folder is 0700)
            raise IndexStoreError(
                f"cannot use index folder {path}: other users can write in it. Choose a folder only you "
                f"can write (chmod 700 {path}), or --data-dir / KMDS_DESKTOP_HOME")
        probe = path / ".kmds-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise IndexStoreError(
            f"cannot use index folder {path}: {err.strerror or err}. Choose a writable folder "
            "(--data-dir or KMDS_DESKTOP_HOME) or fix its permissions"
        ) from None
    return path


def _take_folder_lock(path: Path, wait_s: float = 10.0) -> Any:
    """Lock ``path`` for this process; while an index process is starting there, wait a little."""
    lock = index_process.folder_lock(path)
    deadline = time.monotonic() + wait_s
    while not lock.acquire(blocking=False):
        if time.monotonic() > deadline:
            raise IndexStoreError(
                f"the index folder {path} is in use by another program (another `kmds-desktop` "
                "command?); try again when it has finished"
            )
        time.sleep(0.2)
    return lock


def not_a_folder(path: Path) -> IndexCorruptedError:
    """The error for an index path where something other than a folder (a file) stands."""
    return IndexCorruptedError(
        f"the index path {path} is not a folder (a file is in its place); move it away, or "
        + rebuild_hint(path), str(path))


def _segment_folders(path: Path) -> list[Path]:
    """ChromaDB's vector segment folders (named by UUID) in an index folder."""
    try:
        return [p for p in path.iterdir() if p.is_dir() and _UUID.fullmatch(p.name)]
    except OSError:
        return []


def _check_sqlite(path: Path) -> None:
    """Fail early and clearly on a damaged ChromaDB database file (ChromaDB's own error is obscure).

    A missing or zero-length database beside vector segment folders is damage too, not a new
    index: ChromaDB would silently start an empty one there, and every KB's entries would be gone
    while the old segments stayed behind, orphaned. (ChromaDB never leaves its database empty: it
    creates its tables at once.)
    """
    db = path / _SQLITE_FILE
    if not db.exists():
        segments = _segment_folders(path)
        if segments:
            raise IndexCorruptedError(
                f"the index database {db} is missing while {len(segments)} vector segment folder(s) "
                "remain beside it; " + rebuild_hint(path), str(path))
        return
    try:
        if db.stat().st_size == 0:
            raise IndexCorruptedError(f"the index database {db} is empty (0 bytes); " + rebuild_hint(path),
                                      str(path))
    except OSError as err:
        raise IndexStoreError(f"cannot read the index database {db}: {err.strerror or err}") from None
    if journal_of(db) is not None:
        _recover_journal(path, db)
        return
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            con.close()
    except sqlite3.DatabaseError as err:
        raise IndexCorruptedError(
            f"the index database {db} is damaged ({err}); " + rebuild_hint(path), str(path)
        ) from None


def journal_of(db: Path) -> Path | None:
    """The rollback journal or write-ahead log beside ``db``, if one is there (a write in progress, or
    one a kill or a full disk interrupted)."""
    for suffix in ("-journal", "-wal"):
        journal = db.with_name(db.name + suffix)
        try:
            if journal.stat().st_size > 0:
                return journal
        except OSError:
            continue
    return None


def finish_and_check(db: Path) -> str:
    """Open ``db`` read-write, which lets SQLite finish an interrupted write (roll a hot journal back,
    replay a WAL), and return its quick check's verdict ("ok" when sound). Raises
    :class:`sqlite3.DatabaseError` when the file cannot be opened at all. Callers hold the folder's lock:
    recovery writes the database file."""
    con = sqlite3.connect(str(db), timeout=5)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return str(con.execute("PRAGMA quick_check(1)").fetchone()[0])
    finally:
        con.close()


def _recover_journal(path: Path, db: Path) -> None:
    """Let SQLite finish an interrupted write: a read-write open rolls a hot journal back (or replays a
    WAL), which a read-only open cannot do; it then failed with "attempt to write a readonly database"
    and a healthy index was reported damaged.

    Why under the folder's lock: only a folder no live process has open can hold a *hot* journal, and
    recovery writes the database file. When another process holds the lock, its journal belongs to its
    write in progress (SQLite tells the two apart by its own locks) and that process's ChromaDB, which
    opens read-write, recovers it if it ever needs to: nothing is judged here. A database that still
    fails after recovery is damaged."""
    lock = index_process.folder_lock(path)
    if not lock.acquire(blocking=False):
        return
    try:
        verdict = finish_and_check(db)
        if verdict != "ok":
            raise sqlite3.DatabaseError(verdict)
    except sqlite3.DatabaseError as err:
        raise IndexCorruptedError(
            f"the index database {db} is damaged ({err}); " + rebuild_hint(path), str(path)
        ) from None
    finally:
        lock.release()
    log.info("index database %s: an interrupted write was recovered from its journal", db)


def memory_client() -> Any:
    """The in-process ephemeral client (shared; each index uses its own collection in it)."""
    with _lock:
        client = _clients.get(":memory:")
        if client is None:
            import chromadb  # why: chromadb loads on first use, not at start-up

            client = chromadb.EphemeralClient(settings=_settings())
            _clients[":memory:"] = client
        return client


def server_client(host: str, port: int) -> Any:
    """An ``HttpClient`` for a Chroma server, after a quick TCP check so a dead server fails fast."""
    url = f"http://{host}:{port}"
    try:
        with socket.create_connection((host, int(port)), timeout=SERVER_CONNECT_TIMEOUT_S):
            pass
    except OSError as err:
        raise ChromaServerUnreachable(
            f"cannot reach the Chroma server at {url}: {err.strerror or err}. Start it "
            f"(`chroma run --path DIR --host {host} --port {port}`) or set the index mode to "
            "'local' (setting index.mode)"
        ) from None
    import chromadb  # why: chromadb loads on first use, not at start-up

    try:
        client = chromadb.HttpClient(host=host, port=int(port), settings=_settings())
        client.heartbeat()
    except Exception as err:  # noqa: BLE001 - any failure means the server is not usable
        raise ChromaServerUnreachable(
            f"the Chroma server at {url} does not answer as a Chroma server ({type(err).__name__}: "
            f"{_first_line(err)}); check index.chroma_host / index.chroma_port"
        ) from None
    return client


def collection_prefix(model_name: str) -> str:
    """Prefix of this model's collections, so vectors of different models never mix."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(model_name.strip()).name or model_name).strip("-._")
    digest = hashlib.sha1(model_name.strip().lower().encode("utf-8"), usedforsecurity=False).hexdigest()[:8]
    return f"kmds-{slug[:60] or 'model'}-{digest}-"


def collection_name(prefix: str, kb_id: str) -> str:
    """The collection of one KB: ``<prefix><kb_id>`` (ChromaDB allows ``[A-Za-z0-9._-]``)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", kb_id).strip("-._")
    if safe != kb_id or not safe:
        digest = hashlib.sha1(kb_id.encode("utf-8"), usedforsecurity=False).hexdigest()[:12]
        safe = f"{safe[:40]}-{digest}".strip("-")
    return prefix + safe


def get_collection(client: Any, name: str, model_name: str, location: str, kb_id: str) -> Any:
    """Fetch or create the cosine collection ``name`` (always with ``embedding_function=None``)."""
    try:
        return client.get_or_create_collection(
            name,
            configuration={"hnsw": {"space": "cosine"}},
            metadata={"kmds_index_format": INDEX_FORMAT, "embedding_model": model_name, "kb_id": kb_id},
            embedding_function=None,
        )
    except Exception as err:  # noqa: BLE001
        raise store_error(err, location) from None


def store_error(err: BaseException, location: str) -> Exception:
    """Wrap a ChromaDB failure met while reading or writing the store."""
    if isinstance(err, SemanticIndexError):
        return err
    text = f"{type(err).__name__}: {_first_line(err)}"
    if location.startswith("http"):
        return ChromaServerUnreachable(f"the Chroma server at {location} failed: {text}")
    if lost_index_process(err):
        return IndexProcessStopped(
            f"the index process for {location} stopped ({text}); try again, a new one is started "
            f"(its log: {Path(location) / index_process.LOG_FILE})"
        )
    if isinstance(err, OSError) or "readonly" in text.lower() or "read-only" in text.lower():
        return IndexStoreError(f"cannot write the index folder {location}: {text}")
    return IndexCorruptedError(
        f"the index in {location} cannot be read ({text}); " + rebuild_hint(location), location
    )


def lost_index_process(err: BaseException) -> bool:
    """Whether ``err`` means the index process stopped answering (a transport error of its client)."""
    return isinstance(err, IndexProcessStopped) or type(err).__module__.split(".")[0] == "httpx"


def verify_store(client: Any, location: str) -> None:
    """Read every collection of the store once (count, one vector, one nearest-neighbour query).

    Damaged vector files (HNSW) are only noticed by ChromaDB when a collection is searched, so a
    rebuild calls this first: a store that fails is damaged as a whole and is moved aside, not
    patched one KB at a time with the damaged copy lost. Raises :class:`IndexCorruptedError`.
    """
    try:
        collections = client.list_collections()
    except Exception as err:  # noqa: BLE001 - ChromaDB raises many types for a damaged store
        raise _damaged(location, "its collections cannot be listed", err) from None
    for found in collections:
        name = found if isinstance(found, str) else found.name
        try:
            col = client.get_collection(name, embedding_function=None)
            if not col.count():
                continue
            got = col.get(limit=1, include=["embeddings"])
            vectors = got.get("embeddings")
            if vectors is None or len(vectors) == 0:
                continue
            col.query(query_embeddings=[list(vectors[0])], n_results=1, include=[])
        except Exception as err:  # noqa: BLE001
            raise _damaged(location, f"collection {name} cannot be searched", err) from None


def _damaged(location: str, what: str, err: BaseException) -> IndexCorruptedError:
    return IndexCorruptedError(
        f"the index in {location} is damaged: {what} ({type(err).__name__}: {_first_line(err)}); "
        + rebuild_hint(location), location)


def move_aside(persist_dir: str | Path) -> Path:
    """Rename a (damaged) store folder to ``<dir>.broken-<timestamp>`` and forget its client."""
    path = Path(persist_dir).expanduser().resolve()
    index_process.forget(path)
    if index_process.live_server(path) is not None:
        raise IndexStoreError(
            f"the index folder {path} is in use by KMDS Desktop; close the app and run the rebuild again"
        )
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.broken-{stamp}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.broken-{stamp}-{n}")
        n += 1
    close_local(path)
    if path.exists():
        shutil.move(str(path), str(target))
    return target


def close_local(persist_dir: str | Path) -> None:
    """Drop the shared client of a folder (ChromaDB keeps files open until its system stops)."""
    key = str(Path(persist_dir).expanduser().resolve())
    with _lock:
        client = _clients.pop(key, None)
        if client is not None:
            with contextlib.suppress(Exception):  # closing a broken store must not fail the rebuild
                client.close()
        _forget_system(key)
        lock = _locks.pop(key, None)
        if lock is not None:
            lock.release()


def _forget_system(key: str) -> None:
    try:
        # why: chromadb loads on first use, not at start-up
        from chromadb.api.shared_system_client import SharedSystemClient

        system = SharedSystemClient._identifier_to_system.pop(key, None)  # noqa: SLF001
        SharedSystemClient._identifier_to_refcount.pop(key, None)  # noqa: SLF001
        if system is not None:
            with contextlib.suppress(Exception):  # a system that cannot stop is forgotten all the same
                system.stop()
    except ImportError:  # pragma: no cover
        pass


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0][:300] if lines else ""
