"""The index process's private channel: ChromaDB calls over an authenticated Unix socket.

Why not ChromaDB's own server: ``chroma run`` (the Rust server of chromadb 1.x) listens on TCP
and its authentication is a no-op, so while the app ran, any local user could list collections,
read every finding and write on 127.0.0.1. Here the index process serves its ``PersistentClient``
on a Unix socket in a folder made by ``mkdtemp`` (mode 0700, an unpredictable name, created by the
process itself, so it cannot be pre-empted): another user cannot even connect. On top of that,
each connection must pass ``multiprocessing.connection``'s HMAC challenge with a random 32-byte key
that only the index folder's server file (mode 0600) holds, before anything is read from it, so a
process of the same user that does not know the key, or a plain HTTP request, gets nothing.

The app side, :class:`RemoteClient`, offers the part of ChromaDB's client the index uses
(collections: create, get, list, delete; on a collection: count, get, query, add, upsert, update,
delete). A failure of the transport is :class:`IndexProcessStopped`, so the caller starts a new
process and retries once; a ChromaDB error inside the process comes back with its class name
and message.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Callable
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener, answer_challenge, deliver_challenge
from pathlib import Path
from typing import Any

from kmds_desktop.index.errors import IndexProcessStopped

SOCKET_NAME = "index.sock"
#: Methods a client may call on a collection (nothing else is dispatched).
COLLECTION_METHODS = frozenset({"count", "get", "query", "add", "upsert", "update", "delete", "peek"})
#: The index process's own collection call: embed texts there and upsert them with their vectors
#: (see :meth:`Server.embed_upsert`).
EMBED_UPSERT = "embed_upsert"
#: Methods a client may call on the ChromaDB client itself.
CLIENT_METHODS = frozenset({"heartbeat", "list_collections", "get_collection", "get_or_create_collection",
                            "create_collection", "delete_collection"})


class RemoteError(Exception):
    """An error raised inside the index process (its class name is kept as this class's name)."""


def _remote_error(type_name: str, message: str) -> RemoteError:
    cls = type(type_name if type_name.isidentifier() else "RemoteError", (RemoteError,), {})
    return cls(message)


# ------------------------------------------------------------------------------------- server side
def private_socket_path() -> Path:
    """A fresh socket path in a new 0700 folder with an unpredictable name (``mkdtemp``)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = runtime if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK) else None
    folder = Path(tempfile.mkdtemp(prefix="kmds-index-", dir=base))
    return folder / SOCKET_NAME


class Server:
    """Serves ``client`` (a ChromaDB client) on ``path`` to connections that know ``authkey``."""

    def __init__(self, client: Any, path: Path, authkey: bytes,
                 embed: Callable[[list[str], str, int], Any] | None = None) -> None:
        self.client = client
        self._embed = embed
        self.path = path
        self._authkey = authkey
        # No authkey here: the handshake runs on each connection's own thread (below), so a client
        # that connects and stays silent cannot hold up the others.
        self._listener = Listener(str(path), family="AF_UNIX")
        os.chmod(path, 0o600)

    def serve_forever(self) -> None:
        while True:
            try:
                conn = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(conn,), name="kmds-index-conn", daemon=True).start()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._listener.close()
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            self.path.parent.rmdir()

    def _serve(self, conn: Connection) -> None:
        with conn:
            try:  # both ways, as Listener(authkey=...) does; nothing is unpickled before this
                deliver_challenge(conn, self._authkey)
                answer_challenge(conn, self._authkey)
            except Exception:  # noqa: BLE001 - wrong key, HTTP bytes, a closed socket: refused
                return
            while True:
                try:
                    request = conn.recv()
                except (EOFError, OSError):
                    return
                try:
                    reply: tuple[Any, ...] = ("ok", self._call(*request))
                except Exception as err:  # noqa: BLE001 - every error goes back to the caller
                    reply = ("err", type(err).__name__, str(err))
                try:
                    conn.send(reply)
                except (OSError, ValueError):
                    return
                except Exception as err:  # noqa: BLE001 - an unpicklable result
                    conn.send(("err", type(err).__name__, str(err)))

    def _call(self, collection: str | None, method: str, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
        if collection is None:
            if method not in CLIENT_METHODS:
                raise ValueError(f"unknown index call {method!r}")
            if method == "list_collections":
                return [(c.name, dict(c.metadata or {})) for c in self.client.list_collections()]
            if method in ("get_collection", "get_or_create_collection", "create_collection"):
                kwargs = {**kwargs, "embedding_function": None}
                col = getattr(self.client, method)(*args, **kwargs)
                return col.name, dict(col.metadata or {})
            return getattr(self.client, method)(*args, **kwargs)
        if method == EMBED_UPSERT and self._embed is not None:
            return self.embed_upsert(collection, *args, **kwargs)
        if method not in COLLECTION_METHODS:
            raise ValueError(f"unknown collection call {method!r}")
        col = self.client.get_collection(collection, embedding_function=None)
        return getattr(col, method)(*args, **kwargs)

    def embed_upsert(self, collection: str, ids: list[str], texts: list[str], metadatas: list[Any],
                     model: str, batch_size: int) -> int:
        """Embed ``texts`` here and upsert them: one call per build step instead of an embedding
        request whose vectors travel to the app and back in an upsert (both serialised, and the
        write then overlapped the next step's embedding on the same cores)."""
        if not (len(ids) == len(texts) == len(metadatas)):
            raise ValueError("ids, texts and metadatas must have the same length")
        col = self.client.get_collection(collection, embedding_function=None)
        vectors = self._embed(list(texts), str(model), int(batch_size))  # type: ignore[misc]
        col.upsert(ids=list(ids), embeddings=vectors, metadatas=list(metadatas))
        return len(ids)


# ------------------------------------------------------------------------------------- client side
class RemoteClient:
    """The index process's ChromaDB client, seen from the app (one connection per thread)."""

    remote = True  # not in this process: its calls do not hold this process's GIL

    def __init__(self, path: str | Path, authkey: bytes) -> None:
        self.path = str(path)
        self._authkey = authkey
        self._local = threading.local()
        self._closed = False

    def _connection(self) -> Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise IndexProcessStopped("the connection to the index process was closed")
            try:
                conn = Client(self.path, family="AF_UNIX", authkey=self._authkey)
            except AuthenticationError:
                raise IndexProcessStopped("the index process refused this client's key") from None
            except (OSError, EOFError) as err:
                raise IndexProcessStopped(f"the index process does not answer ({type(err).__name__}: {err})"
                                          ) from None
            self._local.conn = conn
        return conn

    def call(self, collection: str | None, method: str, *args: Any, **kwargs: Any) -> Any:
        conn = self._connection()
        try:
            conn.send((collection, method, args, kwargs))
            reply = conn.recv()
        except (OSError, EOFError) as err:
            self._local.conn = None
            with contextlib.suppress(OSError):
                conn.close()
            raise IndexProcessStopped(f"the index process stopped answering ({type(err).__name__})") from None
        if reply[0] == "ok":
            return reply[1]
        raise _remote_error(reply[1], reply[2])

    # the ChromaDB client methods the index uses
    def heartbeat(self) -> int:
        return int(self.call(None, "heartbeat"))

    def list_collections(self) -> list[RemoteCollection]:
        return [RemoteCollection(self, name, meta) for name, meta in self.call(None, "list_collections")]

    def get_collection(self, name: str, **kwargs: Any) -> RemoteCollection:
        kwargs.pop("embedding_function", None)
        return RemoteCollection(self, *self.call(None, "get_collection", name, **kwargs))

    def get_or_create_collection(self, name: str, **kwargs: Any) -> RemoteCollection:
        kwargs.pop("embedding_function", None)
        return RemoteCollection(self, *self.call(None, "get_or_create_collection", name, **kwargs))

    def delete_collection(self, name: str) -> None:
        self.call(None, "delete_collection", name)

    def close(self) -> None:
        self._closed = True
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()


class RemoteCollection:
    """A collection in the index process: each method call runs there."""

    def __init__(self, client: RemoteClient, name: str, metadata: dict[str, Any] | None) -> None:
        self._client = client
        self.name = name
        self.metadata = metadata or {}

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method not in COLLECTION_METHODS and method != EMBED_UPSERT:
            raise AttributeError(method)
        return lambda *args, **kwargs: self._client.call(self.name, method, *args, **kwargs)
