"""The five template searches and SearchFilters over real KBs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from kmds_desktop.kb import (
    TEMPLATES,
    KnowledgeBaseError,
    SearchFilters,
    all_observations_search,
    data_representation_search,
    exploratory_search,
    load_kb,
    model_selection_search,
    modelling_choice_search,
)
from kmds_desktop.paths import demo_kb_path


@pytest.fixture(scope="module")
def exp_kb(kmds_data: Path):
    return load_kb(kmds_data / "test_kb_exp_workflow.xml")


@pytest.fixture(scope="module")
def demo_kb():
    return load_kb(demo_kb_path())


def test_each_template_returns_its_category_in_kb_order(demo_kb) -> None:
    for fn, category in [
        (exploratory_search, "exploratory"),
        (data_representation_search, "data_representation"),
        (modelling_choice_search, "modelling_choice"),
        (model_selection_search, "model_selection"),
    ]:
        got = fn(demo_kb)
        expected = [o for o in demo_kb.observations if o.category == category]
        assert got == expected and got
    assert all_observations_search(demo_kb) == demo_kb.observations
    assert set(TEMPLATES) == {
        "exploratory_search",
        "data_representation_search",
        "modelling_choice_search",
        "model_selection_search",
        "all_observations_search",
    }


def test_workflow_narrowing_by_name_or_iri(exp_kb) -> None:
    by_name = exploratory_search(exp_kb, workflow="test experiment workflow")
    assert len(by_name) == 5 and all(o.workflows == ["test experiment workflow"] for o in by_name)
    iri = exp_kb.workflow("test experiment workflow").iri
    assert exploratory_search(exp_kb, workflow=iri) == by_name
    with pytest.raises(KnowledgeBaseError, match="no workflow"):
        exploratory_search(exp_kb, workflow="nope")


def test_obs_type_filter_is_a_case_insensitive_substring(exp_kb) -> None:
    got = exploratory_search(exp_kb, SearchFilters(obs_type_filter="data QUALITY"))
    assert len(got) == 4 and all(o.obs_type == "Data Quality Observation" for o in got)
    assert modelling_choice_search(exp_kb, SearchFilters(obs_type_filter="assumption"))
    assert not data_representation_search(exp_kb, SearchFilters(obs_type_filter="assumption"))


def test_sequence_range_is_inclusive(exp_kb) -> None:
    got = exploratory_search(
        exp_kb, SearchFilters(finding_seq_min=2, finding_seq_max=3), workflow="test application workflow"
    )
    assert [o.finding_seq for o in got] == [2, 3]
    only_min = all_observations_search(exp_kb, SearchFilters(finding_seq_min=5))
    assert len(only_min) == 6 and {o.finding_seq for o in only_min} == {5}
    assert all_observations_search(exp_kb, SearchFilters(finding_seq_min=4, finding_seq_max=3)) == []


def test_missing_sequence_is_outside_any_bounded_range(kmds_data: Path) -> None:
    kb = load_kb(kmds_data / "generated_by_kmds" / "noseq.xml")
    assert len(all_observations_search(kb)) == 2
    assert [o.finding for o in all_observations_search(kb, SearchFilters(finding_seq_max=10))] == ["has seq"]


def test_keyword_matches_finding_text_case_insensitively(demo_kb) -> None:
    got = all_observations_search(demo_kb, SearchFilters(keyword="GENTOO"))
    assert got and all("gentoo" in o.finding.lower() for o in got)
    assert len(got) < len(demo_kb.observations)
    combined = model_selection_search(
        demo_kb,
        SearchFilters(keyword="logistic", obs_type_filter="statement"),
        workflow="penguin species classification",
    )
    assert len(combined) == 1 and "selected" in combined[0].finding


def test_filters_validate_and_treat_blank_as_absent(demo_kb) -> None:
    f = SearchFilters.model_validate(
        {"keyword": "  ", "obs_type_filter": "", "finding_seq_min": "2", "extra": 1}
    )
    assert f.keyword is None and f.obs_type_filter is None and f.finding_seq_min == 2
    with pytest.raises(ValidationError):
        SearchFilters(finding_seq_min="two")
    assert all_observations_search(demo_kb, SearchFilters()) == demo_kb.observations


def test_searches_see_edits(exp_kb, kmds_data: Path) -> None:
    kb = load_kb(kmds_data / "test_kb_exp_workflow.xml")
    kb.add_observation("model_selection", "XGBoost wins on recall", workflows=["test application workflow"])
    got = model_selection_search(kb, SearchFilters(keyword="xgboost"))
    assert [o.finding for o in got] == ["XGBoost wins on recall"]
    assert model_selection_search(exp_kb) == []  # the other KB object is untouched
