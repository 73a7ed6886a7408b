"""Sentence embeddings served by the app's index process, so the window's process never loads torch.

Importing torch and sentence-transformers holds Python's GIL for hundreds of milliseconds at a time
(measured: 358 ms for torch, 665 ms for sentence-transformers), and a GIL held by a worker thread
freezes the window as surely as work on the GUI thread. The app already runs its local index in a
child process (:mod:`~kmds_desktop.index.index_process`); that process also answers
``POST /embed`` on a second local port, and the index of the desktop app
(:class:`~kmds_desktop.index.SemanticIndex` with ``own_process=True``) embeds through it. The
window's process then only sends texts and receives float32 bytes.

The service listens on 127.0.0.1 only and answers only requests that carry the process's random
token (``Authorization: Bearer …``), which is written, with the port, into the server file inside
the user's private index folder. Request bodies are bounded (:data:`MAX_REQUEST_BYTES`).
"""

from __future__ import annotations

import hmac
import http.client
import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from kmds_desktop.index import embeddings
from kmds_desktop.index.errors import IndexProcessStopped, IndexStoreError, ModelLoadError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

PATH = "/embed"
#: Largest request body accepted (a build step of texts is far below this).
MAX_REQUEST_BYTES = 32 * 1024 * 1024
#: How long a caller waits for one reply; the first one includes loading the model.
REPLY_TIMEOUT_S = 600.0
_SHAPE_HEADER = "X-Embedding-Shape"


# ---------------------------------------------------------------------- the index process's side


class _Handler(BaseHTTPRequestHandler):
    server: _EmbedServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet: one line per request would fill the index process's log."""

    def do_POST(self) -> None:  # the http.server protocol
        if self.path != PATH:
            self._reply_error(404, "unknown path")
            return
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {self.server.token}".encode()):
            self._reply_error(403, "wrong token")
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._reply_error(411, "Content-Length required")
            return
        if not 0 < length <= MAX_REQUEST_BYTES:
            self._reply_error(413, f"request body must be 1 to {MAX_REQUEST_BYTES} bytes")
            return
        try:
            request = json.loads(self.rfile.read(length))
            texts, model = request["texts"], request["model"]
            batch_size = int(request.get("batch_size") or 64)
            if not isinstance(model, str) or not isinstance(texts, list):
                raise TypeError("model must be a string and texts a list")
            if not all(isinstance(t, str) for t in texts):
                raise TypeError("texts must be strings")
        except (ValueError, KeyError, TypeError) as err:
            self._reply_error(400, f"bad request: {err}")
            return
        try:
            vectors = self.server.encode(texts, model, batch_size)
        except ModelLoadError as err:
            self._reply_error(422, str(err))
            return
        except Exception as err:  # noqa: BLE001 - reported to the caller, the service stays up
            self._reply_error(500, f"{type(err).__name__}: {err}")
            return
        body = vectors.astype("<f4", copy=False).tobytes()
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header(_SHAPE_HEADER, f"{vectors.shape[0]},{vectors.shape[1]}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _reply_error(self, status: int, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True


_encode_lock = threading.Lock()  # one forward pass at a time: they share the cores


def encode_here(texts: Sequence[str], model: str, batch_size: int) -> np.ndarray:
    """Embed ``texts`` in this (the index) process: for ``POST /embed`` and for the build steps
    the index process embeds and stores in one call (``embed_upsert`` of its private channel).

    torch keeps its default threads (one per core), as in the CLI and a bare ``encode``: with one
    core left idle a full build took about twice as long. The window does not need that core kept
    free: the index process runs at ``nice`` 10, so the scheduler gives the window's process the
    CPU first whenever it wants it.
    """
    with _encode_lock:
        return embeddings.encode(texts, model, batch_size=batch_size)


class _EmbedServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, token: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.token = token

    def encode(self, texts: list[str], model: str, batch_size: int) -> np.ndarray:
        return encode_here(texts, model, batch_size)


def start(token: str) -> int:
    """Serve ``POST /embed`` on a free local port in a background thread; returns the port."""
    server = _EmbedServer(token)
    threading.Thread(target=server.serve_forever, name="kmds-embed", daemon=True).start()
    return int(server.server_address[1])


# ---------------------------------------------------------------------- the app's side


def encode_remote(
    host: str, port: int, token: str, texts: Sequence[str], model: str, batch_size: int = 64
) -> np.ndarray:
    """Embed ``texts`` in the index process listening on ``host:port``; same result as
    :func:`kmds_desktop.index.embeddings.encode` (unit-length float32 rows).

    Raises :class:`ModelLoadError` when the model cannot be loaded there and
    :class:`IndexProcessStopped` when the process does not answer.
    """
    import numpy as np  # why: numpy loads on first use, not at start-up

    if not port or not token:
        raise IndexStoreError("the running index process does not serve embeddings (an older version?)")
    body = json.dumps({"texts": list(texts), "model": model, "batch_size": batch_size}).encode()
    conn = http.client.HTTPConnection(host, port, timeout=REPLY_TIMEOUT_S)
    try:
        conn.request(
            "POST",
            PATH,
            body=body,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        response = conn.getresponse()
        data = response.read()
    except OSError as err:
        raise IndexProcessStopped(
            f"the index process stopped answering while embedding ({type(err).__name__}); try again"
        ) from None
    finally:
        conn.close()
    if response.status == 200:
        rows, dim = (int(n) for n in response.getheader(_SHAPE_HEADER, "0,0").split(","))
        return np.frombuffer(data, dtype="<f4").reshape(rows, dim).astype(np.float32)  # a writable copy
    try:
        message = str(json.loads(data)["error"])
    except (ValueError, KeyError, TypeError):
        message = data[:200].decode("utf-8", "replace")
    if response.status == 422:
        raise ModelLoadError(message)
    raise IndexStoreError(f"the index process could not embed the texts: {message}")
