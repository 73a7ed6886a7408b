"""Loading real KMDS files: counts from ../shared/README.md, format quirks, ordering, isolation."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmds_desktop.kb import CATEGORIES, KnowledgeBase, Observation, Workflow, load_kb
from kmds_desktop.paths import demo_kb_path

# file -> (workflows, observations, unlinked), as ../shared/README.md lists them
EXPECTED = {
    "example_analytics_kb_app_workflow.xml": (1, 10, 2),
    "example_ml_kb_exp_workflow.xml": (1, 9, 0),
    "test_kb_app_workflow.xml": (1, 15, 0),
    "test_kb_exp_workflow.xml": (2, 30, 0),
    "repo_0.2.16_example_analytics_kb_app_workflow.xml": (1, 9, 0),
    "repo_0.2.16_example_ml_kb_exp_workflow.xml": (1, 9, 0),
    "repo_0.2.16_test_kb_app_workflow.xml": (1, 20, 0),
    "repo_0.2.16_test_kb_exp_workflow.xml": (2, 40, 0),
    "history_2024_example_ml_kb_exp_workflow.xml": (1, 8, 0),
    "generated_by_kmds/synth_250.xml": (1, 1000, 0),
    "generated_by_kmds/noseq.xml": (1, 2, 0),
    "generated_by_kmds/cli_kb.xml": (1, 3, 0),
    "schema_only_kmds_ontology_0.4.2.xml": (0, 0, 0),
}


def test_every_shared_file_is_covered(kmds_data: Path) -> None:
    on_disk = {str(p.relative_to(kmds_data)) for p in kmds_data.rglob("*.xml")}
    assert on_disk == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shared_file_loads_with_readme_counts(kmds_data: Path, name: str) -> None:
    kb = load_kb(kmds_data / name)
    n_wf, n_obs, n_unlinked = EXPECTED[name]
    assert isinstance(kb, KnowledgeBase)
    assert kb.path == (kmds_data / name).resolve()
    assert len(kb.workflows) == n_wf
    assert len(kb.observations) == n_obs
    assert sum(o.unlinked for o in kb.observations) == n_unlinked
    assert not kb.dirty
    for obs in kb.observations:
        assert isinstance(obs, Observation)
        assert obs.category in CATEGORIES
        assert obs.iri.startswith("http://test.org/kmds/kmds.owl#")
        assert obs.finding.strip()
        assert obs.obs_type
    assert len({o.iri for o in kb.observations}) == n_obs


def test_unlinked_observations_are_kept_and_marked(kmds_data: Path) -> None:
    kb = load_kb(kmds_data / "example_analytics_kb_app_workflow.xml")
    (wf,) = kb.workflows
    assert wf.name == "ITSM modelling"  # id with a space
    assert wf.iri == "http://test.org/kmds/kmds.owl#ITSM modelling"
    assert wf.kind == "KnowledgeApplicationWorkflow"
    unlinked = [o for o in kb.observations if o.unlinked]
    assert {o.name for o in unlinked} == {"modelselectionobservation1", "modelselectionobservation2"}
    assert all(o.category == "model_selection" and o.workflows == [] for o in unlinked)
    assert kb.observations[-2:] == unlinked  # unlinked ones come after every workflow
    assert any("not linked" in note for note in kb.notes)
    linked = [o for o in kb.observations if not o.unlinked]
    assert all(o.workflows == ["ITSM modelling"] for o in linked)


def test_missing_sequence_is_none(kmds_data: Path) -> None:
    kb = load_kb(kmds_data / "generated_by_kmds" / "noseq.xml")
    by_finding = {o.finding: o for o in kb.observations}
    assert by_finding["has seq"].finding_seq == 1
    assert by_finding["no seq"].finding_seq is None
    assert [o.finding for o in kb.observations] == ["has seq", "no seq"]  # None sorts last


def test_intent_present_and_absent(kmds_data: Path) -> None:
    with_intent = load_kb(kmds_data / "example_analytics_kb_app_workflow.xml")
    first = with_intent.observations[0]
    assert first.intent == "DATA_UNDERSTANDING"
    assert any(o.intent is None for o in with_intent.observations)  # modelselectionobservation3..5
    without = load_kb(kmds_data / "test_kb_app_workflow.xml")
    assert all(o.intent is None for o in without.observations)


def test_observation_classes_outside_km_observation_are_collected(kmds_data: Path) -> None:
    # ModelSelectionObservation is directly under owl:Thing, not KMObservation.
    kb = load_kb(kmds_data / "generated_by_kmds" / "synth_250.xml")
    counts = kb.counts()
    assert {c: counts[c] for c in CATEGORIES[:4]} == dict.fromkeys(CATEGORIES[:4], 250)
    assert kb.workflows[0].description == "Synthetic benchmark workflow with 1000 observations"


def test_modeling_spelling_links_modelling_choices(kmds_data: Path) -> None:
    kb = load_kb(kmds_data / "test_kb_exp_workflow.xml")
    names = [w.name for w in kb.workflows]
    assert names == ["test application workflow", "test experiment workflow"]
    kinds = {w.name: w.kind for w in kb.workflows}
    assert kinds["test experiment workflow"] == "KnowledgeExtractionExperimentationWorkflow"
    choices = [o for o in kb.observations if o.category == "modelling_choice"]
    assert len(choices) == 10
    assert all(len(o.workflows) == 1 for o in choices)
    assert sum(o.workflows == ["test application workflow"] for o in choices) == 5


def test_old_writer_model_selection_on_modelling_choice_class(kmds_data: Path) -> None:
    kb = load_kb(kmds_data / "repo_0.2.16_test_kb_exp_workflow.xml")
    counts = kb.counts()
    assert counts["modelling_choice"] == 10 and counts["model_selection"] == 10
    obs = kb.observation("modellingchoiceobservation7")
    assert obs is not None
    assert obs.category == "model_selection"
    assert obs.obs_type == "Model Selection Result Summary"
    mc = kb.observation("modellingchoiceobservation1")
    assert mc.category == "modelling_choice" and mc.obs_type == "Modelling Assumption Observation"
    assert any("type field of another category" in n for n in kb.notes)


def test_order_is_workflow_category_sequence_file(kmds_data: Path) -> None:
    kb = load_kb(kmds_data / "test_kb_exp_workflow.xml")
    wf_pos = {w.name: i for i, w in enumerate(kb.workflows)}
    keys = [
        (wf_pos[o.workflows[0]], CATEGORIES.index(o.category), o.finding_seq, o.file_order)
        for o in kb.observations
    ]
    assert keys == sorted(keys)
    # file order is not sequence order in this file: the workflow lists 4,5,3,2,1
    first = kb.observations[:5]
    assert [o.finding_seq for o in first] == [1, 2, 3, 4, 5]
    assert [o.finding for o in first] == [f"Exploratory Observation - {i}" for i in range(1, 6)]


def test_repeated_sequence_keeps_file_order(kmds_data: Path) -> None:
    # example_analytics has model selections with seq 1,2,3 linked and 1,2 unlinked: seq repeats
    kb = load_kb(kmds_data / "example_analytics_kb_app_workflow.xml")
    ms = [o for o in kb.observations if o.category == "model_selection"]
    assert [o.finding_seq for o in ms] == [1, 2, 3, 1, 2]
    assert [o.file_order for o in ms[:3]] == sorted(o.file_order for o in ms[:3])


def test_two_kbs_in_one_process_do_not_mix(kmds_data: Path) -> None:
    a = load_kb(kmds_data / "test_kb_exp_workflow.xml")
    b = load_kb(kmds_data / "example_ml_kb_exp_workflow.xml")
    a2 = load_kb(kmds_data / "test_kb_exp_workflow.xml")
    assert len(a.observations) == 30 and len(b.observations) == 9
    assert a.observations == a2.observations
    assert {w.name for w in b.workflows} == {"retail_customer_modelling"}
    assert a._store.world is not b._store.world  # the isolation itself is the point


def test_kb_id_is_stable_short_hash_of_resolved_path(
    kmds_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = kmds_data / "generated_by_kmds" / "noseq.xml"
    first = load_kb(path).kb_id
    monkeypatch.chdir(kmds_data)
    relative = load_kb(Path("generated_by_kmds") / "noseq.xml").kb_id
    assert first == relative
    assert len(first) == 12 and int(first, 16) >= 0
    assert load_kb(kmds_data / "generated_by_kmds" / "cli_kb.xml").kb_id != first


def test_schema_only_file_is_an_empty_kb_with_a_note(kmds_data: Path) -> None:
    kb = load_kb(kmds_data / "schema_only_kmds_ontology_0.4.2.xml")
    assert kb.workflows == [] and kb.observations == []
    assert any("only the KMDS schema" in note for note in kb.notes)


def test_demo_kb_loads_with_expected_counts() -> None:
    kb = load_kb(demo_kb_path())
    counts = kb.counts()
    assert counts["workflows"] == 2
    assert counts["observations"] == 42 >= 40
    assert all(counts[c] >= 8 for c in CATEGORIES[:4])
    assert counts["unlinked"] == 0
    assert kb.notes == []
    assert all(o.intent for o in kb.observations)
    assert all(isinstance(w, Workflow) and w.description for w in kb.workflows)
    regression = kb.workflow("penguin body mass regression")
    assert regression.depends_on == ["penguin species classification"]
    text = " ".join(o.finding for o in kb.observations)
    for fact in ("344", "Adelie", "Chinstrap", "Gentoo", "Biscoe", "flipper"):
        assert fact in text


def test_demo_kb_file_is_what_the_generator_writes(tmp_path: Path) -> None:
    from kmds_desktop.kb.demo import write_demo_kb

    fresh = load_kb(write_demo_kb(tmp_path / "demo.xml"))
    committed = load_kb(demo_kb_path())
    assert fresh.workflows == committed.workflows
    assert [o.to_dict() for o in fresh.observations] == [o.to_dict() for o in committed.observations]


def test_progress_is_reported_and_cancel_stops_loading(kmds_data: Path) -> None:
    from kmds_desktop.tasks import Cancelled, CancelToken

    seen: list[tuple[int, int | None, str]] = []
    load_kb(kmds_data / "test_kb_exp_workflow.xml", progress=lambda d, t, m: seen.append((d, t, m)))
    assert seen[0][0] == 0 and seen[-1][0] == seen[-1][1]
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        load_kb(kmds_data / "test_kb_exp_workflow.xml", cancel=token)
