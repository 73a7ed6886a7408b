"""A real HTTP server on 127.0.0.1 speaking enough of the OpenAI chat API for the backend's tests.

Scripted per model like :mod:`support.fake_ollama`: replies in turn, an HTTP status, a schema
refusal (``refuse_schema``: 400 for a request with ``response_format``, as a server without
grammar support answers), a stream dropped after some chunks, or a hang. Requests are recorded.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class OpenAIScript:
    """How one fake model answers."""

    replies: list[str] = field(default_factory=lambda: ["ok"])
    status: int = 200
    error: str = ""
    chunk_size: int = 6
    refuse_schema: bool = False
    #: Take only llama-cpp-python's ``{"type": "json_object", "schema": ...}`` (422 for ``json_schema``).
    json_object_only: bool = False
    drop_after: int | None = None
    hang: bool = False
    #: Refuse fields of llama.cpp's own (``cache_prompt``) with 400, as OpenAI's hosted API does.
    strict_fields: bool = False
    #: Seconds before each reply, in turn (the last repeats): a server reading a long prompt.
    delays: list[float] = field(default_factory=list)
    calls: int = 0

    def next_reply(self) -> str:
        reply = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        return reply


class FakeOpenAI:
    """``with FakeOpenAI() as fake: fake.models["m"] = OpenAIScript([...])``; ``fake.url`` is the API root."""

    def __init__(self, api_key: str | None = None) -> None:
        self.models: dict[str, OpenAIScript] = {}
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.api_key = api_key
        self.stopping = threading.Event()
        fake = self

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

            def _authorised(self) -> bool:
                fake.headers.append(dict(self.headers))
                if fake.api_key and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                    self._json(401, {"error": {"message": f"Incorrect API key provided: "
                                                          f"{self.headers.get('Authorization')}"}})
                    return False
                return True

            def do_GET(self) -> None:
                if not self._authorised():
                    return
                if self.path == "/v1/models":
                    self._json(200, {"object": "list", "data": [{"id": m, "object": "model"}
                                                                for m in fake.models]})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self._authorised():
                    return
                fake.requests.append(body)
                script = fake.models.get(body.get("model"))
                if script is None:
                    self._json(404, {"error": {"message": f"The model `{body.get('model')}` does not exist",
                                               "code": "model_not_found"}})
                    return
                if script.status != 200:
                    self._json(script.status, {"error": {"message": script.error or "failed"}})
                    return
                if script.strict_fields and "cache_prompt" in body:
                    self._json(400, {"error": {"message": "Unrecognized request argument supplied: "
                                                          "cache_prompt"}})
                    return
                if script.refuse_schema and "response_format" in body:
                    self._json(400, {"error": {"message": "response_format json_schema is not supported"}})
                    return
                asked = (body.get("response_format") or {}).get("type")
                if script.json_object_only and asked == "json_schema":
                    self._json(422, {"detail": [{"msg": "Input should be 'text' or 'json_object'"}]})
                    return
                if script.hang:
                    while not fake.stopping.wait(0.05):
                        pass
                    return
                if script.delays:
                    time.sleep(script.delays[min(script.calls, len(script.delays) - 1)])
                reply = script.next_reply()
                if not body.get("stream"):
                    self._json(200, {"choices": [{"index": 0, "message": {"role": "assistant",
                                                                          "content": reply}}]})
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                pieces = [reply[i:i + script.chunk_size] for i in range(0, len(reply), script.chunk_size)]
                for n, piece in enumerate(pieces):
                    if script.drop_after is not None and n >= script.drop_after:
                        self.wfile.flush()
                        self.connection.shutdown(2)
                        return
                    event = {"choices": [{"index": 0, "delta": {"content": piece}}]}
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(0.002)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
