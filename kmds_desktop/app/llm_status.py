"""The LLM status line as the last answer found the server, so it follows the server between probes.

Why: the status bar's "LLM: ollama · model (ready)" is probed when the window starts and when
Preferences change; a server that dies afterwards (or comes back) would otherwise keep its old word
until the next probe. Every answer is a fresh probe of its own: the LLM answered, or it failed and
the answer was quoted from the records. The window and ``kmds-desktop ask`` read the same result.
"""

from __future__ import annotations

from typing import Any

from kmds_desktop.app.preferences import LLMProbe, ready_probe
from kmds_desktop.config import LLMSettings

#: Backends whose answers say something about a server the status line names.
_SERVED = ("ollama", "openai", "google")


def confirm_server(llm: LLMSettings, base_url: str) -> LLMSettings:
    """A copy of ``llm`` in which the user has said yes to "Found … — use it?" for ``base_url``:
    "auto" may use that server from now on (it is remembered in ``confirmed_servers``)."""
    confirmed = [*llm.confirmed_servers, base_url] if base_url not in llm.confirmed_servers \
        else list(llm.confirmed_servers)
    return llm.model_copy(update={"confirmed_servers": confirmed})


def decline_server(llm: LLMSettings, base_url: str) -> LLMSettings:
    """A copy of ``llm`` in which the user has said no to "Found … — use it?" for ``base_url``: it
    is never used and not asked about again (``declined_servers``; a yes given before is withdrawn)."""
    declined = [*llm.declined_servers, base_url] if base_url not in llm.declined_servers \
        else list(llm.declined_servers)
    confirmed = [url for url in llm.confirmed_servers if url != base_url]
    return llm.model_copy(update={"declined_servers": declined, "confirmed_servers": confirmed})


def model_of(backend: str, llm: LLMSettings) -> str:
    """The model the settings name for ``backend`` ("" for none)."""
    models = {"ollama": llm.ollama_model, "openai": llm.openai_model, "google": llm.google_model}
    return models.get(backend, "")


def status_after_answer(result: Any, llm: LLMSettings) -> LLMProbe | None:
    """The status after ``result``, or None when the answer tells nothing about a server
    (offline, or a route given by the user and answered without an LLM)."""
    backend = str(getattr(result, "backend", "") or "")
    if backend not in _SERVED:
        return None
    model = str(getattr(result, "model", "") or "") or model_of(backend, llm)  # the one that was asked
    name = f"{backend} · {model}" if model else backend
    synthesis = getattr(result, "synthesis", "")
    # a route the model failed to give, where it then wrote the answer, was a bad reply, not a server
    # that does not answer
    router_failed = getattr(result, "fallback_code", None) == "llm_error" and synthesis != "llm"
    if synthesis == "extractive" or router_failed:
        why = getattr(result, "synthesis_error", None) or getattr(result, "fallback_reason", None) or ""
        return LLMProbe(f"{name} (not answering)", f"The last question got no answer from it: {why}".strip())
    if synthesis == "llm":
        return ready_probe(name, "It answered the last question.")
    return None
