"""Pick the LLM backend the settings ask for, and wrap plain callables into the same contract.

"auto" prefers a local Ollama that answers and has the configured model (private, free), then an
OpenAI-compatible server on one of the usual local ports (LM Studio 1234, llama.cpp 8080, vLLM 8000,
Jan 1337) that the user has confirmed, then Google when a key is available, then no LLM at all
(offline mode) — so a fresh machine works without any LLM and improves as soon as one appears. The
ports are probed with the model list only (``/v1/models``, half a second each), never a prompt: a
server found but not yet confirmed is returned as ``BackendChoice.candidate`` with the question to
ask ("Found llama.cpp at 127.0.0.1:8080 — use it?"); the answer is remembered in
``llm.confirmed_servers`` (a no in ``llm.declined_servers``: not asked again). "openai" is always
used when chosen: its address is the user's to give.

:class:`ModelDispatch` serves several models by name, each from its server (``openai:NAME`` from
the OpenAI-compatible server, ``ollama:NAME`` or a bare name from Ollama), so the literature
side's model list can mix servers and every model is still asked through one ``chat``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from kmds_desktop import secrets
from kmds_desktop.config import DEFAULT_OLLAMA_HOST, DEFAULT_OPENAI_BASE_URL, LLMSettings
from kmds_desktop.llm.errors import LLMBadReply, LLMError
from kmds_desktop.llm.google_backend import GoogleBackend
from kmds_desktop.llm.ollama_backend import OllamaBackend, has_model
from kmds_desktop.llm.openai_backend import OpenAIBackend
from kmds_desktop.tasks import Cancelled

log = logging.getLogger(__name__)

#: The one callable type every backend provides: prompt in, reply text out.
LLMFn = Callable[[str], str]

BACKENDS = ("auto", "ollama", "google", "openai", "offline")
#: Model-name prefixes that pick a server (a bare name is an Ollama model).
OPENAI_PREFIX = "openai:"
OLLAMA_PREFIX = "ollama:"


class FunctionBackend:
    """Wraps any user callable ``prompt -> str`` so its failures become :class:`LLMError`."""

    name = "callable"

    def __init__(self, fn: LLMFn, label: str | None = None) -> None:
        self.fn = fn
        self.label = label or getattr(fn, "label", None) or getattr(fn, "__name__", "callable")

    def __call__(self, prompt: str) -> str:
        try:
            reply = self.fn(prompt)
        except (LLMError, Cancelled):
            raise
        except Exception as err:  # a user function may raise anything
            raise LLMError(f"The LLM function {self.label} failed: {type(err).__name__}: {err}") from err
        if not isinstance(reply, str):
            raise LLMBadReply(f"The LLM function {self.label} returned {type(reply).__name__}, not text.")
        return reply

    def stream(self, prompt: str, *args: object, **kwargs: object) -> Iterator[str]:
        """Plain callables do not stream: the whole reply is one chunk."""
        yield self(prompt)


#: The usual local ports of OpenAI-compatible servers, in the order "auto" tries them.
USUAL_OPENAI_SERVERS: tuple[tuple[str, int], ...] = (("LM Studio", 1234), ("llama.cpp", 8080), ("vLLM", 8000),
                                                     ("Jan", 1337))
#: Seconds each probe of a usual port may take (a closed port answers at once; a busy one is skipped).
DISCOVERY_TIMEOUT_S = 0.5


@dataclass(frozen=True)
class FoundServer:
    """An OpenAI-compatible server that answered its model list on a usual local port."""

    name: str
    #: The API root (``http://127.0.0.1:8080/v1``), as ``llm.openai_base_url`` and
    #: ``llm.confirmed_servers`` hold it.
    base_url: str
    models: tuple[str, ...] = ()

    @property
    def question(self) -> str:
        """What the window asks before the server gets any prompt."""
        return f"Found {self.name} at {server_address(self.base_url)} — use it?"


def discover_openai_servers(servers: tuple[tuple[str, int], ...] = USUAL_OPENAI_SERVERS,
                            host: str = "127.0.0.1",
                            timeout: float = DISCOVERY_TIMEOUT_S) -> list[FoundServer]:
    """The OpenAI-compatible servers answering ``/v1/models`` on ``host`` at the given ``(name, port)``
    pairs, in that order. Only the model list is asked for: nothing is sent to a model."""
    found = []
    for name, port in servers:
        base_url = f"http://{host}:{port}/v1"
        try:
            models = OpenAIBackend(base_url, timeout=timeout, api_key="").list_models(timeout=timeout)
        except LLMError as err:
            log.debug("auto backend: no %s at %s: %s", name, base_url, err)
            continue
        found.append(FoundServer(name, base_url, tuple(models)))
    return found


def _models_or_none(base_url: str, timeout: float) -> list[str] | None:
    """The model list of the server at ``base_url`` (None when it does not answer)."""
    try:
        return OpenAIBackend(base_url, timeout=timeout, api_key="").list_models(timeout=timeout)
    except LLMError as err:
        log.debug("auto backend: confirmed server %s not answering: %s", base_url, err)
        return None


def server_address(url: str) -> str:
    """``host:port`` of a server's address, without scheme, path or user info (how a message names it)."""
    return urlsplit(url if "://" in url else f"http://{url}").netloc.rpartition("@")[2]


def _usual_name(base_url: str, servers: tuple[tuple[str, int], ...]) -> str:
    """The server's usual name by its port ("llama.cpp" for 8080), else "the server"."""
    port = server_address(base_url).rpartition(":")[2]
    names = {str(p): name for name, p in (*servers, *USUAL_OPENAI_SERVERS)}
    return names.get(port, "the server")


@dataclass
class BackendChoice:
    """What :func:`choose_backend` picked and why (shown in the status bar and the result view)."""

    llm: LLMFn | None
    name: str  # "ollama" | "google" | "openai" | "offline"
    note: str = ""
    #: What the "auto" probe found of Ollama: "ready", "no-model", "unreachable" ("" when not probed).
    ollama_state: str = ""
    #: An OpenAI-compatible server "auto" found but may not use before the user confirms it
    #: (``candidate.question``; a yes goes into ``llm.confirmed_servers``).
    candidate: FoundServer | None = None


def choose_backend(settings: LLMSettings | None = None, backend: str | None = None,
                   probe_timeout: float = 2.0,
                   openai_servers: tuple[tuple[str, int], ...] = USUAL_OPENAI_SERVERS) -> BackendChoice:
    """Build the backend named by ``backend`` (default ``settings.backend``).

    Explicit "ollama"/"openai"/"google" are built without probing (errors surface on the first call,
    with the host or key named); "auto" probes Ollama's ``/api/tags`` for ``probe_timeout`` seconds,
    then the ``openai_servers`` ports (see the module docstring). Raises :class:`LLMError` for an
    unknown backend name and for an explicit "google" without a key.
    """
    settings = settings or LLMSettings()
    backend = backend or settings.backend
    if backend not in BACKENDS:
        raise LLMError(f"Unknown LLM backend {backend!r}; choose one of {', '.join(BACKENDS)}.")
    if backend == "offline":
        return BackendChoice(None, "offline", "offline mode chosen")
    ollama = OllamaBackend(settings.ollama_host, settings.ollama_model, settings.temperature,
                           settings.timeout_s)
    if backend == "ollama":
        return BackendChoice(ollama, "ollama")
    if backend == "openai":
        return BackendChoice(OpenAIBackend(settings.openai_base_url, settings.openai_model,
                                           settings.temperature, settings.timeout_s), "openai")
    if backend == "google":
        return BackendChoice(GoogleBackend(settings.google_model, temperature=settings.temperature,
                                           timeout=settings.timeout_s), "google")
    notes = []
    try:
        models = ollama.list_models(timeout=probe_timeout)
        if has_model(models, ollama.model):
            return BackendChoice(ollama, "ollama", f"Ollama answers at {ollama.host}", "ready")
        notes.append(f"Ollama at {ollama.host} has no model '{ollama.model}'")
        state = "no-model"
    except LLMError as err:
        notes.append(f"Ollama not reachable at {ollama.host}")
        log.debug("auto backend: %s", err)
        state = "unreachable"
    candidate = None
    timeout = min(probe_timeout, DISCOVERY_TIMEOUT_S)
    # the servers the user confirmed, at the address confirmed (wherever "auto" found them), first
    confirmed = [FoundServer(_usual_name(url, openai_servers), url, tuple(served))
                 for url in settings.confirmed_servers
                 if (served := _models_or_none(url, timeout)) is not None]
    # a confirmed server that answers is used without looking on the usual ports (it may be one of them)
    found_servers = confirmed[:1] or discover_openai_servers(openai_servers, timeout=timeout)
    for found in found_servers:
        if found.base_url in settings.confirmed_servers:
            model = settings.openai_model if settings.openai_model in found.models or not found.models \
                else found.models[0]
            llm = OpenAIBackend(found.base_url, model, settings.temperature, settings.timeout_s)
            notes.append(f"using {found.name} at {found.base_url} (model {model})")
            return BackendChoice(llm, "openai", "; ".join(notes), state)
        if candidate is None and found.base_url not in settings.declined_servers:
            candidate = found
    if candidate is not None:
        notes.append(f"{candidate.question} (not used until confirmed)")
    if secrets.google_api_key():
        try:
            return BackendChoice(GoogleBackend(settings.google_model, temperature=settings.temperature,
                                               timeout=settings.timeout_s), "google", "; ".join(notes), state,
                                 candidate)
        except LLMError as err:
            notes.append(str(err))
    else:
        notes.append("no Google API key")
    return BackendChoice(None, "offline", "; ".join(notes), state, candidate)


def make_llm(settings: LLMSettings | None = None, backend: str | None = None) -> tuple[LLMFn | None, str]:
    """``(llm_fn or None, backend_name)`` for the settings; None means offline mode."""
    choice = choose_backend(settings, backend)
    return choice.llm, choice.name


def split_model_name(model: str) -> tuple[str, str]:
    """``("openai" | "ollama", bare name)`` for a model as the settings and ``--models`` write it."""
    text = model.strip()
    if text.lower().startswith(OPENAI_PREFIX):
        return "openai", text[len(OPENAI_PREFIX):]
    if text.lower().startswith(OLLAMA_PREFIX):
        return "ollama", text[len(OLLAMA_PREFIX):]
    return "ollama", text


class ModelDispatch:
    """One ``chat`` for models on several servers, picked by the name's prefix (see
    :func:`split_model_name`); each server's backend is made on first use and kept."""

    name = "dispatch"

    def __init__(self, ollama_host: str | None = None, openai_base_url: str | None = None,
                 timeout: float = 120.0, *, ollama: Any = None, openai: Any = None) -> None:
        self.ollama_host = ollama_host or DEFAULT_OLLAMA_HOST
        self.openai_base_url = openai_base_url or DEFAULT_OPENAI_BASE_URL
        self.timeout = timeout
        self._servers: dict[str, Any] = {k: v for k, v in (("ollama", ollama), ("openai", openai)) if v}

    def server(self, kind: str) -> Any:
        """The backend of ``kind`` ("ollama" or "openai")."""
        if kind not in self._servers:
            self._servers[kind] = (
                OpenAIBackend(self.openai_base_url, timeout=self.timeout) if kind == "openai"
                else OllamaBackend(self.ollama_host, timeout=self.timeout))
        return self._servers[kind]

    def backend_for(self, model: str) -> tuple[Any, str]:
        """``(backend, name on that server)`` for a model name as written in the settings."""
        kind, name = split_model_name(model)
        return self.server(kind), name

    def supports_schema_for(self, model: str | None) -> bool:
        return bool(getattr(self.backend_for(model or "")[0], "supports_schema", False))

    def describe(self, model: str) -> dict[str, str]:
        """Where ``model`` is answered, for the search log's provenance: ``{"backend", "host", "model"}``."""
        backend, name = self.backend_for(model)
        return {"backend": str(backend.name), "host": str(getattr(backend, "host", "")), "model": name}

    def chat(self, prompt: str, system: str | None = None, *, model: str | None = None, **kwargs: Any) -> str:
        backend, name = self.backend_for(model or "")
        return backend.chat(prompt, system, model=name or None, **kwargs)
