"""Index writes in short ChromaDB calls: its bindings hold the GIL for a whole call, so a long one
freezes the GUI thread while a worker indexes (bench/ui_stall.py)."""

from __future__ import annotations

import pytest

from kmds_desktop.index import DEFAULT_MODEL, SemanticIndex, embeddings
from kmds_desktop.index import semantic_index as semantic_index_module
from kmds_desktop.index.semantic_index import _SlicedWriter
from kmds_desktop.kb import load_kb


@pytest.fixture(scope="module")
def embedding_model():
    return embeddings.get_model(DEFAULT_MODEL)


def test_slow_writes_shrink_the_slices(kmds_data, embedding_model, monkeypatch: pytest.MonkeyPatch) -> None:
    from chromadb.api.models.Collection import Collection

    sizes: list[int] = []
    real_upsert = Collection.upsert

    def counting_upsert(self, *args, **kwargs):
        sizes.append(len(kwargs["ids"]))
        return real_upsert(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "upsert", counting_upsert)
    monkeypatch.setattr(semantic_index_module, "WRITE_BUDGET_S", 0.0)  # every call counts as slow
    index = SemanticIndex(None, responsive=True)
    report = index.build_from_onto(load_kb(kmds_data / "test_kb_exp_workflow.xml"))
    assert report.embedded == 30 and index.count() == 30
    assert sum(sizes) == 30 and len(sizes) >= 3  # one embedding step, several write calls
    assert sizes[0] == semantic_index_module.WRITE_SLICE_START and max(sizes) == sizes[0]
    assert index.search("missing values", n_results=3)
    index.close()


class _Recorder:
    """Stands in for a ChromaDB collection where only the calls matter, not the store."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.ids: list[str] = []

    def upsert(self, *, ids, **_kwargs) -> None:
        self.sizes.append(len(ids))
        self.ids.extend(ids)


def test_slice_size_follows_the_budget() -> None:
    writer = _SlicedWriter(_Recorder())
    budget = semantic_index_module.WRITE_BUDGET_S
    start = semantic_index_module.WRITE_SLICE_START
    writer._adapt(budget * 0.1)  # fast: double
    assert writer.size == start * 2
    writer._adapt(budget * 4)  # slow: halve
    assert writer.size == start
    writer._adapt(budget * 3.9)  # halving barely helped: the fixed cost dominates, go back up
    assert writer.size == start * 2 and writer.floor == start * 2
    writer._adapt(budget * 4)  # slow again, but never below the floor
    assert writer.size == start * 2


def test_every_entry_is_written_once_in_order() -> None:
    recorder = _Recorder()
    writer = _SlicedWriter(recorder)
    part = [semantic_index_module.entries.Entry(f"id{i}", f"text {i}", {"n": i}) for i in range(100)]
    writer(part, [[0.0]] * 100)
    assert recorder.ids == [e.id for e in part]
    assert all(0 < s <= semantic_index_module.WRITE_SLICE_MAX for s in recorder.sizes)


def test_without_a_gui_steps_are_written_in_large_calls(kmds_data, embedding_model,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI has no GUI thread to protect: embedded steps are written STORE_BATCH at a time
    (each ChromaDB call has a fixed cost), the rest at the end; no document text is handed to
    ChromaDB (its full-text index of documents is a large part of a write's cost)."""
    from chromadb.api.models.Collection import Collection

    sizes: list[int] = []
    real_upsert = Collection.upsert

    def counting_upsert(self, *args, **kwargs):
        sizes.append(len(kwargs["ids"]))
        assert kwargs.get("documents") is None
        return real_upsert(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "upsert", counting_upsert)
    monkeypatch.setattr(semantic_index_module, "BUILD_CHUNK", 12)
    monkeypatch.setattr(semantic_index_module, "STORE_BATCH", 24)
    index = SemanticIndex(None)
    assert not index.responsive
    kb = load_kb(kmds_data / "test_kb_exp_workflow.xml")
    report = index.build_from_onto(kb)
    assert report.embedded == 30 and sizes == [24, 6] and index.count() == 30
    hit = index.search(kb.observations[0].finding, n_results=1)[0]
    assert hit["finding"] == kb.observations[0].finding.strip() and hit["distance"] < 1e-4
    assert kb.observation(hit["iri"]).finding.strip() == hit["finding"]  # the text comes back
    index.close()
