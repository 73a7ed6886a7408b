"""The app's index process admits only this user's app: no TCP port, a 0700 socket folder, a key.

Real processes: the index process is started as the app starts it, requests come from this test
process (with and without the key, as plain HTTP bytes) and, when the tests run as root (as CI
does), from a second OS user.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kmds_desktop.index import DEFAULT_MODEL, SemanticIndex, embeddings, index_process, store
from kmds_desktop.index.errors import IndexProcessStopped
from kmds_desktop.index.private_channel import RemoteClient

NOBODY = 65534


@pytest.fixture(scope="module")
def embedding_model():
    return embeddings.get_model(DEFAULT_MODEL)


@pytest.fixture()
def served(tmp_path: Path, kmds_data: Path, embedding_model):
    folder = (tmp_path / "index").resolve()
    index = SemanticIndex(folder, own_process=True)
    index.build(kmds_data / "test_kb_exp_workflow.xml")
    info = json.loads((folder / index_process.SERVER_FILE).read_text(encoding="utf-8"))
    yield folder, info, index
    index_process.forget(folder)
    store.close_local(folder)


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _inet_ports(inodes: set[str]) -> set[int]:
    """Local ports of the TCP/UDP sockets among ``inodes``."""
    ports = set()
    for table in ("tcp", "tcp6", "udp", "udp6"):
        path = Path("/proc/net") / table
        if path.exists():
            for line in path.read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 9 and fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_the_index_is_on_no_network_port_and_the_embedding_port_wants_its_token(served) -> None:
    folder, info, index = served
    assert index.count() == 30  # it serves
    mine = _socket_inodes(info["pid"])
    assert mine, "the index process has its Unix socket open"
    # The one TCP port is the embedding service's; ChromaDB itself has none.
    assert _inet_ports(mine) <= {info["embed_port"]}
    for path in ("/embed", "/api/v2/heartbeat", "/api/v2/tenants/default_tenant/databases/default_database/"
                 "collections"):
        body = b'{"texts": ["x"], "model": "all-MiniLM-L6-v2"}'
        url = f"http://127.0.0.1:{info['embed_port']}{path}"
        request = urllib.request.Request(url, data=body, method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code in (403, 404)
        answer = refused.value.read()
        assert b"kmds-" not in answer and b"finding" not in answer


def test_socket_folder_and_key_file_are_private(served) -> None:
    folder, info, _ = served
    sock = Path(info["socket"])
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700 and sock.parent.stat().st_uid == os.getuid()
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert stat.S_IMODE((folder / index_process.SERVER_FILE).stat().st_mode) == 0o600
    assert len(bytes.fromhex(info["authkey"])) == 32


def test_a_client_without_the_key_gets_nothing(served) -> None:
    _, info, index = served
    for key in (b"", b"wrong key", bytes(32)):
        with pytest.raises(IndexProcessStopped):
            RemoteClient(info["socket"], key or b"x").list_collections()
    # A plain HTTP request, as to ChromaDB's server, gets no collection and no finding.
    with socket.socket(socket.AF_UNIX) as raw:
        raw.settimeout(30)  # guards against a hang only
        raw.connect(info["socket"])
        raw.sendall(b"GET /api/v2/tenants/default_tenant/databases/default_database/collections HTTP/1.1\r\n"
                    b"Host: localhost\r\n\r\n")
        received = b""
        try:
            while chunk := raw.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass  # the process hung up on it: refused
    assert b"kmds-" not in received and b"HTTP/1.1 200" not in received and len(received) < 200
    # The app's own client still works.
    assert index.count() == 30
    authed = RemoteClient(info["socket"], bytes.fromhex(info["authkey"]))
    assert [c.name for c in authed.list_collections()] and authed.heartbeat() > 0
    authed.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as a second OS user")
def test_another_os_user_cannot_connect(served) -> None:
    _, info, _ = served
    code = f"""
import os, socket, sys
os.setgroups([]); os.setgid({NOBODY}); os.setuid({NOBODY})
s = socket.socket(socket.AF_UNIX)
try:
    s.connect({info["socket"]!r})
except PermissionError:
    print("refused")
    sys.exit(0)
print("CONNECTED")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "refused", out.stdout + out.stderr


def test_a_killed_index_process_leaves_no_socket_folder_after_the_restart(served) -> None:
    import signal
    import time

    folder, info, index = served
    old = Path(info["socket"]).parent
    os.kill(info["pid"], signal.SIGKILL)
    for _ in range(200):  # until reaped (the event waited on; the loop only bounds it)
        try:
            with open(f"/proc/{info['pid']}/status", encoding="ascii") as f:
                if "State:\tZ" in f.read():
                    break
        except OSError:
            break
        time.sleep(0.05)
    assert old.exists()  # a SIGKILL gives the process no chance to clean up
    assert index.count() == 30  # the next call starts a new process
    new = json.loads((folder / index_process.SERVER_FILE).read_text(encoding="utf-8"))
    assert new["pid"] != info["pid"] and not old.exists()


def test_a_folder_other_users_can_write_is_refused_and_a_server_file_not_ours_is_ignored(tmp_path) -> None:
    """The server file's key is trusted and its process answers in pickles: in a folder others can
    write, another user could plant one. Such a folder is refused with what to do, and a server file
    that others could have written is never read."""
    shared = tmp_path / "shared-index"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(store.IndexStoreError, match="other users can write in it"):
        store._usable_folder(shared)
    own = tmp_path / "own-index"
    own.mkdir(mode=0o700)
    planted = own / index_process.SERVER_FILE
    planted.write_text(json.dumps({"socket": str(own / "s"), "authkey": "00", "pid": os.getpid()}))
    planted.chmod(0o600)
    assert index_process._read_server_file(own) is not None  # the user's own file is read
    planted.chmod(0o666)
    assert index_process._read_server_file(own) is None
