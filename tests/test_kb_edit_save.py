"""Editing and saving: dirty flag, KMDS-readable output, lossless round trips, atomic saves."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from kmds_desktop.kb import KnowledgeBase, KnowledgeBaseError, load_kb, new_kb, save_kb

KMDS = "http://test.org/kmds/kmds.owl#"


def _content(kb: KnowledgeBase) -> tuple[list, list]:
    """Everything a user sees; file_order is only a tie-breaker and may differ after a rewrite."""
    return kb.workflows, [replace(o, file_order=0) for o in kb.observations]


@pytest.mark.parametrize(
    "name",
    [
        "test_kb_exp_workflow.xml",
        "example_analytics_kb_app_workflow.xml",
        "repo_0.2.16_test_kb_exp_workflow.xml",
        "history_2024_example_ml_kb_exp_workflow.xml",
        "generated_by_kmds/noseq.xml",
        "generated_by_kmds/synth_250.xml",
        "schema_only_kmds_ontology_0.4.2.xml",
    ],
)
def test_load_save_load_gives_equal_content(kmds_data: Path, tmp_path: Path, name: str) -> None:
    original = load_kb(kmds_data / name)
    out = save_kb(original, tmp_path / "copy.xml")
    again = load_kb(out)
    assert _content(again) == _content(load_kb(kmds_data / name))
    # and a second generation is stable too
    third = load_kb(save_kb(again, tmp_path / "copy2.xml"))
    assert _content(third) == _content(again)


def _read_like_kmds(path: Path) -> dict[str, list[tuple[str, str, int | None]]]:
    """Read a file the way KMDS does: owlready2 classes and properties looked up by name."""
    from owlready2 import World

    world = World()
    try:
        onto = world.get_ontology(path.as_uri()).load()
        out: dict[str, list[tuple[str, str, int | None]]] = {}
        for cls_name, type_prop, link in [
            ("ExploratoryObservation", "exploratory_observation_type", "has_exploratory_observations"),
            (
                "DataRepresentationObservation",
                "data_representation_observation_type",
                "has_data_representation_observations",
            ),
            (
                "ModellingChoiceObservation",
                "modelling_choice_observation_type",
                "has_modeling_choice_observations",
            ),
            (
                "ModelSelectionObservation",
                "model_selection_observation_type",
                "has_model_selection_observations",
            ),
        ]:
            cls = onto[cls_name]
            assert cls is not None, f"{cls_name} is not declared"
            rows = []
            for ind in cls.instances():
                wfs = [w.name for w in onto["Workflow"].instances() if ind in getattr(w, link)]
                rows.append((ind.finding, getattr(ind, type_prop), ind.finding_sequence, tuple(wfs)))
            out[cls_name] = sorted(rows, key=str)
        return out
    finally:
        world.close()


def test_saved_file_uses_kmds_vocabulary_and_is_readable_by_owlready2(tmp_path: Path) -> None:
    kb = new_kb(tmp_path / "fresh.xml")
    kb.add_workflow("churn study", "KnowledgeExtractionExperimentationWorkflow", "Customer churn, 2024 data")
    kb.add_observation(
        "exploratory", "Tenure has 3% missing values", workflows=["churn study"], intent="DATA_UNDERSTANDING"
    )
    kb.add_observation("data_representation", "Log of monthly charges", workflows=["churn study"])
    kb.add_observation("modelling_choice", "Gradient boosting chosen", workflows=["churn study"])
    kb.add_observation("model_selection", "AUC 0.84 on hold-out", workflows=["churn study"], finding_seq=7)
    path = save_kb(kb)
    text = path.read_text(encoding="utf-8")
    assert 'xml:base="http://test.org/kmds/kmds.owl"' in text
    assert "<has_modeling_choice_observations" in text  # KMDS's spelling
    assert 'rdf:about="#churn study"' in text
    seen = _read_like_kmds(path)
    assert seen["ExploratoryObservation"] == [
        ("Tenure has 3% missing values", "Relevance Observation", 1, ("churn study",))
    ]
    assert seen["ModelSelectionObservation"] == [
        ("AUC 0.84 on hold-out", "Model Selection Statement", 7, ("churn study",))
    ]
    assert len(seen["DataRepresentationObservation"]) == 1 and len(seen["ModellingChoiceObservation"]) == 1


def test_edits_set_dirty_and_save_clears_it(kmds_data: Path, tmp_path: Path) -> None:
    kb = load_kb(kmds_data / "test_kb_exp_workflow.xml")
    assert not kb.dirty
    obs = kb.add_observation(
        "model_selection",
        "Random forest beat logistic regression (F1 0.81 vs 0.77)",
        obs_type="Model Selection Result Summary",
        intent="MODEL_SELECTION",
        workflows=["test experiment workflow"],
    )
    assert kb.dirty
    assert obs.iri == KMDS + "modelselectionobservation1"
    assert obs.finding_seq == 1  # first model selection of that workflow
    assert kb.observation(obs.iri) == obs
    path = save_kb(kb, tmp_path / "edited.xml")
    assert not kb.dirty and kb.path == path  # "save as" moves the KB to the new file
    again = load_kb(path)
    assert again.observation(obs.iri) == replace(obs, file_order=again.observation(obs.iri).file_order)
    assert len(again.observations) == 31


def test_update_keeps_iri_and_changes_fields(kmds_data: Path, tmp_path: Path) -> None:
    kb = load_kb(kmds_data / "test_kb_exp_workflow.xml")
    target = kb.observations[0]
    new = kb.update_observation(
        target.iri,
        finding="Rewritten\nover two lines",
        finding_seq=42,
        intent="FEATURE_ASSESSMENT",
        obs_type="Data Quality Observation",
        workflows=["test application workflow", "test experiment workflow"],
    )
    assert new.iri == target.iri and kb.dirty
    moved = kb.update_observation(kb.observations[1].iri, category="model_selection")
    assert moved.category == "model_selection" and moved.obs_type == "Model Selection Statement"
    again = load_kb(save_kb(kb, tmp_path / "u.xml"))
    got = again.observation(target.iri)
    assert got.finding == "Rewritten\nover two lines"
    assert (got.finding_seq, got.intent, got.obs_type) == (
        42,
        "FEATURE_ASSESSMENT",
        "Data Quality Observation",
    )
    assert got.workflows == ["test application workflow", "test experiment workflow"]
    assert again.observation(moved.iri).category == "model_selection"
    assert again.counts()["model_selection"] == 1 and again.counts()["exploratory"] == 9


def test_update_without_change_stays_clean(kmds_data: Path) -> None:
    kb = load_kb(kmds_data / "test_kb_exp_workflow.xml")
    obs = kb.observations[0]
    assert kb.update_observation(obs.iri, finding=obs.finding) == obs
    assert not kb.dirty


def test_delete_observation_and_its_links(kmds_data: Path, tmp_path: Path) -> None:
    kb = load_kb(kmds_data / "test_kb_exp_workflow.xml")
    gone = kb.observations[3]
    kb.delete_observation(gone.iri)
    assert kb.observation(gone.iri) is None and kb.dirty
    path = save_kb(kb, tmp_path / "d.xml")
    assert gone.name not in path.read_text(encoding="utf-8")
    again = load_kb(path)
    assert len(again.observations) == 29 and again.observation(gone.iri) is None
    # a new observation never reuses the deleted IRI
    added = again.add_observation(gone.category, "new one", workflows=[gone.workflows[0]])
    assert added.iri != gone.iri


def test_workflow_add_rename_delete(kmds_data: Path, tmp_path: Path) -> None:
    kb = load_kb(kmds_data / "test_kb_exp_workflow.xml")
    kb.add_workflow(
        "follow up", "KnowledgeApplicationWorkflow", "Second look", depends_on=["test experiment workflow"]
    )
    renamed = kb.update_workflow("test experiment workflow", name="experiment v2", description="Renamed")
    assert renamed.iri == KMDS + "experiment v2"
    assert kb.workflow("follow up").depends_on == ["experiment v2"]
    assert sum("experiment v2" in o.workflows for o in kb.observations) == 15
    again = load_kb(save_kb(kb, tmp_path / "w.xml"))
    assert [w.name for w in again.workflows] == ["test application workflow", "experiment v2", "follow up"]
    assert again.workflow("experiment v2").description == "Renamed"
    assert again.workflow("follow up").depends_on == ["experiment v2"]
    assert again.workflow("test experiment workflow") is None
    assert sum("experiment v2" in o.workflows for o in again.observations) == 15

    again.delete_workflow("experiment v2")
    assert sum(o.unlinked for o in again.observations) == 15
    assert again.workflow("follow up").depends_on == []
    third = load_kb(save_kb(again, tmp_path / "w2.xml"))
    assert len(third.observations) == 30 and sum(o.unlinked for o in third.observations) == 15
    third.delete_workflow("test application workflow", delete_observations=True)
    assert len(third.observations) == 15


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda kb: kb.add_observation("eda", "x"), "unknown category"),
        (lambda kb: kb.add_observation("exploratory", "x", workflows=["nope"]), "no workflow"),
        (lambda kb: kb.add_observation("exploratory", "bad \x00 byte"), "cannot store"),
        (lambda kb: kb.add_observation("exploratory", "lone \ud800 surrogate"), "U\\+D800"),
        (lambda kb: kb.add_observation("exploratory", "x", finding_seq="three"), "whole number"),
        (lambda kb: kb.add_observation("exploratory", " \n "), "finding cannot be empty"),
        (lambda kb: kb.update_observation(kb.observations[0].iri, finding=""), "finding cannot be empty"),
        (lambda kb: kb.update_observation("missing", finding="x"), "no observation"),
        (lambda kb: kb.update_observation(kb.observations[0].iri, iri="x"), "cannot change"),
        (lambda kb: kb.add_workflow("test application workflow"), "already exists"),
        (lambda kb: kb.add_workflow('bad"name'), "cannot hold"),
        (lambda kb: kb.add_workflow("   "), "must not be empty"),
        (lambda kb: kb.add_workflow("ok", kind="Pipeline"), "unknown workflow kind"),
        (lambda kb: kb.delete_workflow("nope"), "no workflow"),
    ],
)
def test_invalid_edits_are_refused_and_leave_kb_clean(kmds_data: Path, call, fragment: str) -> None:
    kb = load_kb(kmds_data / "test_kb_exp_workflow.xml")
    before = kb.observations
    with pytest.raises(KnowledgeBaseError, match=fragment):
        call(kb)
    assert kb.observations == before and not kb.dirty


def test_unicode_markup_and_newlines_survive(tmp_path: Path) -> None:
    kb = new_kb(tmp_path / "u.xml")
    kb.add_workflow("Ünïcode flow")
    text = "## Finding\n- a < b & c > d\n- \"quoted\" 'single' ✓ 日本語\r\n- end"
    kb.add_observation("exploratory", text, workflows=["Ünïcode flow"], intent="DATA_UNDERSTANDING")
    again = load_kb(save_kb(kb))
    (obs,) = again.observations
    assert obs.finding == text.replace("\r\n", "\n")
    assert obs.workflows == ["Ünïcode flow"]


def test_markup_in_workflow_name_is_refused_but_ampersand_and_spaces_work(tmp_path: Path) -> None:
    kb = new_kb(tmp_path / "n.xml")
    with pytest.raises(KnowledgeBaseError):
        kb.add_workflow("a <b> c")
    kb.add_workflow("R&D analysis 2024")
    kb.add_observation("exploratory", "x", workflows=["R&D analysis 2024"])
    again = load_kb(save_kb(kb))
    assert again.workflows[0].name == "R&D analysis 2024"
    assert again.observations[0].workflows == ["R&D analysis 2024"]


def test_unknown_content_of_the_file_is_preserved(tmp_path: Path) -> None:
    doc = (
        '<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
        'xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#" xmlns:owl="http://www.w3.org/2002/07/owl#" '
        'xmlns="http://test.org/kmds/kmds.owl#" xml:base="http://test.org/kmds/kmds.owl">\n'
        '<owl:Ontology rdf:about="http://test.org/kmds/kmds.owl"/>\n'
        '<owl:NamedIndividual rdf:about="#wf"><rdf:type rdf:resource="#KnowledgeApplicationWorkflow"/>'
        '<has_exploratory_observations rdf:resource="#exploratoryobservation1"/></owl:NamedIndividual>\n'
        '<owl:NamedIndividual rdf:about="#exploratoryobservation1">'
        '<rdf:type rdf:resource="#ExploratoryObservation"/>'
        "<finding>f</finding><rdfs:comment>reviewed by AB</rdfs:comment></owl:NamedIndividual>\n"
        '<owl:NamedIndividual rdf:about="#accuracy"><rdf:type rdf:resource="#PerformanceMeasure"/>'
        "<has_description>share of correct predictions</has_description></owl:NamedIndividual>\n"
        "</rdf:RDF>\n"
    )
    src = tmp_path / "src.xml"
    src.write_text(doc, encoding="utf-8")
    kb = load_kb(src)
    kb.update_observation(kb.observations[0].iri, finding="changed")
    text = save_kb(kb).read_text(encoding="utf-8")
    assert "reviewed by AB" in text and "share of correct predictions" in text and "changed" in text


def test_save_is_atomic_and_a_failed_save_keeps_the_original(
    kmds_data: Path, tmp_path: Path, monkeypatch
) -> None:
    path = tmp_path / "kb.xml"
    path.write_bytes((kmds_data / "test_kb_exp_workflow.xml").read_bytes())
    original = path.read_bytes()
    kb = load_kb(path)
    kb.add_observation("exploratory", "will not be saved", workflows=["test experiment workflow"])

    from kmds_desktop.kb.store import KBStore

    def broken_write(self, fh):  # simulates the disk filling up halfway
        fh.write(
            b'<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\n<half'
        )
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(KBStore, "write", broken_write)
    with pytest.raises(KnowledgeBaseError, match="No space left"):
        save_kb(kb)
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kb.xml"]  # no temp file left behind
    assert kb.dirty  # still unsaved

    def truncated_write(self, fh):  # a writer bug producing broken XML
        fh.write(
            b'<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\n<a>'
        )

    monkeypatch.setattr(KBStore, "write", truncated_write)
    with pytest.raises(KnowledgeBaseError, match="truncated"):
        save_kb(kb)
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kb.xml"]

    monkeypatch.undo()
    save_kb(kb)
    assert not kb.dirty and load_kb(path).counts()["observations"] == 31


def test_save_errors_name_the_target(kmds_data: Path, tmp_path: Path) -> None:
    kb = load_kb(kmds_data / "generated_by_kmds" / "noseq.xml")
    with pytest.raises(KnowledgeBaseError, match="does not exist"):
        save_kb(kb, tmp_path / "no" / "such" / "dir" / "kb.xml")
    with pytest.raises(KnowledgeBaseError, match="is a folder"):
        save_kb(kb, tmp_path)
    assert kb.path == (kmds_data / "generated_by_kmds" / "noseq.xml").resolve()


def test_saved_file_keeps_permissions_of_the_original(tmp_path: Path) -> None:
    kb = new_kb(tmp_path / "p.xml")
    kb.add_workflow("wf")
    path = save_kb(kb)
    os.chmod(path, 0o640)
    kb.add_observation("exploratory", "x", workflows=["wf"])
    save_kb(kb)
    assert (path.stat().st_mode & 0o777) == 0o640


def test_random_edit_sequences_round_trip(tmp_path: Path) -> None:
    """Many mixed edits, saved and reloaded after each batch, always give back what was in memory."""
    import random

    from kmds_desktop.kb import CATEGORIES, OBSERVATION_TYPES
    from kmds_desktop.paths import demo_kb_path

    rng = random.Random(11)
    kb = load_kb(demo_kb_path())
    path = tmp_path / "fuzz.xml"
    for batch in range(4):
        for _ in range(15):
            op = rng.random()
            names = [w.name for w in kb.workflows]
            if op < 0.35 or not kb.observations:
                cat = rng.choice(CATEGORIES)
                kb.add_observation(
                    cat,
                    f"finding {rng.random():.6f} & <tag> {batch}",
                    obs_type=rng.choice(OBSERVATION_TYPES[cat]),
                    intent=rng.choice([None, "MODEL_SELECTION", "free text intent"]),
                    finding_seq=rng.choice([None, rng.randint(-3, 50)]),
                    workflows=rng.sample(names, k=rng.randint(0, len(names))),
                )
            elif op < 0.65:
                target = rng.choice(kb.observations)
                cat = rng.choice(CATEGORIES)
                kb.update_observation(
                    target.iri,
                    category=cat,
                    finding=target.finding + " (edited)",
                    workflows=rng.sample(names, k=rng.randint(0, len(names))),
                )
            elif op < 0.85:
                kb.delete_observation(rng.choice(kb.observations).iri)
            elif op < 0.93:
                name = f"workflow {batch}-{rng.randint(0, 10**6)}"
                kb.add_workflow(name, depends_on=rng.sample(names, k=1))
            elif len(names) > 1:
                kb.delete_workflow(rng.choice(names), delete_observations=rng.random() < 0.5)
        save_kb(kb, path)
        again = load_kb(path)
        assert _content(again) == _content(kb)
        kb = again
