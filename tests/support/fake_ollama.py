"""A real HTTP server on 127.0.0.1 that speaks enough of Ollama's API for tests and benchmarks.

Driven through the real ``ollama`` client. Each model is scripted: a list of replies (used in
turn, the last one repeating) or a callable ``(prompt, request_json) -> str``; an optional delay;
an HTTP status (404 makes the model "not found"); streaming follows the request's ``stream`` flag.
A model may also hang (accept the request and never reply). Every request is recorded with its
start and end time so tests can check ordering and overlap.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = str | Callable[[str, dict[str, Any]], str]


@dataclass
class ModelScript:
    """How one fake model answers."""

    replies: list[Reply] = field(default_factory=lambda: ["ok"])
    delay: float = 0.0
    status: int = 200
    error: str | None = None
    chunk_size: int = 8  # characters per streamed chunk
    #: Optional HTTP status per call (used in turn, the last repeating); overrides ``status``.
    statuses: list[int] | None = None
    #: When set, a streamed reply stops after this many chunks and the connection is dropped
    #: (a server that crashes mid-answer); a list gives it per call (the last repeating).
    drop_after: int | list[int | None] | None = None
    #: Accept the request and never reply (a model that hangs): the handler waits until the client
    #: goes away or the server stops.
    hang: bool = False
    #: An embedding model: ``text -> vector`` answers ``/api/embed`` (Ollama's embedding endpoint).
    embed: Callable[[str], list[float]] | None = None

    def drop_for(self, call_index: int) -> int | None:
        if isinstance(self.drop_after, list):
            return self.drop_after[min(call_index, len(self.drop_after) - 1)] if self.drop_after else None
        return self.drop_after

    def status_for(self, call_index: int) -> int:
        if self.statuses:
            return self.statuses[min(call_index, len(self.statuses) - 1)]
        return self.status

    def reply_for(self, call_index: int, prompt: str, body: dict[str, Any]) -> str:
        reply = self.replies[min(call_index, len(self.replies) - 1)]
        return reply(prompt, body) if callable(reply) else reply


@dataclass
class RecordedRequest:
    path: str
    model: str | None
    prompt: str
    body: dict[str, Any]
    start: float
    end: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


class FakeOllama:
    """Context manager running the server on a free port; ``.url`` is its base address."""

    def __init__(self, models: dict[str, ModelScript] | None = None) -> None:
        self.models: dict[str, ModelScript] = dict(models or {})
        self.requests: list[RecordedRequest] = []
        self._calls: dict[str, int] = {}
        self._lock = threading.Lock()
        self.active = 0
        self.max_active = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- life cycle -----------------------------------------------------------------------------
    def start(self) -> FakeOllama:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # small replies go out at once, not after a 40 ms delay

            def log_message(self, *args: Any) -> None:  # keep test output clean
                return

            def do_GET(self) -> None:  # http.server API
                if self.path.rstrip("/") == "/api/tags":
                    self._json(200, {"models": [fake._tag(name) for name in fake.models]})
                elif self.path in ("/", ""):
                    self._text(200, "Ollama is running")
                else:
                    self._json(404, {"error": "not found"})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._json(400, {"error": "invalid JSON"})
                    return
                path = self.path.rstrip("/")
                if path == "/api/show":
                    name = body.get("model") or body.get("name")
                    if name in fake.models:
                        self._json(200, {"modelfile": "", "parameters": "", "template": "", "details": {}})
                    else:
                        self._json(404, {"error": f"model '{name}' not found"})
                    return
                if path == "/api/embed":
                    fake._serve_embed(self, body)
                    return
                if path not in ("/api/chat", "/api/generate"):
                    self._json(404, {"error": f"unknown endpoint {path}"})
                    return
                fake._serve_completion(self, path, body)

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _text(self, status: int, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOllama:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # --- helpers ----------------------------------------------------------------------------------
    def requests_for(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    def completion_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path in ("/api/chat", "/api/generate")]

    @staticmethod
    def _tag(name: str) -> dict[str, Any]:
        return {
            "name": name,
            "model": name,
            "modified_at": "2026-01-01T00:00:00Z",
            "size": 1000,
            "digest": "0" * 64,
            "details": {"format": "gguf", "family": "fake", "parameter_size": "1B"},
        }

    @staticmethod
    def _prompt_of(path: str, body: dict[str, Any]) -> str:
        if path == "/api/generate":
            return str(body.get("prompt", ""))
        messages = body.get("messages") or []
        return "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")

    def _serve_embed(self, handler: Any, body: dict[str, Any]) -> None:
        model = body.get("model")
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        record = RecordedRequest(path="/api/embed", model=model, prompt="\n".join(map(str, texts)), body=body,
                                 start=time.monotonic(), end=time.monotonic())
        with self._lock:
            self.requests.append(record)
        script = self.models.get(model or "")
        if script is None or script.embed is None:
            handler._json(404, {"error": f"model '{model}' not found, try pulling it first"})
            return
        handler._json(200, {"model": model, "embeddings": [script.embed(str(t)) for t in texts]})

    def _serve_completion(self, handler: BaseHTTPRequestHandler, path: str, body: dict[str, Any]) -> None:
        model = body.get("model")
        prompt = self._prompt_of(path, body)
        record = RecordedRequest(path=path, model=model, prompt=prompt, body=body, start=time.monotonic(),
                                 headers={k.lower(): v for k, v in handler.headers.items()})
        with self._lock:
            self.requests.append(record)
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            index = self._calls.get(model or "", 0)
            self._calls[model or ""] = index + 1
        try:
            script = self.models.get(model or "")
            if script is None:
                handler._json(404, {"error": f"model '{model}' not found, try pulling it first"})  # type: ignore[attr-defined]
                return
            if script.hang:
                self._hang(handler)
                return
            if script.delay:
                time.sleep(script.delay)
            status = script.status_for(index)
            if status != 200:
                # "{authorization}" in a scripted error echoes the request's header back, as some
                # proxies and servers do in their error text
                error = (script.error or f"model '{model}' not found").replace(
                    "{authorization}", handler.headers.get("Authorization", ""))
                handler._json(status, {"error": error})  # type: ignore[attr-defined]
                return
            text = script.reply_for(index, prompt, body)
            stream = body.get("stream", True)
            if stream:
                self._stream(handler, path, model or "", text, script.chunk_size, script.drop_for(index))
            else:
                handler._json(200, self._chunk(path, model or "", text, done=True))  # type: ignore[attr-defined]
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (cancelled)
        finally:
            record.end = time.monotonic()
            with self._lock:
                self.active -= 1

    def _hang(self, handler: BaseHTTPRequestHandler) -> None:
        """Hold the connection open without a byte of reply until the client closes it (or stop())."""
        conn = handler.connection
        conn.settimeout(0.2)
        while self._server is not None:
            try:
                if conn.recv(1, socket.MSG_PEEK) == b"":
                    return  # the client closed the connection
            except TimeoutError:
                continue
            except OSError:
                return
            time.sleep(0.05)

    @staticmethod
    def _chunk(path: str, model: str, text: str, done: bool) -> dict[str, Any]:
        base: dict[str, Any] = {"model": model, "created_at": "2026-01-01T00:00:00Z", "done": done}
        if done:
            base.update({"done_reason": "stop", "total_duration": 1, "eval_count": len(text.split())})
        if path == "/api/generate":
            base["response"] = text
        else:
            base["message"] = {"role": "assistant", "content": text}
        return base

    def _stream(self, handler: BaseHTTPRequestHandler, path: str, model: str, text: str, size: int,
                drop_after: int | None = None) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/x-ndjson")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        pieces = [text[i : i + size] for i in range(0, len(text), size)] or [""]
        lines = [self._chunk(path, model, p, done=False) for p in pieces]
        lines.append(self._chunk(path, model, "", done=True))
        for sent, line in enumerate(lines):
            if drop_after is not None and sent >= drop_after:
                handler.close_connection = True
                handler.wfile.flush()
                handler.connection.shutdown(socket.SHUT_RDWR)  # no terminating chunk: a broken reply
                return
            data = (json.dumps(line) + "\n").encode()
            handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
