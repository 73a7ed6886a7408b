"""What the app found out about each LLM server, forgotten when the server's model list changes.

Why: the window makes a backend per question, so what one question found out about a server is kept
for the process — a schema it refused (:mod:`~kmds_desktop.llm.structured`), the schema dialect it
takes (:mod:`~kmds_desktop.llm.openai_backend`), how long its first route took
(:mod:`~kmds_desktop.llm.prompt_cache`). A server that now offers other models (LM Studio loading
another one, a llama.cpp server restarted on another file, ``ollama pull``) may answer otherwise, so
each time the app lists a server's models (the status line's probe, Preferences' List models,
Automatic's look at the usual ports) and the list differs from the last one seen there, what was
found out about that server is forgotten and found out again on the next question.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

log = logging.getLogger(__name__)

_lock = threading.Lock()
#: The model list last seen per server address (as the backends name it, ``host``).
_SEEN: dict[str, tuple[str, ...]] = {}
#: Who remembers something per server: each is told the address whose memory is now stale.
_FORGETTERS: list[Callable[[str], None]] = []


def remembers_per_server(forget: Callable[[str], None]) -> Callable[[str], None]:
    """Register ``forget(host)``, called when that server's model list changed (usable as a decorator)."""
    with _lock:
        _FORGETTERS.append(forget)
    return forget


def model_list_seen(host: str, models: Sequence[str]) -> bool:
    """Record the models ``host`` offers; True (and what was found out about it forgotten) when they
    differ from the list seen there before. The first list seen changes nothing."""
    listed = tuple(sorted(models))
    with _lock:
        before = _SEEN.get(host)
        _SEEN[host] = listed
        forgetters = list(_FORGETTERS) if before is not None and before != listed else []
    for forget in forgetters:
        forget(host)
    if forgetters:
        log.info("the models at %s changed (%s -> %s): what it accepts is checked again",
                 host, ", ".join(before or ()) or "none", ", ".join(listed) or "none")
    return bool(forgetters)


def forget_model_lists() -> None:
    """Forget every list seen (a test, or a bench run)."""
    with _lock:
        _SEEN.clear()
