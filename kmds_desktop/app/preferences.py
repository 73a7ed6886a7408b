"""Preferences as the app uses them: which LLM backend the settings give, and the models a server has.

Why here and not in the dialog: "is the configured model installed?" must have one answer. The
ask job uses :func:`kmds_desktop.llm.factory.choose_backend` (and
:func:`kmds_desktop.llm.ollama_backend.has_model`, where ``foo`` and ``foo:latest`` are the same
model), so the status the window shows is computed by the same functions. Both are blocking network
calls (``progress=``/``cancel=`` for a worker).
"""

from __future__ import annotations

from typing import Any

from kmds_desktop import secrets
from kmds_desktop.config import LLMSettings
from kmds_desktop.llm.errors import LLMError
from kmds_desktop.llm.factory import choose_backend
from kmds_desktop.llm.ollama_backend import OllamaBackend, has_model

#: Seconds the status probe waits for an Ollama server (the window's status bar, Preferences).
PROBE_TIMEOUT_S = 2.0


def list_ollama_models(host: str, *, progress: Any = None, cancel: Any = None) -> list[str]:
    """Models installed on the Ollama server at ``host`` (raises LLMError naming the host)."""
    return OllamaBackend(host).list_models(timeout=5.0)


def probe_llm_backend(llm: LLMSettings, *, progress: Any = None, cancel: Any = None) -> tuple[str, str]:
    """(status text, tooltip) for the configured LLM backend; never raises for an absent LLM."""
    backend = llm.backend
    if backend == "offline":
        return "offline (no LLM; answers are extractive)", "Choose a backend in Edit > Preferences."
    if backend == "google":
        has_key = bool(secrets.google_api_key())
        return (
            f"google · {llm.google_model}" + ("" if has_key else " (no API key)"),
            "The key is read from GOOGLE_API_KEY or the OS keyring.",
        )
    if backend == "auto":
        choice = choose_backend(llm, probe_timeout=PROBE_TIMEOUT_S)  # what asking will use
        why = {"no-model": f"Ollama has no {llm.ollama_model}",
               "unreachable": "Ollama not reachable"}.get(choice.ollama_state, "")
        if choice.name == "ollama":
            return f"ollama · {llm.ollama_model} (ready)", choice.note
        if choice.name == "google":
            return f"google · {llm.google_model}" + (f" ({why})" if why else ""), choice.note
        return (f"offline ({why})" if why else "offline"), choice.note
    try:
        models = OllamaBackend(llm.ollama_host, llm.ollama_model).list_models(timeout=PROBE_TIMEOUT_S)
    except LLMError as exc:
        return "ollama (not reachable)", str(exc)
    listed = f"{llm.ollama_host} has: {', '.join(models) or 'no models'}"
    if has_model(models, llm.ollama_model):
        return f"ollama · {llm.ollama_model} (ready)", listed
    return f"ollama · {llm.ollama_model} (not installed)", listed
