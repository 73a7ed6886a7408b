"""Seconds until a dead LLM server is given up, and requests per question to a server that refuses
a schema: before (the whole timeout; a schema asked for on every question) and after (the liveness
watch; the refusal remembered).

Servers, all real sockets on 127.0.0.1:

- **killed**: nothing listens on the port (a server stopped for good): the connection is refused;
- **stopping**: a server shutting down gracefully: it took the request's connection and keeps it open
  without an answer, and closes its port 3 s later (as uvicorn does while it waits for requests in
  flight): only the liveness watch, whose model-list probe is then refused, ends the wait before the
  timeout. (A port that takes connections and never answers, e.g. a busy llama-cpp-python server whose
  model list waits for the model, counts as busy and runs to the timeout: that is not measured here.)
- **refusing**: an OpenAI-compatible server (``tests/support/fake_openai.py``) that refuses
  ``response_format`` with 400, asked for a route the way the orchestrator asks, once per question,
  each question with a new backend (as the window makes one per question).

"Before" is the same code with the liveness watch off (``liveness_probe=False``; the OpenAI-compatible
backend ships with it off) and the refusals
forgotten before each question. The timeout is the ``--timeout`` given (30 s by default; the
settings' default is 120 s). Usage: ``python bench/llm_latency.py [--timeout 30] [--questions 5]``.
Last line: seconds to give up a stopping server, before / after.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from support.fake_openai import FakeOpenAI, OpenAIScript  # noqa: E402

from kmds_desktop.ask.routing import route_json_schema  # noqa: E402
from kmds_desktop.llm import LLMError, OllamaBackend, OpenAIBackend, structured_chat  # noqa: E402
from kmds_desktop.llm.structured import forget_schema_refusals  # noqa: E402

ROUTE = {"intent_class": "exploratory_search", "listing": True, "explanation": "named",
         "filters": {"obs_type_filter": None, "workflow": None, "finding_seq_min": None,
                     "finding_seq_max": None, "keyword": None}}


def _give_up_seconds(backend: object) -> tuple[float, str]:
    started = time.perf_counter()
    try:
        backend.chat("Which model was chosen?")  # type: ignore[attr-defined]
    except LLMError as err:
        return time.perf_counter() - started, type(err).__name__
    return time.perf_counter() - started, "answered"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stopping_server(port_holder: list[int], held: list[socket.socket]) -> None:
    """Listen, take one connection and keep it without an answer, close the port 3 s later."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port_holder.append(listener.getsockname()[1])
    conn, _addr = listener.accept()
    held.append(conn)
    time.sleep(3.0)
    listener.close()


def dead_servers(timeout: float) -> dict[str, dict[str, float]]:
    """Seconds to an error for each kind of dead server, backend and before/after."""
    out: dict[str, dict[str, float]] = {}
    makers = {
        # The OpenAI-compatible backend keeps its default (no probe: a request reaching
        # llama-cpp-python's server while it generates interrupts the generation), so its "after" is
        # the app as shipped, not the watch.
        "openai": lambda url, probe: OpenAIBackend(f"{url}/v1", "m", timeout=timeout, api_key="")
        if probe else OpenAIBackend(f"{url}/v1", "m", timeout=timeout, api_key="", liveness_probe=False),
        "ollama": lambda url, probe: OllamaBackend(url, "m", timeout=timeout, liveness_probe=probe),
    }
    for kind in ("killed", "stopping"):
        for name, make in makers.items():
            for when, probe in (("before", False), ("after", True)):
                held: list[socket.socket] = []
                if kind == "killed":
                    port = _closed_port()
                else:
                    ports: list[int] = []
                    server = threading.Thread(target=_stopping_server, args=(ports, held), daemon=True)
                    server.start()
                    while not ports:
                        time.sleep(0.01)
                    port = ports[0]
                seconds, error = _give_up_seconds(make(f"http://127.0.0.1:{port}", probe))
                for conn in held:
                    conn.close()
                out.setdefault(f"{kind} {name}", {})[when] = seconds
                print(f"{kind:9} {name:7} {when:7} {seconds:6.2f} s  ({error})")
    return out


def schema_requests(questions: int) -> tuple[int, int]:
    """Requests the refusing server saw for ``questions`` routes: before and after."""
    counts = []
    for remembered in (False, True):
        forget_schema_refusals()
        with FakeOpenAI() as fake:
            fake.models["m"] = OpenAIScript(replies=[json.dumps(ROUTE)], refuse_schema=True)
            for _ in range(questions):
                if not remembered:
                    forget_schema_refusals()
                backend = OpenAIBackend(f"{fake.url}/v1", "m", api_key="")
                structured_chat(backend, "route this", route_json_schema())
            counts.append(len(fake.requests))
    forget_schema_refusals()
    print(f"schema-refusing server, {questions} questions: {counts[0]} requests before, {counts[1]} after")
    return counts[0], counts[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--questions", type=int, default=5)
    args = parser.parse_args()
    seconds = dead_servers(args.timeout)
    schema_requests(args.questions)
    before, after = seconds["stopping ollama"]["before"], seconds["stopping ollama"]["after"]
    print(f"seconds to give up a stopping Ollama server, before / after: {before:.1f} / {after:.1f} = "
          f"{before / after:.1f}x (target: after <= 5 s; OpenAI-compatible: no probe, the timeout)")


if __name__ == "__main__":
    main()
