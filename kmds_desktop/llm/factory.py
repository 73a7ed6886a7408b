"""Pick the LLM backend the settings ask for, and wrap plain callables into the same contract.

"auto" prefers a local Ollama that answers and has the configured model (private, free), then
Google when a key is available, then no LLM at all (offline mode) — so a fresh machine works
without any LLM and improves as soon as one appears.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kmds_desktop import secrets
from kmds_desktop.config import LLMSettings
from kmds_desktop.llm.errors import LLMBadReply, LLMError
from kmds_desktop.llm.google_backend import GoogleBackend
from kmds_desktop.llm.ollama_backend import OllamaBackend, has_model
from kmds_desktop.tasks import Cancelled

log = logging.getLogger(__name__)

#: The one callable type every backend provides: prompt in, reply text out.
LLMFn = Callable[[str], str]

BACKENDS = ("auto", "ollama", "google", "offline")


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
        except Exception as err:  # noqa: BLE001 - a user function may raise anything
            raise LLMError(f"The LLM function {self.label} failed: {type(err).__name__}: {err}") from err
        if not isinstance(reply, str):
            raise LLMBadReply(f"The LLM function {self.label} returned {type(reply).__name__}, not text.")
        return reply

    def stream(self, prompt: str, *args: object, **kwargs: object) -> Iterator[str]:
        """Plain callables do not stream: the whole reply is one chunk."""
        yield self(prompt)


@dataclass
class BackendChoice:
    """What :func:`choose_backend` picked and why (shown in the status bar and the result view)."""

    llm: LLMFn | None
    name: str  # "ollama" | "google" | "offline"
    note: str = ""
    #: What the "auto" probe found of Ollama: "ready", "no-model", "unreachable" ("" when not probed).
    ollama_state: str = ""


def choose_backend(settings: LLMSettings | None = None, backend: str | None = None,
                   probe_timeout: float = 2.0) -> BackendChoice:
    """Build the backend named by ``backend`` (default ``settings.backend``).

    Explicit "ollama"/"google" are built without probing (errors surface on the first call, with
    the host or key named); "auto" probes Ollama's ``/api/tags`` for ``probe_timeout`` seconds.
    Raises :class:`LLMError` only for an explicit "google" without a key.
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
    if secrets.google_api_key():
        try:
            return BackendChoice(GoogleBackend(settings.google_model, temperature=settings.temperature,
                                               timeout=settings.timeout_s), "google", "; ".join(notes), state)
        except LLMError as err:
            notes.append(str(err))
    else:
        notes.append("no Google API key")
    return BackendChoice(None, "offline", "; ".join(notes), state)


def make_llm(settings: LLMSettings | None = None, backend: str | None = None) -> tuple[LLMFn | None, str]:
    """``(llm_fn or None, backend_name)`` for the settings; None means offline mode."""
    choice = choose_backend(settings, backend)
    return choice.llm, choice.name
