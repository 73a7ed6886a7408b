"""The stored hashes' manifest: an update reads it instead of every entry's metadata, and a
manifest that does not match the store (changed behind its back, garbage, a build stopped
half-way) is never trusted."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kmds_desktop.index import DEFAULT_MODEL, SemanticIndex, embeddings, hash_manifest, store
from kmds_desktop.index import semantic_index as semantic_index_module
from kmds_desktop.kb import load_kb
from kmds_desktop.tasks import Cancelled, CancelToken


@pytest.fixture(scope="module")
def embedding_model():
    return embeddings.get_model(DEFAULT_MODEL)


@pytest.fixture()
def exp_kb(kmds_data: Path):
    return load_kb(kmds_data / "test_kb_exp_workflow.xml")


def _manifest(index: SemanticIndex) -> hash_manifest.HashManifest:
    assert index.kb_id is not None and index.persist_dir is not None
    return hash_manifest.HashManifest(index.persist_dir,
                                      store.collection_name(index._prefix, index.kb_id))


def _count_store_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    reads: list[int] = []
    real = SemanticIndex._stored_hashes

    def counting(self, collection):
        reads.append(1)
        return real(self, collection)

    monkeypatch.setattr(SemanticIndex, "_stored_hashes", counting)
    return reads


def test_a_build_writes_a_private_manifest_that_the_next_update_uses(
    tmp_path: Path, exp_kb, embedding_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = SemanticIndex(tmp_path / "idx")
    index.build_from_onto(exp_kb)
    manifest = _manifest(index)
    assert manifest.path.exists()
    assert stat.S_IMODE(os.stat(manifest.folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(manifest.path).st_mode) == 0o600
    recorded = manifest.read()
    assert recorded is not None and len(recorded) == 30

    reads = _count_store_reads(monkeypatch)
    obs = exp_kb.observations
    exp_kb.update_observation(obs[0].iri, finding="Tickets reopened twice take three times longer")
    exp_kb.update_observation(obs[1].iri, finding_seq=77)
    exp_kb.delete_observation(obs[2].iri)
    again = SemanticIndex(tmp_path / "idx")  # as after a restart
    report = again.build_from_onto(exp_kb)
    assert (report.embedded, report.metadata_updated, report.deleted, report.unchanged) == (1, 1, 1, 27)
    assert reads == []  # the manifest answered, no full read of the store
    assert again.build_from_onto(exp_kb).unchanged == 29 and reads == []
    hits = {h["iri"]: h for h in again.search("tickets reopened", n_results=40)}
    assert hits[obs[1].iri]["finding_seq"] == 77 and obs[2].iri not in hits


def test_a_store_changed_behind_the_manifest_is_read_again(
    tmp_path: Path, exp_kb, embedding_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = SemanticIndex(tmp_path / "idx")
    index.build_from_onto(exp_kb)
    manifest = _manifest(index)
    recorded = manifest.read()
    assert recorded is not None
    victim = sorted(recorded)[0]
    content, meta, keys = recorded[victim]
    manifest.write({**recorded, victim: ("0" * len(content), meta, keys)})  # a wrong hash
    reads = _count_store_reads(monkeypatch)
    assert index.build_from_onto(exp_kb).embedded == 0 and reads == [1]

    collection = index._collection(index.kb_id)
    collection.delete(ids=[victim])  # an entry gone behind the manifest's back
    report = index.build_from_onto(exp_kb)
    assert report.embedded == 1 and reads == [1, 1] and index.count() == 30

    manifest.path.write_bytes(b"\x00garbage{")
    assert index.build_from_onto(exp_kb).unchanged == 30 and reads == [1, 1, 1]
    assert manifest.read() is not None  # rewritten from the store


def test_a_cancelled_build_leaves_no_manifest(
    tmp_path: Path, exp_kb, embedding_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = SemanticIndex(tmp_path / "idx")
    index.build_from_onto(exp_kb)
    manifest = _manifest(index)
    assert manifest.path.exists()
    for i, obs in enumerate(exp_kb.observations[:20]):
        exp_kb.update_observation(obs.iri, finding=f"{obs.finding} (revised {i})")
    monkeypatch.setattr(semantic_index_module, "BUILD_CHUNK", 4)
    token = CancelToken()

    def progress(done: int, total: int | None, message: str) -> None:
        if total and done >= 4:
            token.cancel()

    with pytest.raises(Cancelled):
        index.build_from_onto(exp_kb, progress=progress, cancel=token)
    assert not manifest.path.exists()
    report = index.build_from_onto(exp_kb)
    assert 0 < report.embedded < 20 and report.embedded + report.unchanged == 30
    assert manifest.read() is not None


def test_clearing_a_kb_removes_its_manifest(tmp_path: Path, exp_kb, embedding_model) -> None:
    index = SemanticIndex(tmp_path / "idx")
    index.build_from_onto(exp_kb)
    manifest = _manifest(index)
    index.clear()
    assert not manifest.path.exists()
    assert index.build_from_onto(exp_kb).embedded == 30


def test_an_oversized_manifest_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = hash_manifest.HashManifest(tmp_path, "c")
    manifest.write({"a": ("1" * 40, "2" * 40, frozenset({"k"}))})
    assert manifest.read() == {"a": ("1" * 40, "2" * 40, frozenset({"k"}))}
    monkeypatch.setattr(hash_manifest, "MAX_BYTES", 10)
    assert manifest.read() is None


def test_a_manifest_of_many_lines_reads_back_and_a_cut_one_is_refused(tmp_path: Path) -> None:
    manifest = hash_manifest.HashManifest(tmp_path, "c")
    hashes = {f"kb:obs:{i}": (f"{i:040d}", f"{i + 1:040d}", frozenset({"a", "b"} if i % 2 else {"a"}))
              for i in range(hash_manifest.LINE_ENTRIES * 2 + 7)}
    manifest.write(hashes)
    lines = manifest.path.read_bytes().splitlines()
    assert len(lines) == 1 + 3  # a header, then entries a line at most LINE_ENTRIES each
    assert manifest.read() == hashes
    manifest.path.write_bytes(b"\n".join(lines[:-1]) + b"\n")  # the last line lost
    assert manifest.read() is None


@pytest.mark.parametrize("damage", [b'{"a": ["11", 1e400]}',
                                    b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"])
def test_a_damaged_manifest_line_is_no_manifest(tmp_path: Path, damage: bytes) -> None:
    """A key-set index of 1e400 (OverflowError) or nesting the decoder cannot take (RecursionError)
    escaped as a raw error from the update; a damaged manifest is read as none, and the store is read."""
    manifest = hash_manifest.HashManifest(tmp_path, "c")
    manifest.write({"a": ("1" * 40, "2" * 40, frozenset({"k"}))})
    header = manifest.path.read_bytes().splitlines()[0]
    manifest.path.write_bytes(header + b"\n" + damage + b"\n")
    assert manifest.read() is None
