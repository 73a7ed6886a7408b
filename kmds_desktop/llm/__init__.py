"""LLM backends behind one callable type, ``LLMFn = Callable[[str], str]``.

Backends: :class:`OllamaBackend` (local or remote Ollama), :class:`OpenAIBackend` (any
OpenAI-compatible server: llama.cpp, LM Studio, vLLM), :class:`GoogleBackend` (Gemini through
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
    LLMSchemaRefused,
    LLMTimeout,
    LLMUnreachable,
)
from kmds_desktop.llm.factory import (
    BACKENDS,
    BackendChoice,
    FunctionBackend,
    LLMFn,
    ModelDispatch,
    choose_backend,
    make_llm,
    split_model_name,
)
from kmds_desktop.llm.google_backend import DEFAULT_GOOGLE_MODEL, GoogleBackend
from kmds_desktop.llm.ollama_backend import DEFAULT_OLLAMA_MODEL, OllamaBackend
from kmds_desktop.llm.openai_backend import DEFAULT_OPENAI_MODEL, OpenAIBackend
from kmds_desktop.llm.structured import can_enforce_schema, structured_chat

__all__ = [
    "BACKENDS",
    "DEFAULT_GOOGLE_MODEL",
    "DEFAULT_OLLAMA_MODEL",
    "DEFAULT_OPENAI_MODEL",
    "BackendChoice",
    "FunctionBackend",
    "GoogleBackend",
    "LLMAuthError",
    "LLMBadReply",
    "LLMError",
    "LLMFn",
    "LLMModelNotFound",
    "LLMQuotaError",
    "LLMSchemaRefused",
    "LLMTimeout",
    "LLMUnreachable",
    "ModelDispatch",
    "OllamaBackend",
    "OpenAIBackend",
    "can_enforce_schema",
    "choose_backend",
    "make_llm",
    "split_model_name",
    "structured_chat",
]
