"""The app's index process: a private Chroma server over the index folder, started and stopped by the app.

Real processes throughout: ``kmds-desktop _index-process`` runs ChromaDB's own server, a CLI command
runs as a separate Python process, and "the app" that crashes is a real process killed with SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kmds_desktop.index import (
    DEFAULT_MODEL,
    SemanticIndex,
    embedding_service,
    embeddings,
    index_process,
    store,
)
from kmds_desktop.index.errors import IndexStoreError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def embedding_model():
    return embeddings.get_model(DEFAULT_MODEL)


@pytest.fixture()
def folder(tmp_path: Path):
    path = (tmp_path / "index").resolve()
    yield path
    index_process.forget(path)
    store.close_local(path)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of this process still "exists" until reaped
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            return "State:\tZ" not in f.read()
    except OSError:
        return False


def _wait(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _server_info(folder: Path) -> dict:
    return json.loads((folder / index_process.SERVER_FILE).read_text(encoding="utf-8"))


def _cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "kmds_desktop", *args],
        capture_output=True, text=True, env=env, timeout=timeout,
    )


def _python_until_killed(code: str) -> subprocess.Popen[str]:
    """Run ``code`` in another Python process, wait until it has run, and leave the process alive."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code + "print('ready', flush=True)\nimport time\ntime.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_the_app_index_runs_in_its_own_process(folder: Path, kmds_data: Path, embedding_model) -> None:
    index = SemanticIndex(folder, own_process=True)
    assert index.own_process and not index.in_process
    info = _server_info(folder)
    assert info["pid"] != os.getpid() and _pid_alive(info["pid"])
    assert Path(info["socket"]).is_socket() and "port" not in info  # ChromaDB has no TCP port
    assert str(folder) not in store._locks  # this process never opened the folder itself

    report = index.build(kmds_data / "test_kb_exp_workflow.xml")
    assert report.embedded == 30 and index.count() == 30
    hits = index.search("feature engineering", n_results=3, category="data_representation")
    assert len(hits) == 3 and all(h["category"] == "data_representation" for h in hits)

    # A CLI command run while the app is open uses the app's process, not the folder.
    done = _cli("index", str(kmds_data / "test_kb_exp_workflow.xml"), "--persist-dir", str(folder),
                "--query", "feature engineering", "--json", "-n", "3", "--category", "data_representation")
    assert done.returncode == 0, done.stderr
    assert [h["iri"] for h in json.loads(done.stdout)] == [h["iri"] for h in hits]
    assert _server_info(folder)["pid"] == info["pid"]

    # Stopped with the app: the process ends, its file goes, and the folder opens in-process.
    index_process.stop_all()
    assert _wait(lambda: not _pid_alive(info["pid"]))
    assert not (folder / index_process.SERVER_FILE).exists()
    plain = SemanticIndex(folder)
    assert plain.in_process and plain.count(report.kb_id) == 30


def test_the_index_process_embeds_and_writes_each_step(folder: Path, kmds_data: Path, embedding_model,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's build sends texts, not vectors: each step is one call in which the index process
    embeds and writes; what it stored is what this process's model gives. A model the index
    process cannot load is a ModelLoadError naming it, not a damaged index."""
    from kmds_desktop.index import ModelLoadError, entries
    from kmds_desktop.index import semantic_index as semantic_index_module
    from kmds_desktop.kb import load_kb

    monkeypatch.setattr(semantic_index_module, "BUILD_CHUNK", 12)
    index = SemanticIndex(folder, own_process=True)
    calls: list[str] = []
    real_call = type(index._client).call

    def recording_call(self, collection, method, *args, **kwargs):
        calls.append(method)
        return real_call(self, collection, method, *args, **kwargs)

    monkeypatch.setattr(type(index._client), "call", recording_call)
    monkeypatch.setattr(embedding_service, "encode_remote", _no_remote_encode)
    kb = load_kb(kmds_data / "test_kb_exp_workflow.xml")
    report = index.build_from_onto(kb)
    wanted = entries.make_entries(entries.from_knowledge_base(kb), DEFAULT_MODEL)
    steps = -(-len({e.text for e in wanted}) // 12)  # steps of 12 distinct texts
    assert report.embedded == 30 and calls.count("embed_upsert") == steps and "upsert" not in calls
    assert steps >= 2
    got = index._collection(kb.kb_id).get(ids=[wanted[0].id], include=["embeddings"])
    np.testing.assert_allclose(got["embeddings"][0], embeddings.encode([wanted[0].text])[0], atol=1e-5)

    other = SemanticIndex(folder, "no-such-model", own_process=True)
    with pytest.raises(ModelLoadError, match="no-such-model"):
        other.build_from_onto(kb)


def _no_remote_encode(*args, **kwargs):
    raise AssertionError("a build step must not fetch vectors from the index process")


def test_a_stopped_index_process_is_started_again(folder: Path, kmds_data: Path, embedding_model) -> None:
    index = SemanticIndex(folder, own_process=True)
    index.build(kmds_data / "test_kb_exp_workflow.xml")
    first = _server_info(folder)["pid"]
    os.kill(first, signal.SIGKILL)
    assert _wait(lambda: not _pid_alive(first))
    # The next call finds it gone and starts a new one; what was written is still there.
    hits = index.search("feature engineering", n_results=2)
    assert len(hits) == 2
    assert _server_info(folder)["pid"] != first and index.count() == 30


def test_the_index_process_does_not_outlive_a_crashed_app(tmp_path: Path) -> None:
    folder = tmp_path / "index"
    app = _python_until_killed(
        "from kmds_desktop.index import SemanticIndex\n"
        f"SemanticIndex({str(folder)!r}, own_process=True)\n"
    )
    try:
        child = _server_info(folder)["pid"]
        assert _pid_alive(child)
        app.kill()  # no clean-up code runs in the app
        app.wait(10)
        assert _wait(lambda: not _pid_alive(child)), "the index process outlived the app"
        assert not (folder / index_process.SERVER_FILE).exists()
    finally:
        app.kill()
        app.wait(10)


def test_a_folder_open_elsewhere_is_refused_clearly(folder: Path) -> None:
    # The folder is open in-process here (as a CLI command would have it): no second owner.
    SemanticIndex(folder)
    with pytest.raises(IndexStoreError, match="already open in this process"):
        SemanticIndex(folder, own_process=True)

    # Another program holds the folder: the index process refuses to start and says why.
    other = folder.parent / "other"
    holder = _python_until_killed(
        "from pathlib import Path\n"
        "from kmds_desktop.index.index_process import folder_lock\n"
        f"p = Path({str(other)!r}); p.mkdir(parents=True, exist_ok=True)\n"
        "lock = folder_lock(p)\n"  # kept: the lock lasts as long as the object
        "assert lock.acquire(blocking=False)\n"
    )
    try:
        with pytest.raises(IndexStoreError, match="in use by another program"):
            SemanticIndex(other, own_process=True)
    finally:
        holder.kill()
        holder.wait(10)
    # Once the other program is gone, the folder opens.
    assert SemanticIndex(other, own_process=True).count() == 0
    index_process.forget(other.resolve())


def test_a_stale_server_file_is_ignored(folder: Path) -> None:
    folder.mkdir(parents=True)
    gone = str(folder / "nothing-listens-here.sock")
    (folder / index_process.SERVER_FILE).write_text(
        json.dumps({"socket": gone, "authkey": "00" * 32, "pid": 999999, "token": "x"}), encoding="utf-8"
    )
    assert index_process.live_server(folder) is None
    index = SemanticIndex(folder, own_process=True)
    assert _server_info(folder)["socket"] != gone and index.count() == 0
