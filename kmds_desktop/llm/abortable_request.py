"""One request to an LLM server that can be cancelled, timed out, or given up when the server goes away.

Why this plumbing: an HTTP client blocks inside a socket read while a local model loads or
generates, and closing an httpx client from another thread does not wake that read on Linux. Each
request therefore gets its own client whose connections are opened through
:class:`_AbortableNetwork`, which remembers the sockets it opened; a cancel hook (or the deadline
timer, or the liveness watch) calls ``socket.shutdown()`` on them, which wakes the blocked read at
once and makes the server stop generating for a client that went away. The Ollama and the
OpenAI-compatible backends both send their requests this way (:class:`AbortableRequest`).
"""

from __future__ import annotations

import contextlib
import functools
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpcore
import httpx

from kmds_desktop.limits import MAX_REPLY_CHARS
from kmds_desktop.llm.errors import LLMBadReply
from kmds_desktop.tasks import CancelToken


class _AbortableNetwork(httpcore.SyncBackend):
    """An httpcore network backend that can shut down every socket it opened, from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.aborted = False

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None, socket_options: Any = None) -> httpcore.NetworkStream:
        stream = super().connect_tcp(host, port, timeout, local_address, socket_options)
        sock = stream.get_extra_info("socket")
        with self._lock:
            if sock is not None:
                self._sockets.append(sock)
            aborted = self.aborted
        if aborted:
            self._shutdown(sock)
        return stream

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            sockets = list(self._sockets)
        for sock in sockets:
            self._shutdown(sock)

    @staticmethod
    def _shutdown(sock: socket.socket | None) -> None:
        if sock is None:
            return
        with contextlib.suppress(OSError):  # already closed
            sock.shutdown(socket.SHUT_RDWR)


#: Bytes one line of a reply may take: a streamed chunk is one line of JSON, and a whole reply sent as
#: one JSON body is one line, so the longest reply read (escaped) with room for its envelope.
MAX_LINE_BYTES = MAX_REPLY_CHARS * 4 + 64 * 1024
#: Bytes a whole response may take: a streamed reply's envelope per chunk (about a hundred bytes for a
#: few characters) puts the longest reply read at about this much.
MAX_BODY_BYTES = MAX_REPLY_CHARS * 32


class ReplyTooLarge(LLMBadReply):
    """A server sent a line or a body over :data:`MAX_LINE_BYTES` / :data:`MAX_BODY_BYTES`."""


class _BoundedBody(httpx.SyncByteStream):
    """A response body read through: raises :class:`ReplyTooLarge` once a line or the whole body is
    over its bound, before the client buffers it (``iter_lines`` and ``json()`` have no bound)."""

    def __init__(self, inner: httpx.SyncByteStream, where: str) -> None:
        self._inner = inner
        self._where = where

    def __iter__(self) -> Iterator[bytes]:
        total = since_break = 0  # bytes so far; bytes since the last line break
        for chunk in self._inner:
            total += len(chunk)
            start = 0
            cut = chunk.find(b"\n")
            while cut >= 0 and since_break + cut - start <= MAX_LINE_BYTES:
                since_break, start = 0, cut + 1
                cut = chunk.find(b"\n", start)
            since_break += (cut if cut >= 0 else len(chunk)) - start
            if since_break > MAX_LINE_BYTES:
                raise ReplyTooLarge(f"{self._where} sent a line longer than {MAX_LINE_BYTES:,} bytes; "
                                    "stopped reading it.")
            if total > MAX_BODY_BYTES:
                raise ReplyTooLarge(f"{self._where} sent more than {MAX_BODY_BYTES:,} bytes; stopped "
                                    "reading it.")
            yield chunk

    def close(self) -> None:
        self._inner.close()


class BoundedTransport(httpx.BaseTransport):
    """An httpx transport whose response bodies are read with bounds (:class:`_BoundedBody`), so no
    server can make a client library hold more; ``where`` names the server in the message."""

    def __init__(self, inner: httpx.BaseTransport, where: str) -> None:
        self.inner = inner
        self._where = where

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if isinstance(response.stream, httpx.SyncByteStream):
            response.stream = _BoundedBody(response.stream, self._where)
        return response

    def close(self) -> None:
        self.inner.close()


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One TLS context for every request: building one costs 100+ ms, and each request has its own client."""
    return httpx.create_ssl_context()


#: Seconds a connection may take to open. A refused connection fails at once; this bounds a host
#: that does not answer at all (a machine switched off, a firewall that drops packets), which with
#: the old bound of ten seconds held a question that long before it fell back.
CONNECT_TIMEOUT_S = 3.0
#: Seconds without a byte from the server after which it is asked whether it is still alive (its
#: model list, :data:`LIVENESS_TIMEOUT_S` to answer). A model reading a long prompt sends nothing for
#: a minute; a server that is gone refuses or resets the probe's connection at once (see
#: :func:`server_answers` for why a probe left unanswered counts as busy, not gone).
SILENCE_S = 2.0
#: Seconds the liveness probe (the model list) may take before the server is declared gone.
LIVENESS_TIMEOUT_S = 2.0


def server_answers(url: str, *, headers: dict[str, str] | None = None, auth: Any = None,
                   timeout: float = LIVENESS_TIMEOUT_S) -> bool:
    """Whether a server is still there to answer an HTTP GET of ``url`` (any status counts: a 401 or a
    404 still comes from a live server). Used only as the liveness probe: the model list.

    Why a probe that times out counts as alive: llama-cpp-python's server answers its model list only
    between generations (the route waits for the model's lock), so a busy server and a hung one look
    the same for seconds; declaring the busy one dead cut real answers off. Only a refused
    connection (nothing listens any more) is taken as gone; a hung server ends at the request's
    own deadline."""
    try:
        with httpx.Client(timeout=timeout, verify=ssl_context(), headers=headers, auth=auth) as client, \
                client.stream("GET", url):
            pass  # the status is the answer; the body is never read
    except httpx.ConnectError:  # refused: nobody listens on the port any more
        return False
    except httpx.HTTPError:  # accepted, then not answered in time or cut: busy (or hung), not gone
        return True
    return True


class AbortableRequest:
    """One abortable request: its network backend, its deadline and cancel hook, why it was aborted.

    Shared by the Ollama and OpenAI-compatible backends; a subclass sets ``client`` (made on
    ``transport`` with ``timeout_config``), so both give the same total deadline and the same cancel
    that closes the connection, and the same bounds on what is read (:class:`BoundedTransport`;
    ``where`` names the server in its message). ``arm(..., alive=probe)`` adds the liveness watch: after
    :data:`SILENCE_S` without a byte (:meth:`touch` marks each), ``probe()`` is asked whether the
    server still answers; when it does not, the request is aborted with reason ``"gone"`` within
    seconds instead of waiting for the whole deadline.
    """

    def __init__(self, timeout: float, where: str = "The server") -> None:
        self.network = _AbortableNetwork()
        http = httpx.HTTPTransport(verify=ssl_context())
        self.transport = BoundedTransport(http, where)
        pool = getattr(http, "_pool", None)
        if pool is not None and hasattr(pool, "_network_backend"):
            pool._network_backend = self.network  # noqa: SLF001 - httpcore's pool: aborting needs its backend
        self.timeout_config = httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT_S))
        self.client: Any = None
        self.reason: str | None = None  # "cancelled" | "timeout" | "too long" | "gone"
        self._timer: threading.Timer | None = None
        self._remove_hook: Callable[[], None] | None = None
        self._closed = threading.Event()
        self._last_byte = time.monotonic()

    def arm(self, timeout: float, cancel: CancelToken | None,
            alive: Callable[[], bool] | None = None) -> None:
        self._timer = threading.Timer(timeout, self.abort, args=("timeout",))
        self._timer.daemon = True
        self._timer.start()
        if cancel is not None:
            self._remove_hook = cancel.add_hook(lambda: self.abort("cancelled"))
        if alive is not None and timeout > SILENCE_S:
            threading.Thread(target=self._watch, args=(alive,), daemon=True, name="llm-liveness").start()

    def touch(self) -> None:
        """Bytes came from the server: it is alive."""
        self._last_byte = time.monotonic()

    def _watch(self, alive: Callable[[], bool]) -> None:
        """Ask ``alive()`` after each :data:`SILENCE_S` of silence; abort when it says no."""
        wait = SILENCE_S
        while not self._closed.wait(wait):
            silent = time.monotonic() - self._last_byte
            if silent < SILENCE_S:
                wait = SILENCE_S - silent
                continue
            if not alive() and not self._closed.is_set():
                self.abort("gone")
                return
            wait = SILENCE_S

    def abort(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.network.abort()

    def close(self) -> None:
        self._closed.set()
        if self._timer is not None:
            self._timer.cancel()
        if self._remove_hook is not None:
            self._remove_hook()
        try:
            if self.client is not None:
                self.client.close()
        except Exception:  # noqa: BLE001, S110 - closing a broken connection must not mask the real error
            pass
