"""Ollama backend: the real ``ollama.Client`` with a total timeout and a cancel that really aborts.

Why the extra plumbing: ``ollama.Client`` blocks inside a socket read while a local model loads or
generates, and closing an httpx client from another thread does not wake that read on Linux. Each
request therefore gets its own client whose connections are opened through
:class:`_AbortableNetwork`, which remembers the sockets it opened; a cancel hook (or the deadline
timer) calls ``socket.shutdown()`` on them, which wakes the blocked read at once and makes Ollama
stop generating for a client that went away.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote

import httpcore
import httpx
import ollama

from kmds_desktop import secrets
from kmds_desktop.config import DEFAULT_OLLAMA_HOST
from kmds_desktop.limits import MAX_REPLY_CHARS
from kmds_desktop.llm.errors import (
    LLMAuthError,
    LLMBadReply,
    LLMError,
    LLMModelNotFound,
    LLMQuotaError,
    LLMSchemaRefused,
    LLMTimeout,
    LLMUnreachable,
    server_error_text,
)
from kmds_desktop.llm.server_memory import model_list_seen
from kmds_desktop.tasks import Cancelled, CancelToken

DEFAULT_OLLAMA_MODEL = "llama3.1:8b"


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


def _basic_auth(host: str) -> dict[str, Any]:
    """``auth=`` for a host written ``http://user:password@host`` (the ``ollama`` client drops the
    user info from the address), unless ``OLLAMA_API_KEY`` already authenticates the requests."""
    userinfo = secrets.url_userinfo(host)
    if not userinfo or os.environ.get("OLLAMA_API_KEY"):
        return {}
    user, _, password = userinfo.partition(":")
    return {"auth": httpx.BasicAuth(unquote(user), unquote(password))}


@functools.cache
def _ssl_context() -> ssl.SSLContext:
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
        with httpx.Client(timeout=timeout, verify=_ssl_context(), headers=headers, auth=auth) as client:
            client.get(url)
    except httpx.ConnectError:  # refused: nobody listens on the port any more
        return False
    except httpx.HTTPError:  # accepted, then not answered in time or cut: busy (or hung), not gone
        return True
    return True


class AbortableRequest:
    """One abortable request: its network backend, its deadline and cancel hook, why it was aborted.

    Shared by the Ollama and OpenAI-compatible backends; a subclass sets ``client`` (made on
    ``transport`` with ``timeout_config``), so both give the same total deadline and the same cancel
    that closes the connection. ``arm(..., alive=probe)`` adds the liveness watch: after
    :data:`SILENCE_S` without a byte (:meth:`touch` marks each), ``probe()`` is asked whether the
    server still answers; when it does not, the request is aborted with reason ``"gone"`` within
    seconds instead of waiting for the whole deadline.
    """

    def __init__(self, timeout: float) -> None:
        self.network = _AbortableNetwork()
        self.transport = httpx.HTTPTransport(verify=_ssl_context())
        pool = getattr(self.transport, "_pool", None)
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


class _Request(AbortableRequest):
    """An abortable request through the ``ollama`` client."""

    def __init__(self, host: str, timeout: float) -> None:
        super().__init__(timeout)
        self.client = ollama.Client(host=host, timeout=self.timeout_config, transport=self.transport,
                                    **_basic_auth(host))


class OllamaBackend:
    """An LLM on an Ollama server, usable as an ``LLMFn`` (``backend(prompt) -> str``).

    ``host`` and ``model`` are configurable; ``temperature`` is the default sampling temperature and
    ``timeout`` the total seconds one request may take (connect, model load and generation together).

    Main entry point for other modules — :meth:`chat`::

        backend = OllamaBackend("http://127.0.0.1:11434", "llama3.1:8b", temperature=0.1, timeout=120)
        text = backend.chat(prompt, system="You write PostgreSQL tsqueries.", cancel=token,
                            temperature=0.2, model="mistral:7b")

    - ``options``: extra Ollama options (``num_predict``, ``seed``...) merged over the defaults;
      ``temperature`` overrides the backend's temperature for this call.
    - ``cancel``: a :class:`~kmds_desktop.tasks.CancelToken`; cancelling it (from any thread) shuts
      down the request's socket at once, so the call returns within milliseconds by raising
      :class:`~kmds_desktop.tasks.Cancelled`, and the server sees the client go away.
    - ``model``: overrides the backend's model for this one call (one backend serves several models
      serially, as the multi-model query generator needs).
    - Errors are :class:`~kmds_desktop.llm.errors.LLMError` subclasses: ``LLMUnreachable`` (names the
      host), ``LLMModelNotFound`` (lists the models the server has), ``LLMTimeout``, ``LLMAuthError``,
      ``LLMQuotaError``, ``LLMBadReply`` (also for a reply over
      :data:`~kmds_desktop.limits.MAX_REPLY_CHARS`: reading stops there, so no server can make the
      app hold or parse more).
    """

    name = "ollama"
    #: ``schema=`` is sent as Ollama's ``format`` (the server constrains the reply to it).
    supports_schema = True

    def __init__(self, host: str = DEFAULT_OLLAMA_HOST, model: str = DEFAULT_OLLAMA_MODEL,
                 temperature: float = 0.1, timeout: float = 120.0, *, options: dict[str, Any] | None = None,
                 keep_alive: str | float | None = None, liveness_probe: bool = True) -> None:
        #: The address requests go to (may carry ``user:password@``): never put in a message.
        self._url = (host or DEFAULT_OLLAMA_HOST).rstrip("/")
        #: The address as shown in messages, logs and ``repr``: any user info replaced by ``***``.
        self.host = secrets.redact_url(self._url)
        self.model = model
        self.temperature = temperature
        self.timeout = float(timeout)
        self.options = dict(options or {})
        self.keep_alive = keep_alive
        #: Ask the server whether it is alive after :data:`SILENCE_S` without a byte, and give up
        #: within seconds when it is not (False: wait for the whole ``timeout``).
        self.liveness_probe = liveness_probe

    def __repr__(self) -> str:
        return f"OllamaBackend(host={self.host!r}, model={self.model!r})"

    @property
    def label(self) -> str:
        """Short description for result views and logs, e.g. ``ollama:llama3.1:8b``."""
        return f"ollama:{self.model}"

    # --- LLMFn ----------------------------------------------------------------------------------------
    def __call__(self, prompt: str) -> str:
        return self.chat(prompt)

    def chat(self, prompt: str, system: str | None = None, options: dict[str, Any] | None = None,
             cancel: CancelToken | None = None, *, temperature: float | None = None,
             model: str | None = None, schema: dict[str, Any] | None = None) -> str:
        """Send one user message (and an optional system message); return the whole reply text.

        ``schema`` (a JSON schema) constrains the reply (Ollama's ``format``); a server that refuses
        it raises :class:`~kmds_desktop.llm.errors.LLMSchemaRefused`.
        Raises :class:`Cancelled` promptly when ``cancel`` fires, :class:`LLMError` subclasses otherwise.
        """
        text = "".join(self.stream(prompt, system, temperature=temperature, options=options, cancel=cancel,
                                   model=model, schema=schema))
        if not text.strip():
            raise LLMBadReply(f"Ollama model '{model or self.model}' at {self.host} returned an empty reply.")
        return text

    def stream(self, prompt: str, system: str | None = None, options: dict[str, Any] | None = None,
               cancel: CancelToken | None = None, *, temperature: float | None = None,
               model: str | None = None, schema: dict[str, Any] | None = None) -> Iterator[str]:
        """Yield the reply in chunks as Ollama streams it (for the answer view).

        Closing the generator early, cancelling ``cancel`` or reaching the timeout closes the
        connection. Errors are raised from the iteration as :class:`LLMError` / :class:`Cancelled`.
        """
        model = model or self.model
        if cancel is not None:
            cancel.raise_if_cancelled()
        messages = []
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": prompt})
        opts = {**self.options, "temperature": self.temperature if temperature is None else temperature}
        opts.update(options or {})
        request = _Request(self._url, self.timeout)
        request.arm(self.timeout, cancel, self._alive if self.liveness_probe else None)
        received = False
        try:
            kwargs: dict[str, Any] = {"model": model, "messages": messages, "options": opts, "stream": True}
            if self.keep_alive is not None:
                kwargs["keep_alive"] = self.keep_alive
            if schema is not None:
                kwargs["format"] = schema
            size = 0
            for part in request.client.chat(**kwargs):
                request.touch()
                if request.reason is not None:
                    break
                content = part.message.content if part.message is not None else None
                if content:
                    size += len(content)
                    if size > MAX_REPLY_CHARS:
                        request.abort("too long")  # the server sees the client go and stops generating
                        raise LLMBadReply(
                            f"Ollama model '{model}' at {self.host} sent a reply longer than "
                            f"{MAX_REPLY_CHARS:,} characters; stopped reading it.")
                    received = True
                    yield content
            self._raise_if_aborted(request, model, cancel)
        except (Cancelled, LLMError):
            raise
        except Exception as err:  # noqa: BLE001 - every client failure becomes an LLMError or Cancelled
            self._raise_if_aborted(request, model, cancel)
            if received and isinstance(err, ConnectionError | httpx.NetworkError | httpx.RemoteProtocolError):
                raise LLMUnreachable(
                    f"The Ollama server at {self.host} dropped the connection in the middle of the reply of "
                    f"'{model}' (it may have stopped or run out of memory). Check the server and try again.",
                    host=self.host) from None
            raise self._translate(err, model, had_schema=schema is not None) from None
        finally:
            request.close()

    def embed(self, texts: list[str], *, model: str | None = None,
              cancel: CancelToken | None = None) -> list[list[float]]:
        """The embedding of each text with an embedding model on the server (``/api/embed``), for
        searching vectors a database already holds (made by that model). Same deadline, cancel and
        errors as :meth:`chat`; a reply of the wrong shape is :class:`LLMBadReply`."""
        model = model or self.model
        if cancel is not None:
            cancel.raise_if_cancelled()
        request = _Request(self._url, self.timeout)
        request.arm(self.timeout, cancel)
        try:
            reply = request.client.embed(model=model, input=list(texts))
            self._raise_if_aborted(request, model, cancel)
        except (Cancelled, LLMError):
            raise
        except Exception as err:  # noqa: BLE001 - every client failure becomes an LLMError or Cancelled
            self._raise_if_aborted(request, model, cancel)
            raise self._translate(err, model) from None
        finally:
            request.close()
        vectors = [list(map(float, v)) for v in (getattr(reply, "embeddings", None) or [])]
        if len(vectors) != len(texts) or any(not v for v in vectors):
            raise LLMBadReply(f"Ollama model '{model}' at {self.host} returned {len(vectors)} embeddings "
                              f"for {len(texts)} texts.")
        return vectors

    # --- server information -----------------------------------------------------------------------
    def list_models(self, timeout: float | None = None) -> list[str]:
        """Names of the models the server has (``/api/tags``), sorted; raises :class:`LLMError`."""
        client = ollama.Client(host=self._url, timeout=timeout or min(self.timeout, 10.0),
                               **_basic_auth(self._url))
        try:
            listing = client.list()
        except Exception as err:  # noqa: BLE001
            raise self._translate(err, None, timeout or min(self.timeout, 10.0)) from None
        finally:
            client.close()
        names = sorted(m.model for m in listing.models if m.model)
        model_list_seen(self.host, names)
        return names

    def is_available(self, timeout: float = 2.0) -> bool:
        """True when the server answers ``/api/tags`` and has this backend's model."""
        try:
            models = self.list_models(timeout=timeout)
        except LLMError:
            return False
        return has_model(models, self.model)

    # --- helpers ----------------------------------------------------------------------------------
    def _raise_if_aborted(self, request: _Request, model: str, cancel: CancelToken | None) -> None:
        if request.reason == "cancelled" or (cancel is not None and cancel.cancelled):
            raise Cancelled("cancelled by the user")
        if request.reason == "timeout":
            raise self._timeout_error(model)
        if request.reason == "gone":
            raise LLMUnreachable(
                f"The Ollama server at {self.host} stopped answering: nothing came for '{model}' and it "
                "no longer takes connections. Start Ollama again "
                "(`ollama serve`) or check the host in Preferences → LLM.", host=self.host)

    def _alive(self) -> bool:
        """The liveness probe: does the server still answer its model list?"""
        return server_answers(f"{self._url}/api/tags")

    def _timeout_error(self, model: str | None, limit: float | None = None) -> LLMTimeout:
        """One message for a request past its deadline, whether the deadline timer or httpx's own
        read timeout noticed first (both fire at the same moment, so either may win)."""
        seconds = limit if limit is not None else self.timeout
        if model is None:  # a server request (model list), not a generation
            return LLMTimeout(
                f"Ollama at {self.host} did not finish within {seconds:g} s. Check that the server is "
                "running and not overloaded, or raise the timeout in Preferences → LLM.")
        return LLMTimeout(
            f"Ollama model '{model}' at {self.host} did not finish within {seconds:g} s. "
            "Try a smaller model, a shorter question, or raise the timeout in Preferences → LLM."
        )

    def _redact(self, text: str) -> str:
        """``text`` without the API key (a server may echo the Authorization header back) and
        without the host's ``user:password``."""
        return secrets.redact(text, os.environ.get("OLLAMA_API_KEY"), *secrets.url_secrets(self._url))

    def _translate(self, err: Exception, model: str | None, timeout: float | None = None, *,
                   had_schema: bool = False) -> LLMError:
        """Map an ``ollama``/``httpx`` exception to the LLMError family with an actionable message.

        Every message is redacted: the server's own error text can quote the request's key.
        """
        translated = self._translate_unredacted(err, model, timeout, had_schema)
        translated.args = tuple(self._redact(a) if isinstance(a, str) else a for a in translated.args)
        return translated

    def _translate_unredacted(self, err: Exception, model: str | None, timeout: float | None = None,
                              had_schema: bool = False) -> LLMError:
        host = self.host
        if isinstance(err, httpx.TimeoutException):
            return self._timeout_error(model, timeout)
        if isinstance(err, ConnectionError | httpx.NetworkError | httpx.RemoteProtocolError):
            return LLMUnreachable(
                f"Cannot reach the Ollama server at {host}. Start Ollama (`ollama serve`) or set the "
                "right host in Preferences → LLM.", host=host)
        if isinstance(err, ollama.ResponseError):
            status = err.status_code
            detail = server_error_text(err.error or "", status)  # an HTML error page named, not quoted
            if status == 404 or "not found" in detail.lower():
                available = self._models_or_empty()
                names = ", ".join(available) if available else "none"
                return LLMModelNotFound(
                    f"Ollama at {host} has no model '{model}'. Available models: {names}. "
                    f"Pull it with `ollama pull {model}` or choose another model in Preferences → LLM.",
                    model=model, available=available)
            if status in (401, 403):
                return LLMAuthError(f"Ollama at {host} refused the request ({status}): {detail}. "
                                    "Check OLLAMA_API_KEY or the server's access settings.")
            if status == 429:
                return LLMQuotaError(f"Ollama at {host} is rate limiting requests (429): {detail}. "
                                     "Wait a moment and try again.")
            if had_schema and (status in (400, 422, 501)
                               or any(w in detail.lower() for w in ("format", "schema", "grammar"))):
                # an Ollama older than 0.5 takes only format="json"; ask again without a schema
                return LLMSchemaRefused(f"Ollama at {host} refused the JSON schema for '{model}' "
                                        f"({status}): {detail}")
            return LLMError(f"Ollama at {host} returned an error ({status}): {detail}")
        return LLMError(f"Ollama at {host} failed: {type(err).__name__}: {server_error_text(str(err))}")

    def _models_or_empty(self) -> list[str]:
        try:
            return self.list_models(timeout=5.0)
        except LLMError:
            return []


def has_model(models: list[str], wanted: str) -> bool:
    """Whether ``wanted`` is installed: the one definition (Ollama treats ``name`` and ``name:latest``
    as the same model)."""
    def norm(name: str) -> str:
        return name if ":" in name else f"{name}:latest"

    return norm(wanted) in {norm(m) for m in models}
