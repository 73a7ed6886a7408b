"""A real Chroma server for tests: ``chroma run`` from the project's environment on 127.0.0.1.

The index's server mode talks to it through ``chromadb.HttpClient`` exactly as it would to a
shared server; the process is stopped (by its own pid) when the fixture ends.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def chroma_executable() -> Path:
    exe = Path(sys.executable).with_name("chroma")
    assert exe.exists(), f"the `chroma` command of the chromadb package is missing: {exe}"
    return exe


@dataclass
class ChromaServer:
    host: str
    port: int
    path: Path
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def start_chroma(path: Path, timeout: float = 60.0) -> ChromaServer:
    """Start ``chroma run`` and wait until its heartbeat answers (fails loudly otherwise)."""
    port = free_port()
    env = dict(os.environ, ANONYMIZED_TELEMETRY="False")
    log = open(path.parent / f"chroma-{port}.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [str(chroma_executable()), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chroma run exited with {proc.returncode}; see {log.name}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1) as resp:
                if resp.status == 200:
                    return ChromaServer("127.0.0.1", port, path, proc)
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"chroma run did not answer on port {port} within {timeout} s; see {log.name}")


def stop_chroma(server: ChromaServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=10)


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    """A running Chroma server with an empty store, shared by one test module."""
    base = tmp_path_factory.mktemp("chroma-server")
    server = start_chroma(base / "store")
    try:
        yield server
    finally:
        stop_chroma(server)
