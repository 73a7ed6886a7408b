"""Bad input and faults of the semantic index: each gives a clear error, never a hang or data loss."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kmds_desktop.index import (
    DEFAULT_MODEL,
    ChromaServerUnreachable,
    IndexCorruptedError,
    IndexStoreError,
    InvalidQueryError,
    ModelLoadError,
    SemanticIndex,
    SemanticIndexError,
    embeddings,
    store,
)
from kmds_desktop.index.factory import rebuild_index


@pytest.fixture(scope="session")
def embedding_model():
    return embeddings.get_model(DEFAULT_MODEL)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_empty_query_is_a_value_error(query: str, embedding_model) -> None:
    index = SemanticIndex(None)
    with pytest.raises(ValueError, match="question is empty"):
        index.search(query)


@pytest.mark.parametrize("n", [0, -1])
def test_n_results_below_one(n: int, embedding_model) -> None:
    with pytest.raises(InvalidQueryError, match="n_results"):
        SemanticIndex(None).search("data quality", n_results=n)


def test_model_that_cannot_load_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Even without HF_HUB_OFFLINE in the environment, an unknown name fails at once, naming it."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    attempts: list[object] = []
    real_connect = socket.socket.connect

    def guarded_connect(self: socket.socket, address: object) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in ("127.0.0.1", "::1"):  # type: ignore[index]
            attempts.append(address)
            raise OSError("network disabled in this test")
        real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    started = time.monotonic()
    index = SemanticIndex(None, model_name="kmds-test-org/no-such-model")
    with pytest.raises(ModelLoadError, match="kmds-test-org/no-such-model") as info:
        index.search("anything")
    assert time.monotonic() - started < 30
    assert "never downloaded" in str(info.value)
    assert attempts == []
    assert os.environ.get("HF_HUB_OFFLINE") is None  # restored after loading

    with pytest.raises(ModelLoadError, match="does not exist"):
        embeddings.get_model("./no/such/model/folder")


def test_no_network_on_a_fresh_process(kmds_data: Path, tmp_path: Path) -> None:
    """Load the default model, build and search with every non-loopback connection refused."""
    code = f"""
import socket, sys
attempts = []
real_connect = socket.socket.connect
real_getaddrinfo = socket.getaddrinfo
def connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in ("127.0.0.1", "::1"):
        attempts.append(address)
        raise OSError("network disabled")
    return real_connect(self, address)
def getaddrinfo(host, *args, **kwargs):
    if host not in (None, "localhost", "127.0.0.1", "::1"):
        attempts.append(host)
        raise socket.gaierror("network disabled")
    return real_getaddrinfo(host, *args, **kwargs)
socket.socket.connect = connect
socket.getaddrinfo = getaddrinfo
from kmds_desktop.index import SemanticIndex
index = SemanticIndex({str(tmp_path / "idx")!r})
index.build({str(kmds_data / "test_kb_exp_workflow.xml")!r})
hits = index.search("feature engineering")
assert len(hits) == 5, hits
print("attempts:", attempts)
"""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "attempts: []"


def test_persist_dir_that_cannot_be_created(tmp_path: Path) -> None:
    """A path below a regular file cannot become a folder, even for root."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(IndexStoreError, match="a-file") as info:
        SemanticIndex(blocker / "index")
    assert "writable folder" in str(info.value)
    with pytest.raises(IndexStoreError):
        SemanticIndex(blocker)  # the path itself is a file
    assert blocker.read_text() == "not a folder"


def test_corrupted_store_and_rebuild(tmp_path: Path, kmds_data: Path, embedding_model) -> None:
    kb_file = kmds_data / "example_analytics_kb_app_workflow.xml"
    kb_digest = hashlib.sha256(kb_file.read_bytes()).hexdigest()
    persist = tmp_path / "idx"
    SemanticIndex(persist).build(kb_file)
    store.close_local(persist)  # as in a new process: nothing cached
    (persist / "chroma.sqlite3").write_bytes(b"this is not a database" * 500)

    with pytest.raises(IndexCorruptedError, match="--rebuild") as info:
        SemanticIndex(persist)
    assert str(persist) in str(info.value)

    report, moved = rebuild_index(kb_file, persist_dir=persist)
    assert moved is not None and moved.is_dir() and moved.name.startswith("idx.broken-")
    assert (moved / "chroma.sqlite3").read_bytes().startswith(b"this is not a database")
    assert report.embedded == 10
    index = SemanticIndex(persist)
    assert index.count() == 10 and index.search("ticket resolution time")
    assert hashlib.sha256(kb_file.read_bytes()).hexdigest() == kb_digest


def test_rebuild_of_a_healthy_store_keeps_other_kbs(tmp_path: Path, kmds_data: Path, embedding_model) -> None:
    persist = tmp_path / "idx"
    index = SemanticIndex(persist)
    index.build(kmds_data / "example_analytics_kb_app_workflow.xml")
    index.build(kmds_data / "example_ml_kb_exp_workflow.xml")
    report, moved = rebuild_index(kmds_data / "example_ml_kb_exp_workflow.xml", persist_dir=persist)
    assert moved is None and report.embedded == report.total == 9
    assert index.count(kb_id="*") == 19


def test_unreachable_chroma_server_fails_fast() -> None:
    port = _free_port()
    started = time.monotonic()
    with pytest.raises(ChromaServerUnreachable, match=f"127.0.0.1:{port}") as info:
        SemanticIndex(chroma_host="127.0.0.1", chroma_port=port)
    assert time.monotonic() - started < 5
    assert "index.mode" in str(info.value)


def test_unreadable_kb_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.xml"
    bad.write_text("<rdf:RDF this is not xml")
    index = SemanticIndex(None)
    with pytest.raises(SemanticIndexError, match="broken.xml"):
        index.build(bad)
    with pytest.raises(SemanticIndexError, match="does not exist"):
        index.build(tmp_path / "missing.xml")
    assert bad.read_text() == "<rdf:RDF this is not xml"


# --- a damaged or displaced store: one-line reason, and --rebuild keeps the damaged copy aside --------
def _index_cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    repo = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "KMDS_DESKTOP_HOME": str(home), "PYTHONPATH": repo}
    return subprocess.run([sys.executable, "-m", "kmds_desktop", "index", *args, "--quiet"],
                          capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.parametrize("where", ["default", "persist-dir"])
def test_index_path_that_is_a_file(tmp_path: Path, kmds_data: Path, where: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    blocker = home / "index" if where == "default" else tmp_path / "idx"
    blocker.write_text("not an index")
    kb_file = str(kmds_data / "example_analytics_kb_app_workflow.xml")
    extra = [] if where == "default" else ["--persist-dir", str(blocker)]

    failed = _index_cli(kb_file, *extra, home=home)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert failed.stderr.strip().splitlines() == [
        f"error: the index path {blocker} is not a folder (a file is in its place); move it away, or rebuild "
        f"it with `kmds-desktop index KB_FILE --rebuild` (the damaged index at {blocker} is moved aside, "
        "never deleted; your KB files are not touched)"]

    rebuilt = _index_cli(kb_file, *extra, "--rebuild", home=home)
    assert rebuilt.returncode == 0, rebuilt.stderr
    [kept] = list(blocker.parent.glob(f"{blocker.name}.broken-*"))
    assert kept.read_text() == "not an index" and blocker.is_dir()
    assert "10 entries" in rebuilt.stdout


def _two_kb_store(persist: Path, kmds_data: Path) -> None:
    index = SemanticIndex(persist)
    index.build(kmds_data / "example_analytics_kb_app_workflow.xml")
    index.build(kmds_data / "example_ml_kb_exp_workflow.xml")
    assert index.count(kb_id="*") == 19
    store.close_local(persist)


@pytest.mark.parametrize("damage", ["zero-length", "deleted"])
def test_empty_or_missing_database_is_damage_not_a_new_index(tmp_path: Path, kmds_data: Path, damage: str,
                                                             embedding_model) -> None:
    persist = tmp_path / "idx"
    _two_kb_store(persist, kmds_data)
    db = persist / "chroma.sqlite3"
    if damage == "zero-length":
        db.write_bytes(b"")
    else:
        db.unlink()
    segments = sorted(p.name for p in persist.iterdir() if p.is_dir())
    assert segments  # the vectors of both KBs are still there

    with pytest.raises(IndexCorruptedError, match="--rebuild") as info:
        SemanticIndex(persist)
    reason = str(info.value)
    expected = "is empty (0 bytes)" if damage == "zero-length" else "is missing while 2 vector segment"
    assert expected in reason
    assert "\n" not in reason
    assert sorted(p.name for p in persist.iterdir() if p.is_dir()) == segments  # nothing touched

    report, moved = rebuild_index(kmds_data / "example_ml_kb_exp_workflow.xml", persist_dir=persist)
    assert moved is not None and moved.name.startswith("idx.broken-")
    assert sorted(p.name for p in moved.iterdir() if p.is_dir()) == segments  # the damaged copy is kept
    assert report.embedded == 9 and SemanticIndex(persist).count(kb_id="*") == 9


def test_rebuild_after_vector_file_damage_keeps_the_damaged_copy(tmp_path: Path, kmds_data: Path,
                                                                 embedding_model) -> None:
    persist = tmp_path / "idx"
    _two_kb_store(persist, kmds_data)
    # A third collection whose HNSW files are on disk (a large KB's are; small ones stay in the log).
    client = store.local_client(persist)
    big = client.get_or_create_collection(
        "kmds-other-model-00000000-big", embedding_function=None,
        configuration={"hnsw": {"space": "cosine", "sync_threshold": 2, "batch_size": 2}})
    big.add(ids=[f"v{i}" for i in range(20)], embeddings=[[float(i), 1.0, 0.5] for i in range(20)])
    store.close_local(persist)
    headers = list(persist.glob("*/index_metadata.pickle"))
    assert len(headers) == 1
    (headers[0].parent / "header.bin").write_bytes(b"\xff" * 100)  # damaged vector index

    report, moved = rebuild_index(kmds_data / "example_ml_kb_exp_workflow.xml", persist_dir=persist)
    assert moved is not None and moved.name.startswith("idx.broken-")
    assert (moved / headers[0].parent.name / "header.bin").read_bytes() == b"\xff" * 100
    assert report.embedded == 9
    index = SemanticIndex(persist)
    assert index.count(kb_id="*") == 9 and index.search("feature engineering")


_INTERRUPTED_WRITER = """
import os, signal, sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("PRAGMA cache_size=1")  # the changed pages spill into the file: the journal is needed
con.execute("BEGIN IMMEDIATE")
con.execute("UPDATE embeddings SET seq_id = seq_id")
con.execute("UPDATE embedding_metadata SET string_value = string_value")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_hot_journal_is_recovered_not_reported_as_damage(tmp_path: Path, kmds_data: Path,
                                                           embedding_model) -> None:
    """A write killed half-way (a crash, a full disk) leaves ChromaDB's database with a hot rollback
    journal; a read-only look cannot roll it back ("attempt to write a readonly database") and the
    index was called damaged. Opened read-write under the folder's lock, it is recovered: every entry
    is there and searchable, and the journal is gone."""
    persist = tmp_path / "idx"
    _two_kb_store(persist, kmds_data)
    db = persist / "chroma.sqlite3"
    killed = subprocess.run([sys.executable, "-c", _INTERRUPTED_WRITER, str(db)], capture_output=True)
    assert killed.returncode == -9, killed.stderr
    journal = persist / "chroma.sqlite3-journal"
    assert journal.stat().st_size > 0  # hot: SQLite must roll it back before anyone reads
    import sqlite3

    with pytest.raises(sqlite3.OperationalError, match="readonly"):  # what the read-only check met
        sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute("SELECT count(*) FROM sqlite_master")

    index = SemanticIndex(persist)
    assert index.count(kb_id="*") == 19
    assert index.search("feature engineering")
    assert not journal.exists()


def test_a_journal_that_hides_real_damage_is_still_damage(tmp_path: Path, kmds_data: Path,
                                                          embedding_model) -> None:
    """Recovery is no licence: a database that is garbage under its journal is still reported, with
    the rebuild to run."""
    persist = tmp_path / "idx"
    _two_kb_store(persist, kmds_data)
    db = persist / "chroma.sqlite3"
    db.write_bytes(b"\x00garbage, not SQLite" * 200)
    (persist / "chroma.sqlite3-journal").write_bytes(b"\x00" * 512)
    with pytest.raises(IndexCorruptedError, match="--rebuild"):
        SemanticIndex(persist)
