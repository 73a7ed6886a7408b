"""Replies constrained to a JSON schema where the backend can enforce it, plain text otherwise.

Why: a local model asked for "one JSON object" still adds prose, fences or a half-finished object;
a server that constrains decoding to a schema (Ollama's ``format=<schema>``, OpenAI's
``response_format={"type": "json_schema"}``, llama.cpp's grammar under both) makes the reply
parse every time. Not every server can: an old Ollama, a proxy or an OpenAI-compatible server
without grammar support refuses the schema (:class:`~kmds_desktop.llm.errors.LLMSchemaRefused`),
and a plain callable never sees one. Then the same prompt is asked again without a schema and the
caller's tolerant text parser reads the reply, as before; the refusal is remembered for that server
and model, so the next question goes straight to text. The caller is told which path was used
(``"schema"`` or ``"text"``), so results and the search log can say so.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kmds_desktop.llm.errors import LLMSchemaRefused
from kmds_desktop.llm.server_memory import remembers_per_server
from kmds_desktop.tasks import CancelToken

log = logging.getLogger(__name__)

#: How a reply was asked for: constrained to the schema, or free text parsed tolerantly.
SCHEMA = "schema"
TEXT = "text"

#: The servers and models (``(backend name, address, model)``) that refused a schema in this
#: process: they are asked in plain text from then on. Why: the window makes a backend per
#: question, and a llama.cpp server without grammar support refused the schema (HTTP 500) and was
#: asked again as text on every question: a refused request (and its wait) per question.
_REFUSED_SCHEMA: set[tuple[str, str, str]] = set()
#: Held while the set changes or is walked: ask workers add to it while a model list forgets from it.
_REFUSED_LOCK = threading.Lock()


def schema_key(backend: Any, model: str | None = None) -> tuple[str, str, str] | None:
    """``(backend name, address, model)`` a schema refusal is remembered under; None for a backend
    without an address (a plain callable: it never sees a schema)."""
    target, name = backend, model
    backend_for = getattr(backend, "backend_for", None)
    if callable(backend_for) and model:
        target, name = backend_for(model)
    host = getattr(target, "host", None)
    if not host:
        return None
    return str(getattr(target, "name", "")), str(host), str(name or getattr(target, "model", ""))


def schema_refused(backend: Any, model: str | None = None) -> bool:
    """Whether this server and model refused a schema already in this process."""
    key = schema_key(backend, model)
    return key is not None and key in _REFUSED_SCHEMA


@remembers_per_server
def _forget_server(host: str) -> None:
    """A server whose models changed is asked for a schema again."""
    with _REFUSED_LOCK:
        _REFUSED_SCHEMA.difference_update([k for k in _REFUSED_SCHEMA if k[1] == host])


def forget_schema_refusals() -> None:
    """Ask every server for a schema again (a test, or a bench run)."""
    with _REFUSED_LOCK:
        _REFUSED_SCHEMA.clear()


def can_enforce_schema(backend: Any, model: str | None = None) -> bool:
    """Whether ``backend`` (for ``model``, when it dispatches by name) takes ``schema=``."""
    for_model = getattr(backend, "supports_schema_for", None)
    if callable(for_model):
        return bool(for_model(model))
    return bool(getattr(backend, "supports_schema", False))


def structured_chat(backend: Any, prompt: str, schema: dict[str, Any], *, system: str | None = None,
                    text_prompt: str | None = None, temperature: float | None = None,
                    cancel: CancelToken | None = None, model: str | None = None,
                    options: dict[str, Any] | None = None) -> tuple[str, str]:
    """``(reply, path)``: the reply constrained to ``schema`` (path ``"schema"``) where the backend
    can enforce it, else asked as ``text_prompt`` (default ``prompt``) without one (path ``"text"``).

    Errors other than a refused schema (unreachable, timeout, cancel) are raised as they come:
    asking again without a schema would fail the same way.
    """
    kwargs: dict[str, Any] = {"cancel": cancel}
    if temperature is not None:
        kwargs["temperature"] = temperature
    if model is not None:
        kwargs["model"] = model
    if options:
        kwargs["options"] = options
    if can_enforce_schema(backend, model) and not schema_refused(backend, model):
        try:
            return backend.chat(prompt, system, schema=schema, **kwargs), SCHEMA
        except LLMSchemaRefused as err:
            key = schema_key(backend, model)
            if key is not None:
                with _REFUSED_LOCK:
                    _REFUSED_SCHEMA.add(key)
            log.info("%s; asking again without a schema, and so from now on", err)
    chat = getattr(backend, "chat", None)
    if chat is None:  # a plain ``prompt -> str`` callable
        return backend(text_prompt or prompt), TEXT
    return chat(text_prompt or prompt, system, **kwargs), TEXT
