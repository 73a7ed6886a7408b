"""A small Ollama-API server over llama.cpp (``llama-cpp-python``), for the real-model test tier.

Why: the app's Ollama path goes through the real ``ollama`` client, and CI has no Ollama. This
server answers the part of Ollama's API the app uses, from a real GGUF model, so the tests drive
the real client, real HTTP streaming and real (weak) model output:

- ``GET /api/tags``: the model under each name given with ``--name`` (one model, several names,
  so one process serves "two models" at different temperatures);
- ``POST /api/chat`` and ``POST /api/generate``: streamed (NDJSON, Ollama's default) or not;
  ``format`` ("json" or a JSON schema) becomes llama.cpp's JSON-schema grammar; ``options``
  ``temperature``, ``num_predict``, ``seed``, ``top_p`` and ``stop`` are passed on;
- an unknown model name is a 404 ``model '…' not found``, as Ollama says it.

One request generates at a time (a lock; llama.cpp holds one context). The states of the last few
prompts are kept (``--prompt-cache-mib``, default 2048; 0: only the one in the context), so a prompt
whose start was read before, not only just before, is read from that point on, as llama-server's
slots (chosen by prompt similarity) and Ollama's parallel contexts keep several prompts; without it
the routing prompt would be read afresh after every answer. Every byte of a kept state counts against
that memory (:class:`CountedRAMCache`). A client that goes away
stops its generation (the next write fails). ``--die-after-chunks N`` (with ``--die-on-request K``)
ends the process abruptly in the middle of the K-th reply, as a server that crashes or runs out of
memory does. Bound to 127.0.0.1 on a free port; prints ``LISTENING <port>`` once it serves.

Run: ``python tests/support/ollama_llamacpp_server.py --model FILE.gguf --name smol-a --name smol-b``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _response_format(fmt: Any) -> dict[str, Any] | None:
    """Ollama's ``format`` as llama-cpp-python's ``response_format`` (a grammar is built from it)."""
    if fmt == "json":
        return {"type": "json_object"}
    if isinstance(fmt, dict):
        return {"type": "json_object", "schema": fmt}
    return None


def counted_ram_cache(capacity_bytes: int) -> Any:
    """A ``LlamaRAMCache`` that counts every byte a kept state holds.

    Why: llama-cpp-python's cache counts only llama.cpp's own state (the KV cells: 27 MB for a
    1,000-token prompt of the 1.5B model), but each state also keeps a copy of the logits buffer
    (n_batch x vocabulary floats: 297 MB for Qwen's 152k-token vocabulary), so a 1 GiB cache kept
    some 37 states and a 32-question bench grew the server to 24 GB before the kernel killed it."""
    from llama_cpp import LlamaRAMCache

    class CountedRAMCache(LlamaRAMCache):
        @property
        def cache_size(self) -> int:
            return sum(state.llama_state_size + state.scores.nbytes + state.input_ids.nbytes
                       for state in self.cache_state.values())

    return CountedRAMCache(capacity_bytes=capacity_bytes)


class Server:
    """The model, its names, and the HTTP server that answers for them."""

    def __init__(self, model_path: str, names: list[str], n_ctx: int, threads: int,
                 die_on_request: int, die_after_chunks: int | None, prompt_cache_mib: int = 2048) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=model_path, n_ctx=n_ctx, n_threads=threads, verbose=False)
        if prompt_cache_mib > 0:
            self.llm.set_cache(counted_ram_cache(prompt_cache_mib << 20))
        self.names = names
        self.size = os.path.getsize(model_path)
        self.lock = threading.Lock()
        self.requests = 0
        self.die_on_request = die_on_request
        self.die_after_chunks = die_after_chunks

    def log_request(self, messages: list[dict[str, str]], reply: str, first_s: float | None,
                    started: float) -> None:
        """One line on stderr per finished request: the reply's and the messages' tokens (exact, by the
        model's tokenizer; they do not depend on the machine's load), seconds to the first piece and in
        all. Benches read these lines from the server's log."""
        def count(text: str) -> int:
            return len(self.llm.tokenize(text.encode(), add_bos=False, special=False)) if text else 0

        prompt = sum(count(m.get("content", "")) for m in messages)
        first = -1.0 if first_s is None else first_s
        print(f"KMDS_REQUEST reply_tokens={count(reply)} prompt_tokens={prompt} first_s={first:.2f} "
              f"total_s={time.perf_counter() - started:.2f}", file=sys.stderr, flush=True)

    def known(self, name: str) -> bool:
        return any(n in self.names for n in (name, f"{name}:latest", name.removesuffix(":latest")))

    def generate(self, messages: list[dict[str, str]], options: dict[str, Any], fmt: Any,
                 stream: bool) -> Any:
        kwargs: dict[str, Any] = {
            "messages": messages,
            "temperature": float(options.get("temperature", 0.8)),
            "max_tokens": int(options["num_predict"]) if int(options.get("num_predict", -1)) > 0 else None,
            "stream": stream,
        }
        for key in ("seed", "top_p", "stop"):
            if key in options:
                kwargs[key] = options[key]
        response_format = _response_format(fmt)
        if response_format is not None:
            kwargs["response_format"] = response_format
        return self.llm.create_chat_completion(**kwargs)


def make_handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, status: int, data: Any) -> None:
            body = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # http.server's name
            if self.path.rstrip("/") in ("/api/tags",):
                self._json(200, {"models": [
                    {"name": n, "model": n, "modified_at": _now(), "size": server.size,
                     "digest": f"{abs(hash(n)):064x}"[:64],
                     "details": {"format": "gguf", "family": "llama", "parameter_size": "",
                                 "quantization_level": ""}}
                    for n in server.names]})
            elif self.path.rstrip("/") in ("", "/"):
                body = b"Ollama is running"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._json(400, {"error": "invalid JSON"})
                return
            path = self.path.rstrip("/")
            if path not in ("/api/chat", "/api/generate"):
                self._json(404, {"error": "not found"})
                return
            model = str(body.get("model") or "")
            if not server.known(model):
                self._json(404, {"error": f"model '{model}' not found"})
                return
            if path == "/api/chat":
                messages = [{"role": m.get("role", "user"), "content": m.get("content", "")}
                            for m in body.get("messages") or []]
            else:
                messages = ([{"role": "system", "content": body["system"]}] if body.get("system") else [])
                messages.append({"role": "user", "content": str(body.get("prompt") or "")})
            stream = body.get("stream", True) is not False
            options = body.get("options") or {}
            with server.lock:
                server.requests += 1
                dying = server.requests == server.die_on_request and server.die_after_chunks is not None
                started = time.perf_counter()
                if stream:
                    self._stream(path, model, messages, options, body.get("format"), dying, started)
                else:
                    reply = server.generate(messages, options, body.get("format"), False)
                    text = reply["choices"][0]["message"].get("content") or ""
                    server.log_request(messages, text, None, started)
                    self._json(200, self._final(path, model, text, started, reply.get("usage") or {}))

        def _final(self, path: str, model: str, text: str, started: float, usage: dict[str, Any]) -> dict:
            data: dict[str, Any] = {"model": model, "created_at": _now(), "done": True, "done_reason": "stop",
                                    "total_duration": int((time.perf_counter() - started) * 1e9),
                                    "prompt_eval_count": usage.get("prompt_tokens", 0),
                                    "eval_count": usage.get("completion_tokens", 0)}
            if path == "/api/chat":
                data["message"] = {"role": "assistant", "content": text}
            else:
                data["response"] = text
            return data

        def _stream(self, path: str, model: str, messages: list[dict[str, str]], options: dict[str, Any],
                    fmt: Any, dying: bool, started: float) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def send(data: dict[str, Any]) -> None:
                line = json.dumps(data).encode() + b"\n"
                self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.flush()

            chunks = 0
            pieces: list[str] = []
            first: float | None = None
            try:
                for part in server.generate(messages, options, fmt, True):
                    piece = part["choices"][0]["delta"].get("content") or ""
                    if not piece:
                        continue
                    pieces.append(piece)
                    first = first if first is not None else time.perf_counter() - started
                    data: dict[str, Any] = {"model": model, "created_at": _now(), "done": False}
                    if path == "/api/chat":
                        data["message"] = {"role": "assistant", "content": piece}
                    else:
                        data["response"] = piece
                    send(data)
                    chunks += 1
                    if dying and chunks >= (server.die_after_chunks or 0):
                        os._exit(3)  # a crash in the middle of a reply: no last chunk, sockets reset
                final = self._final(path, model, "", started, {})
                send(final)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                server.log_request(messages, "".join(pieces), first, started)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client went away: stop generating for it

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a GGUF file")
    parser.add_argument("--name", action="append", required=True, help="a model name to serve it under")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    parser.add_argument("--die-on-request", type=int, default=1)
    parser.add_argument("--die-after-chunks", type=int, default=None)
    parser.add_argument("--prompt-cache-mib", type=int, default=2048,
                        help="memory for the states of earlier prompts (0: keep only the current one)")
    args = parser.parse_args(argv)
    server = Server(args.model, args.name, args.ctx, args.threads, args.die_on_request, args.die_after_chunks,
                    args.prompt_cache_mib)
    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(server))
    httpd.daemon_threads = True
    print(f"LISTENING {httpd.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        httpd.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
