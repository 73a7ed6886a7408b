"""``kmds-desktop kb show|synth`` handlers and the synthetic KB generator."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import pytest

from kmds_desktop.kb import CATEGORIES, INTENTS, OBSERVATION_TYPES, load_kb
from kmds_desktop.kb.cli import register
from kmds_desktop.kb.synthetic import write_synthetic_kb


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kmds-desktop")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_show_lists_workflows_observations_and_unlinked(kmds_data: Path, capsys) -> None:
    assert _run(["kb", "show", str(kmds_data / "example_analytics_kb_app_workflow.xml")]) == 0
    out = capsys.readouterr().out
    assert "Workflow: ITSM modelling [KnowledgeApplicationWorkflow]" in out
    assert "1 workflow(s), 10 observation(s)" in out
    assert "Unlinked observations" in out
    assert out.index("Unlinked observations") < out.index("A small group of support groups")
    assert "[exploratory #1] Relevance Observation (DATA_UNDERSTANDING)" in out


def test_show_json(kmds_data: Path, capsys) -> None:
    assert _run(["kb", "show", str(kmds_data / "generated_by_kmds" / "noseq.xml"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [w["name"] for w in data["workflows"]] == ["wf_noseq"]
    assert [o["finding_seq"] for o in data["observations"]] == [1, None]
    assert data["observations"][0]["unlinked"] is False
    assert len(data["kb_id"]) == 12


def test_show_error_is_one_line_on_stderr_with_exit_1(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("<rdf:RDF", encoding="utf-8")
    assert _run(["kb", "show", str(bad)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "Traceback" not in captured.err
    assert _run(["kb", "show", str(tmp_path / "missing.xml")]) == 1
    assert "file not found" in capsys.readouterr().err


def test_synth_command_writes_a_loadable_kb(tmp_path: Path, capsys) -> None:
    out = tmp_path / "s.xml"
    assert _run(["kb", "synth", str(out), "40", "--workflows", "3", "--seed", "7"]) == 0
    assert "wrote" in capsys.readouterr().out
    kb = load_kb(out)
    assert len(kb.observations) == 40 and len(kb.workflows) == 3
    assert _run(["kb", "synth", str(out), "-1"]) == 1


@pytest.fixture(scope="module")
def synthetic_10k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_kb(tmp_path_factory.mktemp("synth") / "kb10k.xml", 10_000)


def test_synthetic_kb_at_scale_has_the_real_shape(synthetic_10k: Path) -> None:
    kb = load_kb(synthetic_10k)
    obs = kb.observations
    assert len(obs) == 10_000 and len(kb.workflows) == 2
    counts = Counter(o.category for o in obs)
    assert counts == {c: 2_500 for c in CATEGORIES[:4]}
    for category in CATEGORIES[:4]:
        types = {o.obs_type for o in obs if o.category == category}
        assert types == set(OBSERVATION_TYPES[category])
    assert {o.intent for o in obs} <= set(INTENTS) and len({o.intent for o in obs}) >= 4
    assert all(o.finding_seq is not None and o.workflows for o in obs)
    assert len({o.finding for o in obs}) > 3_000  # varied text, not placeholders
    assert len({o.iri for o in obs}) == 10_000
    assert kb.workflows[1].depends_on == [kb.workflows[0].name]
    # sequences run 1..n inside each workflow and category
    for wf in kb.workflows:
        seqs = [o.finding_seq for o in obs if o.workflows == [wf.name] and o.category == "exploratory"]
        assert seqs == list(range(1, len(seqs) + 1))


def test_synthetic_kb_is_deterministic_per_seed(tmp_path: Path) -> None:
    a = load_kb(write_synthetic_kb(tmp_path / "a.xml", 30, seed=3))
    b = load_kb(write_synthetic_kb(tmp_path / "b.xml", 30, seed=3))
    c = load_kb(write_synthetic_kb(tmp_path / "c.xml", 30, seed=4))
    assert [o.finding for o in a.observations] == [o.finding for o in b.observations]
    assert [o.finding for o in a.observations] != [o.finding for o in c.observations]
