"""Ollama backend: the real ``ollama.Client`` with a total timeout and a cancel that really aborts.

``ollama.Client`` blocks inside a socket read while a local model loads or generates, so each request
is an :class:`~kmds_desktop.llm.abortable_request.AbortableRequest`: its own client on a transport
whose sockets a cancel, the deadline or the liveness watch can shut down from any thread, which also
makes Ollama stop generating for a client that went away.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import httpx
import ollama

from kmds_desktop import secrets
from kmds_desktop.config import DEFAULT_OLLAMA_HOST
from kmds_desktop.limits import MAX_REPLY_CHARS
from kmds_desktop.llm.abortable_request import AbortableRequest, BoundedTransport, server_answers, ssl_context
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


def _basic_auth(host: str) -> dict[str, Any]:
    """``auth=`` for a host written ``http://user:password@host`` (the ``ollama`` client drops the
    user info from the address), unless ``OLLAMA_API_KEY`` already authenticates the requests."""
    userinfo = secrets.url_userinfo(host)
    if not userinfo or os.environ.get("OLLAMA_API_KEY"):
        return {}
    user, _, password = userinfo.partition(":")
    return {"auth": httpx.BasicAuth(unquote(user), unquote(password))}


class _Request(AbortableRequest):
    """An abortable request through the ``ollama`` client."""

    def __init__(self, host: str, timeout: float) -> None:
        super().__init__(timeout, where=f"The Ollama server at {secrets.redact_url(host)}")
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
                 liveness_probe: bool = True) -> None:
        #: The address requests go to (may carry ``user:password@``): never put in a message.
        self._url = (host or DEFAULT_OLLAMA_HOST).rstrip("/")
        #: The address as shown in messages, logs and ``repr``: any user info replaced by ``***``.
        self.host = secrets.redact_url(self._url)
        self.model = model
        self.temperature = temperature
        self.timeout = float(timeout)
        self.options = dict(options or {})
        #: Ask the server whether it is alive after
        #: :data:`~kmds_desktop.llm.abortable_request.SILENCE_S` without a byte, and give up within
        #: seconds when it is not (False: wait for the whole ``timeout``).
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
        transport = BoundedTransport(httpx.HTTPTransport(verify=ssl_context()),
                                     f"The Ollama server at {self.host}")
        client = ollama.Client(host=self._url, timeout=timeout or min(self.timeout, 10.0),
                               transport=transport, **_basic_auth(self._url))
        try:
            listing = client.list()
        except LLMError:  # read too much (BoundedTransport)
            raise
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
            if (status == 404 or "not found" in detail.lower()) and model is None:
                # the model list itself is not there: not an Ollama server (a web server or proxy on
                # that address); never asked again for the list, which would answer the same
                return LLMError(f"{host} has no Ollama model list ({status}): it does not look like an "
                                "Ollama server. Check the host in Preferences → LLM.")
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
