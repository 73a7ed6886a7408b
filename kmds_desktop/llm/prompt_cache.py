"""Whether a server keeps the route prompt's instructions between questions, judged by how long routes take.

Why: the route prompt puts its instructions (the templates, the KB's vocabulary) first and the question
last, so a server that keeps the prompt it has read reads only the question the next time. llama.cpp's
``llama-server`` and Ollama do; ``python -m llama_cpp.server`` does only when started with
``--cache true``. Measured with Qwen2.5-Coder-1.5B on 2 cores (four questions on the demo KB, the app's
OpenAI backend): without the cache every route took 12.4–15.2 s, the whole prompt read afresh each
time; with it the first took 16.0 s and the later ones 1.5–2.4 s. Nothing in an OpenAI-compatible reply
says whether the server kept the prompt, so a later route that takes about as long as the first one is
taken as the sign, and the user is told the setting that fixes it, once per server and model.
"""

from __future__ import annotations

import threading
from typing import Any

from kmds_desktop.llm.server_memory import remembers_per_server
from kmds_desktop.llm.structured import schema_key

#: A later route slower than this (seconds) is said (the project's target for a later route).
SLOW_LATER_ROUTE_S = 6.0
#: ... when it took at least this share of the first route's time: a kept prompt made it 0.09–0.15 of it.
SAME_AS_FIRST = 0.5

_lock = threading.Lock()
#: The first route's seconds per server and model (``schema_key``) in this process; the window makes a
#: backend per question, so this outlives them.
_FIRST_ROUTE_S: dict[tuple[str, str, str], float] = {}
#: The servers already told (said once: the user has read it, or chose to leave the server as it is).
_TOLD: set[tuple[str, str, str]] = set()


def slow_route_note(backend: Any, seconds: float) -> str:
    """Record how long a route on ``backend`` took; a sentence for the user when a later route was slow
    because the server seems to read the whole prompt afresh each time ("" otherwise, or said already)."""
    key = schema_key(backend)
    if key is None:
        return ""
    with _lock:
        if key not in _FIRST_ROUTE_S:  # the first route reads the instructions on any server
            _FIRST_ROUTE_S[key] = seconds
            return ""
        first = _FIRST_ROUTE_S[key]
        if seconds <= SLOW_LATER_ROUTE_S or seconds < SAME_AS_FIRST * first or key in _TOLD:
            return ""
        _TOLD.add(key)
    advice = ("Started as python -m llama_cpp.server, add --cache true (llama-server and LM Studio keep them "
              "by default)" if key[0] == "openai" else
              "Keep the model loaded between questions (OLLAMA_KEEP_ALIVE on the server)")
    return (f"The model took {seconds:.1f} s to choose the route, about as long as the first one "
            f"({first:.1f} s): the server seems to read the instructions afresh for every question. "
            f"{advice}; a later route then takes a few seconds.")


@remembers_per_server
def _forget_server(host: str) -> None:
    """A server whose models changed is judged afresh: its next route counts as a first one."""
    with _lock:
        for key in [k for k in _FIRST_ROUTE_S if k[1] == host]:
            del _FIRST_ROUTE_S[key]
        _TOLD.difference_update({k for k in _TOLD if k[1] == host})


def forget_route_times() -> None:
    """Start the judgement afresh (a test, or a bench run)."""
    with _lock:
        _FIRST_ROUTE_S.clear()
        _TOLD.clear()
