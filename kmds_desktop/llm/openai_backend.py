"""OpenAI-compatible backend: any server that speaks ``/v1/chat/completions`` (llama.cpp's server,
LM Studio, vLLM, Ollama's own ``/v1``, a hosted provider), over plain ``httpx``.

Why not the ``openai`` package: the app needs only chat, streaming and the model list, and it needs
them with the Ollama backend's guarantees, which a heavier client would hide: a total deadline, a
cancel that shuts the request's socket down from any thread (the same
:class:`~kmds_desktop.llm.abortable_request.AbortableRequest`), replies read at most to
:data:`~kmds_desktop.limits.MAX_REPLY_CHARS`, each line and body bounded as it arrives (a server
sending one endless line cannot make the app hold it: ``BoundedTransport``), and the same
actionable error messages. The API key (optional: local servers need none) comes from
``OPENAI_API_KEY`` or the OS keyring and is redacted from every message.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx

from kmds_desktop import secrets
from kmds_desktop.config import DEFAULT_OPENAI_BASE_URL
from kmds_desktop.limits import MAX_REPLY_CHARS
from kmds_desktop.llm.abortable_request import MAX_LINE_BYTES, AbortableRequest, server_answers, ssl_context
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
from kmds_desktop.llm.server_memory import model_list_seen, remembers_per_server
from kmds_desktop.tasks import Cancelled, CancelToken

DEFAULT_OPENAI_MODEL = "default"


def _json_schema_format(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's own way (OpenAI, vLLM, LM Studio, llama.cpp's llama-server)."""
    return {"type": "json_schema",
            "json_schema": {"name": str(schema.get("title") or "reply"), "schema": schema, "strict": True}}


def _json_object_format(schema: dict[str, Any]) -> dict[str, Any]:
    """The older dialect of llama-cpp-python's server (and llama-server): a JSON object with a schema."""
    return {"type": "json_object", "schema": schema}


#: The ways a schema is sent, tried in order until the server takes one (remembered per server in
#: :data:`_DIALECT_TAKEN`, for the process: the window makes a backend per question).
SCHEMA_DIALECTS = {"json_schema": _json_schema_format, "json_object": _json_object_format}
#: API root -> the dialect the server took (a server takes the same one for all its models).
_DIALECT_TAKEN: dict[str, str] = {}
#: Held while that memory changes or is walked: ask workers write it while a model list forgets from it.
_MEMORY_LOCK = threading.Lock()


@remembers_per_server
def _forget_server(host: str) -> None:
    """A server whose models changed is tried in every dialect again."""
    with _MEMORY_LOCK:
        for url in [u for u in _DIALECT_TAKEN if secrets.redact_url(u) == host]:
            _DIALECT_TAKEN.pop(url, None)
#: API roots that refused ``cache_prompt`` (a hosted API that rejects fields it does not know):
#: asked without it from then on.
_NO_CACHE_PROMPT: set[str] = set()


class _CachePromptRefusedError(LLMError):
    """The server refused the request because of ``cache_prompt``: ask again without it."""


#: Error bodies are read only this far (they are quoted in a message).
MAX_ERROR_BYTES = 16 * 1024
#: Model names a "model not found" message lists at most.
MODELS_SHOWN = 12


def api_base(base_url: str) -> str:
    """The API root requests go to: ``http://host:8080`` becomes ``http://host:8080/v1`` (every
    OpenAI-compatible server serves there); an address with a path of its own is kept as written
    (a proxy's ``/openai/v1``)."""
    url = (base_url or DEFAULT_OPENAI_BASE_URL).strip().rstrip("/")
    return url + "/v1" if urlsplit(url).path in ("", "/") else url


class _Request(AbortableRequest):
    """An abortable request through a plain ``httpx`` client (the Ollama backend's guarantees)."""

    def __init__(self, timeout: float, headers: dict[str, str], where: str) -> None:
        super().__init__(timeout, where)
        self.client = httpx.Client(transport=self.transport, headers=headers, timeout=self.timeout_config)


def _read_bounded(response: httpx.Response, limit: int) -> bytes:
    """At most ``limit`` bytes of the body (the rest is not read)."""
    data = b""
    for chunk in response.iter_raw():
        data += chunk
        if len(data) > limit:
            return data[:limit]
    return data


class OpenAIBackend:
    """A model on an OpenAI-compatible server, usable as an ``LLMFn``; ``.chat()``, ``.stream()``
    and ``.list_models()`` as :class:`~kmds_desktop.llm.ollama_backend.OllamaBackend` has them.

    ``schema=`` (a JSON schema) asks the server to constrain the reply
    (``response_format={"type": "json_schema", ...}``, else llama-cpp-python's
    ``{"type": "json_object", "schema": ...}``; the dialect a server takes is remembered); a server
    that refuses both answers with :class:`~kmds_desktop.llm.errors.LLMSchemaRefused`, and the
    caller asks again without one.
    """

    name = "openai"
    supports_schema = True

    def __init__(self, base_url: str = DEFAULT_OPENAI_BASE_URL, model: str = DEFAULT_OPENAI_MODEL,
                 temperature: float = 0.1, timeout: float = 120.0, *, api_key: str | None = None,
                 options: dict[str, Any] | None = None, liveness_probe: bool = False) -> None:
        #: The API root requests go to (may carry ``user:password@``): never put in a message.
        self._url = api_base(base_url)
        #: The address as shown in messages, logs and ``repr``.
        self.host = secrets.redact_url(self._url)
        self.model = model
        self.temperature = temperature
        self.timeout = float(timeout)
        self._key = api_key if api_key is not None else secrets.openai_api_key()
        #: Default options of every call (Ollama's names, as :meth:`stream` reads them); a call's own win.
        self.options = dict(options or {})
        #: Ask the server whether it is alive (its model list) after
        #: :data:`~kmds_desktop.llm.abortable_request.SILENCE_S` without a byte, and give up within
        #: seconds when it is not (False: wait for the whole ``timeout``). Off by default: a request
        #: that reaches llama-cpp-python's server while it generates interrupts the generation (its
        #: ``interrupt_requests``, on by default), so the probe itself cut real answers off there. A
        #: server that is killed still fails at once (its connection is reset or refused).
        self.liveness_probe = liveness_probe

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIBackend(host={self.host!r}, model={self.model!r})"

    @property
    def label(self) -> str:
        """Short description for result views and logs, e.g. ``openai:qwen2.5``."""
        return f"openai:{self.model}"

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        return headers

    # --- LLMFn ------------------------------------------------------------------------------------
    def __call__(self, prompt: str) -> str:
        return self.chat(prompt)

    def chat(self, prompt: str, system: str | None = None, options: dict[str, Any] | None = None,
             cancel: CancelToken | None = None, *, temperature: float | None = None,
             model: str | None = None, schema: dict[str, Any] | None = None) -> str:
        """The whole reply text (streamed in and joined, so cancel and the size limit act as they
        do for :meth:`stream`); raises :class:`Cancelled` or :class:`LLMError` subclasses."""
        text = "".join(self.stream(prompt, system, options, cancel, temperature=temperature, model=model,
                                   schema=schema))
        if not text.strip():
            raise LLMBadReply(f"The OpenAI-compatible model '{model or self.model}' at {self.host} returned "
                              "an empty reply.")
        return text

    def stream(self, prompt: str, system: str | None = None, options: dict[str, Any] | None = None,
               cancel: CancelToken | None = None, *, temperature: float | None = None,
               model: str | None = None, schema: dict[str, Any] | None = None) -> Iterator[str]:
        """Yield the reply in chunks as the server streams it (server-sent events).

        ``options`` takes Ollama's names where they mean the same (``num_predict`` becomes
        ``max_tokens``; ``seed``, ``top_p``, ``stop`` pass through). Closing the generator, a cancel
        or the deadline shuts the connection down, so the server stops generating.
        """
        model = model or self.model
        if cancel is not None:
            cancel.raise_if_cancelled()
        messages = []
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": prompt})
        body: dict[str, Any] = {"model": model, "messages": messages, "stream": True,
                                "temperature": self.temperature if temperature is None else temperature}
        if self._url not in _NO_CACHE_PROMPT:
            # llama.cpp's server keeps the prompt's processed prefix for the next request only when
            # asked (older versions default to false): the routing prompt's 900 static tokens are then
            # read once, not per question; other servers ignore the field (one that refuses it is
            # asked again without it)
            body["cache_prompt"] = True
        for key, value in {**self.options, **(options or {})}.items():
            if key == "num_predict":
                body["max_tokens"] = value
            elif key in ("seed", "top_p", "stop", "presence_penalty", "frequency_penalty"):
                body[key] = value
        if schema is None:
            yield from self._send(body, model, cancel, False)
            return
        taken = _DIALECT_TAKEN.get(self._url)
        dialects = [taken] if taken else list(SCHEMA_DIALECTS)
        for n, dialect in enumerate(dialects):
            body["response_format"] = SCHEMA_DIALECTS[dialect](schema)
            try:
                yield from self._send(body, model, cancel, True)
            except LLMSchemaRefused:
                if n == len(dialects) - 1:
                    raise
                continue  # refused before any text: the next way of asking
            with _MEMORY_LOCK:
                _DIALECT_TAKEN[self._url] = dialect
            return

    def _send(self, body: dict[str, Any], model: str, cancel: CancelToken | None,
              had_schema: bool) -> Iterator[str]:
        """:meth:`_stream_once`, asked again without ``cache_prompt`` when the server refused it."""
        try:
            yield from self._stream_once(body, model, cancel, had_schema)
        except _CachePromptRefusedError:
            with _MEMORY_LOCK:
                _NO_CACHE_PROMPT.add(self._url)
            body.pop("cache_prompt", None)
            yield from self._stream_once(body, model, cancel, had_schema)

    def _stream_once(self, body: dict[str, Any], model: str, cancel: CancelToken | None,
                     had_schema: bool) -> Iterator[str]:
        """One streamed request of ``body``; see :meth:`stream`."""
        request = _Request(self.timeout, self._headers(), f"The OpenAI-compatible server at {self.host}")
        request.arm(self.timeout, cancel, self._alive if self.liveness_probe else None)
        received = finished = False
        size = 0
        try:
            with request.client.stream("POST", f"{self._url}/chat/completions", json=body) as response:
                if response.status_code >= 400:
                    err = self._status_error(response, model, had_schema)
                    if response.status_code in (400, 422) and "cache_prompt" in body \
                            and "cache_prompt" in str(err):
                        raise _CachePromptRefusedError(str(err))
                    raise err
                for line in response.iter_lines():  # each line bounded (BoundedTransport)
                    request.touch()
                    if request.reason is not None:
                        break
                    content, done = self._event_content(line, model)
                    finished = finished or done
                    if done is True and content is None:
                        break
                    if content:
                        size += len(content)
                        if size > MAX_REPLY_CHARS:
                            request.abort("too long")
                            raise LLMBadReply(
                                f"The OpenAI-compatible model '{model}' at {self.host} sent a reply longer "
                                f"than {MAX_REPLY_CHARS:,} characters; stopped reading it.")
                        received = True
                        yield content
            self._raise_if_aborted(request, model, cancel)
            if not finished:
                # a stream that ends without a finish reason or [DONE] was cut off (the server stopped)
                raise httpx.RemoteProtocolError("the event stream ended before the reply was finished")
        except Cancelled:
            raise
        except LLMError:
            self._raise_if_aborted(request, model, cancel)
            raise
        except Exception as err:  # noqa: BLE001 - every client failure becomes an LLMError or Cancelled
            self._raise_if_aborted(request, model, cancel)
            if received and isinstance(err, ConnectionError | httpx.NetworkError | httpx.RemoteProtocolError):
                raise LLMUnreachable(
                    f"The OpenAI-compatible server at {self.host} dropped the connection in the middle of "
                    f"the reply of '{model}' (it may have stopped or run out of memory). Check the server "
                    "and try again.", host=self.host) from None
            raise self._translate(err, model) from None
        finally:
            request.close()

    def _event_content(self, line: str, model: str) -> tuple[str | None, bool]:
        """(text, finished) of one line of the event stream: text None and finished for ``[DONE]``
        (the end), finished with text when a choice has its ``finish_reason``. A server that ignores
        ``stream`` and sends one JSON body is read the same way (``message`` instead of ``delta``)."""
        text = line.strip()
        if not text or text.startswith(":"):
            return "", False
        if text.startswith("data:"):
            text = text[5:].strip()
        elif text.startswith(("event:", "id:", "retry:")):
            return "", False
        if text == "[DONE]":
            return None, True
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            raise LLMBadReply(f"The OpenAI-compatible server at {self.host} sent something that is not an "
                              f"event of a chat reply for '{model}': {self._redact(text[:120])!r}") from None
        if not isinstance(data, dict):
            return "", False
        if isinstance(data.get("error"), dict | str):
            raise LLMError(self._redact(f"The OpenAI-compatible server at {self.host} failed for '{model}': "
                                        f"{_error_text(data)}"))
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return "", False
        whole = "message" in choices[0] and "delta" not in choices[0]
        part = choices[0].get("delta") or choices[0].get("message") or {}
        content = part.get("content") if isinstance(part, dict) else None
        return (content if isinstance(content, str) else ""), bool(whole or choices[0].get("finish_reason"))

    # --- server information -------------------------------------------------------------------------
    def list_models(self, timeout: float | None = None) -> list[str]:
        """Names of the models the server offers (``/v1/models``), sorted; raises :class:`LLMError`."""
        limit = timeout or min(self.timeout, 10.0)
        try:
            with httpx.Client(headers=self._headers(), timeout=limit, verify=ssl_context()) as client, \
                    client.stream("GET", f"{self._url}/models") as response:
                if response.status_code >= 400:
                    raise self._status_error(response, None, False)
                body = _read_bounded(response, MAX_LINE_BYTES)
        except LLMError:
            raise
        except Exception as err:  # noqa: BLE001
            raise self._translate(err, None, limit) from None
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise LLMBadReply(f"The OpenAI-compatible server at {self.host} answered /models with "
                              "something that is not a model list.") from None
        entries = data.get("data") if isinstance(data, dict) else None
        if not isinstance(data, dict) or (entries is not None and not isinstance(entries, list)):
            raise LLMBadReply(f"The OpenAI-compatible server at {self.host} answered /models with "
                              "something that is not a model list.")
        names = sorted({str(e["id"]) for e in entries or [] if isinstance(e, dict) and e.get("id")})
        model_list_seen(self.host, names)
        return names

    def is_available(self, timeout: float = 2.0) -> bool:
        """True when the server answers ``/v1/models`` and offers this backend's model."""
        try:
            return self.model in self.list_models(timeout=timeout)
        except LLMError:
            return False

    # --- errors -------------------------------------------------------------------------------------
    def _raise_if_aborted(self, request: _Request, model: str, cancel: CancelToken | None) -> None:
        if request.reason == "cancelled" or (cancel is not None and cancel.cancelled):
            raise Cancelled("cancelled by the user")
        if request.reason == "timeout":
            raise self._timeout_error(model)
        if request.reason == "gone":
            raise LLMUnreachable(
                f"The OpenAI-compatible server at {self.host} stopped answering: nothing came for "
                f"'{model}' and it no longer takes connections. Start "
                "the server again or check the base URL in Preferences → LLM.", host=self.host)

    def _alive(self) -> bool:
        """The liveness probe: does the server still answer its model list?"""
        return server_answers(f"{self._url}/models", headers=self._headers())

    def _timeout_error(self, model: str | None, limit: float | None = None) -> LLMTimeout:
        seconds = limit if limit is not None else self.timeout
        if model is None:
            return LLMTimeout(
                f"The OpenAI-compatible server at {self.host} did not finish within {seconds:g} s. Check "
                "that the server is running and not overloaded, or raise the timeout in Preferences → LLM.")
        return LLMTimeout(
            f"The OpenAI-compatible model '{model}' at {self.host} did not finish within {seconds:g} s. "
            "Try a smaller model, a shorter question, or raise the timeout in Preferences → LLM.")

    def _redact(self, text: str) -> str:
        return secrets.redact(text, self._key, *secrets.url_secrets(self._url))

    def _status_error(self, response: httpx.Response, model: str | None, had_schema: bool) -> LLMError:
        """The LLMError for an HTTP error status (the body is read at most :data:`MAX_ERROR_BYTES`)."""
        raw = _read_bounded(response, MAX_ERROR_BYTES).decode("utf-8", errors="replace")
        try:
            detail = server_error_text(_error_text(json.loads(raw)), response.status_code)
        except (ValueError, RecursionError):  # not JSON: an HTML error page of a proxy, or plain text
            detail = server_error_text(raw, response.status_code)
        err = self._status_error_unredacted(response.status_code, detail, model, had_schema)
        err.args = tuple(self._redact(a) if isinstance(a, str) else a for a in err.args)
        return err

    def _status_error_unredacted(self, status: int, detail: str, model: str | None,
                                 had_schema: bool) -> LLMError:
        host = self.host
        low = detail.lower()
        if status in (401, 403):
            return LLMAuthError(
                f"The OpenAI-compatible server at {host} refused the request ({status}): {detail}. Check "
                "OPENAI_API_KEY or the key stored in Preferences → LLM.")
        if status == 429:
            return LLMQuotaError(f"The OpenAI-compatible server at {host} is rate limiting requests (429): "
                                 f"{detail}. Wait a moment and try again.")
        if model is not None and (status == 404 or "model" in low and ("not found" in low
                                                                        or "does not exist" in low)):
            available = self._models_or_empty()
            names = ", ".join(available[:MODELS_SHOWN]) + (", …" if len(available) > MODELS_SHOWN else "")
            return LLMModelNotFound(
                f"The OpenAI-compatible server at {host} has no model '{model}'. Available models: "
                f"{names or 'none'}. Choose another model in Preferences → LLM.",
                model=model, available=available)
        if status == 404:
            endpoint = "/models" if model is None else "/chat/completions"
            return LLMError(f"The OpenAI-compatible server at {host} has no {endpoint} endpoint (404). "
                            "Check the base URL in Preferences → LLM (it usually ends in /v1).")
        if had_schema and (status in (400, 422, 501) or any(w in low for w in ("response_format", "schema",
                                                                                "grammar"))):
            return LLMSchemaRefused(f"The OpenAI-compatible server at {host} refused the JSON schema for "
                                    f"'{model}' ({status}): {detail}")
        return LLMError(f"The OpenAI-compatible server at {host} returned an error ({status}): {detail}")

    def _translate(self, err: Exception, model: str | None, timeout: float | None = None) -> LLMError:
        if isinstance(err, httpx.TimeoutException):
            return self._timeout_error(model, timeout)
        if isinstance(err, ConnectionError | httpx.NetworkError | httpx.RemoteProtocolError):
            return LLMUnreachable(
                f"Cannot reach the OpenAI-compatible server at {self.host}. Start the server or set the "
                "right base URL in Preferences → LLM.", host=self.host)
        return LLMError(self._redact(f"The OpenAI-compatible server at {self.host} failed: "
                                     f"{type(err).__name__}: {err}"))

    def _models_or_empty(self) -> list[str]:
        try:
            return self.list_models(timeout=5.0)
        except LLMError:
            return []


def _error_text(data: Any) -> str:
    """The message of an OpenAI-style error body (``{"error": {"message": ...}}`` or variants)."""
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data))
        if isinstance(error, dict):
            return " ".join(str(error.get("message") or error.get("msg") or error).split())[:300]
        return " ".join(str(error).split())[:300]
    return " ".join(str(data).split())[:300]
