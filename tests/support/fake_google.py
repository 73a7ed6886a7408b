"""A real HTTP server on 127.0.0.1 that speaks enough of the Gemini API for the ``google-genai`` client.

Point the real client at it with ``http_options=HttpOptions(base_url=fake.url)``. Serves
``POST /{version}/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse``. Scripted:
``replies`` (used in turn, the last repeating), ``api_key`` (any other key gets the real API's
``API_KEY_INVALID`` error), ``status``/``error_status`` to force an error (e.g. 429
``RESOURCE_EXHAUSTED``), ``delay``. Every request is recorded (path, API key header, JSON body).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_PATH = re.compile(r"^/[^/]+/models/(?P<model>[^:/]+):(?P<method>generateContent|streamGenerateContent)$")


@dataclass
class GoogleRequest:
    path: str
    model: str
    api_key: str | None
    body: dict[str, Any]

    @property
    def prompt(self) -> str:
        parts = [p.get("text", "") for c in self.body.get("contents", []) for p in c.get("parts", [])]
        return "\n".join(parts)


class FakeGoogle:
    """Context manager running the fake Gemini endpoint on a free port; ``.url`` is its base address."""

    def __init__(self, replies: list[str] | None = None, *, api_key: str = "test-key", status: int = 200,
                 error_status: str | None = None, error_message: str | None = None,
                 delay: float = 0.0, models: list[str] | None = None) -> None:
        self.replies = list(replies or ["ok"])
        self.api_key = api_key
        self.status = status
        self.error_status = error_status
        self.error_message = error_message
        self.delay = delay
        #: When given, the only models that exist: others answer 404, and ``GET .../models`` lists these.
        self.models = models
        self.requests: list[GoogleRequest] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> FakeGoogle:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:  # http.server API
                # the client gave up (timeout, cancel): nothing to answer
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._serve()

            def do_GET(self) -> None:  # http.server API: the model list
                path = self.path.partition("?")[0]
                if not re.match(r"^/[^/]+/models/?$", path):
                    self._json(404, _error(404, "NOT_FOUND", f"unknown path {path}"))
                    return
                names = fake.models if fake.models is not None else ["gemini-2.5-flash"]
                listed = [{"name": f"models/{n}", "supportedGenerationMethods": ["generateContent"]}
                          for n in names]
                # A model that cannot write text: the app must not offer it.
                listed.append({"name": "models/text-embedding-004",
                               "supportedGenerationMethods": ["embedContent"]})
                self._json(200, {"models": listed})

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                path, _, query = self.path.partition("?")
                match = _PATH.match(path)
                if match is None:
                    self._json(404, _error(404, "NOT_FOUND", f"unknown path {path}"))
                    return
                body = json.loads(raw or b"{}")
                key = self.headers.get("x-goog-api-key")
                if key is None and "key=" in query:
                    key = query.split("key=", 1)[1].split("&", 1)[0]
                with fake._lock:
                    index = len(fake.requests)
                    fake.requests.append(GoogleRequest(path, match["model"], key, body))
                if fake.delay:
                    time.sleep(fake.delay)
                if key != fake.api_key:
                    self._json(400, _error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid "
                                           "API key.", reason="API_KEY_INVALID"))
                    return
                if fake.models is not None and match["model"] not in fake.models:
                    self._json(404, _error(404, "NOT_FOUND", f"models/{match['model']} is not found for "
                                           "API version v1beta, or is not supported for generateContent."))
                    return
                if fake.status != 200:
                    self._json(fake.status, _error(fake.status, fake.error_status or "INTERNAL",
                                                   fake.error_message or "scripted failure"))
                    return
                text = fake.replies[min(index, len(fake.replies) - 1)]
                if match["method"] == "streamGenerateContent":
                    self._sse(match["model"], text)
                else:
                    self._json(200, _response(match["model"], text))

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, model: str, text: str) -> None:
                pieces = [text[i : i + 8] for i in range(0, len(text), 8)] or [""]
                data = b"".join(
                    f"data: {json.dumps(_response(model, p, final=i == len(pieces) - 1))}\r\n\r\n".encode()
                    for i, p in enumerate(pieces)
                )
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGoogle:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"


def _response(model: str, text: str, final: bool = True) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if final:
        candidate["finishReason"] = "STOP"
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 3, "totalTokenCount": 6},
        "modelVersion": model,
    }


def _error(code: int, status: str, message: str, reason: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if reason:
        error["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
                             "domain": "googleapis.com"}]
    return {"error": error}
