"""LLM backends behind one callable type, ``LLMFn = Callable[[str], str]``.

Backends: :class:`OllamaBackend` (local or remote Ollama), :class:`GoogleBackend` (Gemini through
``google-genai``), :class:`FunctionBackend` (any user callable), and offline mode (``None``). Each
backend also streams (``.stream(prompt)``) for the answer view. Failures are one family,
:class:`LLMError`, whose messages tell the user what to do.
"""

from kmds_desktop.llm.errors import (
    LLMAuthError,
    LLMBadReply,
    LLMError,
    LLMModelNotFound,
    LLMQuotaError,
    LLMTimeout,
    LLMUnreachable,
)
from kmds_desktop.llm.factory import BACKENDS, BackendChoice, FunctionBackend, LLMFn, choose_backend, make_llm
from kmds_desktop.llm.google_backend import DEFAULT_GOOGLE_MODEL, GoogleBackend
from kmds_desktop.llm.ollama_backend import DEFAULT_OLLAMA_MODEL, OllamaBackend

__all__ = [
    "BACKENDS",
    "DEFAULT_GOOGLE_MODEL",
    "DEFAULT_OLLAMA_MODEL",
    "BackendChoice",
    "FunctionBackend",
    "GoogleBackend",
    "LLMAuthError",
    "LLMBadReply",
    "LLMError",
    "LLMFn",
    "LLMModelNotFound",
    "LLMQuotaError",
    "LLMTimeout",
    "LLMUnreachable",
    "OllamaBackend",
    "choose_backend",
    "make_llm",
]
