"""Google GenAI backend (Gemini) through the official ``google-genai`` client.

The API key comes from ``GOOGLE_API_KEY`` or the OS keyring (:mod:`kmds_desktop.secrets`) and is
only ever held in memory: it is never written to the settings file, and every error message is
passed through :func:`~kmds_desktop.secrets.redact` so it cannot leak into logs or dialogs.
``base_url`` exists for tests (a local fake endpoint) and for proxies.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kmds_desktop import secrets
from kmds_desktop.llm.errors import (
    LLMAuthError,
    LLMBadReply,
    LLMError,
    LLMModelNotFound,
    LLMQuotaError,
    LLMTimeout,
    LLMUnreachable,
)
from kmds_desktop.tasks import Cancelled, CancelToken

DEFAULT_GOOGLE_MODEL = "gemini-2.5-flash"
#: Model names a "model not found" message lists at most.
MODELS_SHOWN = 8


class GoogleBackend:
    """A Gemini model, usable as an ``LLMFn``; ``.chat()`` and ``.stream()`` as
    :class:`~kmds_desktop.llm.ollama_backend.OllamaBackend` has them (a cancel is seen between the
    streamed pieces)."""

    name = "google"

    def __init__(self, model: str = DEFAULT_GOOGLE_MODEL, *, api_key: str | None = None,
                 temperature: float = 0.1, timeout: float = 120.0, base_url: str | None = None) -> None:
        key = api_key or secrets.google_api_key()
        if not key:
            raise LLMAuthError(
                "No Google API key: set the GOOGLE_API_KEY environment variable or store the key in "
                "Preferences → LLM (it is kept in the system keyring, never in a file)."
            )
        self._key = key
        self.model = model
        self.temperature = temperature
        self.timeout = float(timeout)
        self.base_url = base_url
        # why: google loads on first use, not at start-up
        from google import genai
        from google.genai import types

        http_options = types.HttpOptions(timeout=int(self.timeout * 1000), base_url=base_url)
        self._client = genai.Client(api_key=key, http_options=http_options)

    def __repr__(self) -> str:  # never shows the key
        return f"GoogleBackend(model={self.model!r})"

    @property
    def label(self) -> str:
        return f"google:{self.model}"

    def __call__(self, prompt: str) -> str:
        return self.chat(prompt)

    def _config(self, system: str | None, temperature: float | None) -> Any:
        from google.genai import types  # why: google loads on first use, not at start-up

        return types.GenerateContentConfig(
            temperature=self.temperature if temperature is None else temperature,
            system_instruction=system or None,
        )

    def chat(self, prompt: str, system: str | None = None, *, temperature: float | None = None,
             cancel: CancelToken | None = None, model: str | None = None) -> str:
        """Whole reply text; raises :class:`LLMError` subclasses (key redacted from every message)."""
        if cancel is not None:
            cancel.raise_if_cancelled()
        model = model or self.model
        try:
            response = self._client.models.generate_content(
                model=model, contents=prompt, config=self._config(system, temperature))
            text = response.text
        except Exception as err:  # noqa: BLE001
            raise self._translate(err, model) from None
        if cancel is not None:
            cancel.raise_if_cancelled()
        if not text or not text.strip():
            raise LLMBadReply(f"Google model '{model}' returned no text (the reply may have been blocked).")
        return text

    def stream(self, prompt: str, system: str | None = None, *, temperature: float | None = None,
               cancel: CancelToken | None = None, model: str | None = None) -> Iterator[str]:
        """Yield reply chunks as Gemini streams them; stops with :class:`Cancelled` between chunks."""
        model = model or self.model
        try:
            for chunk in self._client.models.generate_content_stream(
                    model=model, contents=prompt, config=self._config(system, temperature)):
                if cancel is not None and cancel.cancelled:
                    raise Cancelled("cancelled by the user")
                if chunk.text:
                    yield chunk.text
        except (Cancelled, LLMError):
            raise
        except Exception as err:  # noqa: BLE001
            raise self._translate(err, model) from None

    def available_models(self) -> list[str]:
        """Names of the models this key can generate text with (``[]`` when they cannot be listed).

        Asked only after a "model not found", so the message can name real choices.
        """
        try:
            names = []
            for found in self._client.models.list(config={"page_size": 100}):
                actions = found.supported_actions or []
                if found.name and (not actions or "generateContent" in actions):
                    names.append(found.name.removeprefix("models/"))
            return sorted(dict.fromkeys(names))
        except Exception:  # noqa: BLE001 - listing is a courtesy; the error being reported matters
            return []

    def _translate(self, err: Exception, model: str) -> LLMError:
        from google.genai import errors as genai_errors  # why: google loads on first use, not at start-up

        def clean(text: str) -> str:
            return secrets.redact(text, self._key, *secrets.url_secrets(self.base_url or ""))

        where = f"Google GenAI ({secrets.redact_url(self.base_url)})" if self.base_url else "Google GenAI"
        if isinstance(err, genai_errors.APIError):
            code, status, message = err.code, str(err.status or ""), clean(str(err.message or err))
            details = clean(str(err.details))
            if code in (401, 403) or "API_KEY_INVALID" in details or status == "UNAUTHENTICATED":
                return LLMAuthError(
                    f"{where} rejected the API key ({code} {status}): {message} Check GOOGLE_API_KEY or "
                    "the key stored in Preferences → LLM.")
            if code == 429 or status == "RESOURCE_EXHAUSTED":
                return LLMQuotaError(
                    f"{where} quota or rate limit reached for '{model}' ({code}): {message} Wait and retry, "
                    "or use another model or Ollama.")
            if code == 404:
                available = self.available_models()
                choose = (f"Models this key can use: {', '.join(available[:MODELS_SHOWN])}"
                          + (", …" if len(available) > MODELS_SHOWN else "") + "."
                          if available else f"For example {DEFAULT_GOOGLE_MODEL}.")
                return LLMModelNotFound(
                    f"{where} has no model '{model}' ({message}). Choose another model in Preferences → LLM. "
                    + choose, model=model)
            if code in (408, 504) or status == "DEADLINE_EXCEEDED":
                return LLMTimeout(f"{where} timed out for '{model}': {message}")
            return LLMError(f"{where} failed for '{model}' ({code} {status}): {message}")
        name = type(err).__name__
        text = clean(str(err))
        if "Timeout" in name or "timed out" in text.lower():
            return LLMTimeout(f"{where} did not answer within {self.timeout:g} s. Raise the timeout in "
                              "Preferences → LLM or try again.")
        if "Connect" in name or "Network" in name or isinstance(err, ConnectionError | OSError):
            return LLMUnreachable(f"Cannot reach {where}: {text}. Check the network connection.",
                                  host=secrets.redact_url(self.base_url) if self.base_url
                                  else "generativelanguage.googleapis.com")
        return LLMError(f"{where} failed: {name}: {text}")
