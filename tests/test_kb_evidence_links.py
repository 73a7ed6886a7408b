"""Evidence in the knowledge base: an observation linked with CiTO to a paper's page and quote, saved,
loaded again by the app (links read back, observations unchanged) and by the real ``kmds`` 0.4.2
package (every observation read exactly as before); a quote not on its page refused with nothing
saved; the CLI's link-evidence and the links in ``kb show --json``."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from support.fulltext import link_pdfs
from support.kmds_package import ensure_kmds_package, read_with_kmds

from kmds_desktop.app.evidence_links import evidence_lines, link_evidence, link_verdict
from kmds_desktop.kb import KnowledgeBaseError, load_kb, save_kb
from kmds_desktop.kb.evidence_links import (
    CITO_NS,
    DOI_IRI,
    EVIDENCE_NS,
    NOT_CHECKED,
    VERIFIED,
    evidence_links,
    remove_evidence_link,
)
from kmds_desktop.literature.evidence.verdict import SUPPORTS, ClaimVerdict, DocumentVerdict
from kmds_desktop.literature.fulltext.importer import import_folder
from kmds_desktop.literature.fulltext.store import FulltextStore

PEG_DOI = "10.1126/sciadv.add4623"
PEG_QUOTE = ("Formulations with over 40% substitution with PEG-maleimide showed no detectable levels of "
             "transfection")
KIR_DOI = "10.1007/s00125-024-06103-w"


@pytest.fixture(scope="session")
def kmds_site() -> Path:
    """kmds 0.4.2 installed in isolation (cached under ~/.cache/kmds-desktop-test-models)."""
    return ensure_kmds_package()


@pytest.fixture(scope="module")
def paper_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A full-text store holding one real shared paper (the PEG-maleimide one)."""
    root = tmp_path_factory.mktemp("evidence-store")
    folder = link_pdfs(["sciadv.add4623.pdf"], root / "pdfs")
    path = root / "data" / "fulltext" / "fulltext.sqlite"
    with FulltextStore(path) as store:
        report = import_folder(store, folder)
        assert report.count("imported") == 1
        assert store.papers()[0].doi == PEG_DOI
    return path


def _kb_copy(kmds_data: Path, tmp_path: Path, name: str = "example_ml_kb_exp_workflow.xml") -> Path:
    target = tmp_path / name
    shutil.copyfile(kmds_data / name, target)
    return target


def _content(kb) -> list:
    return [replace(o, file_order=0) for o in kb.observations]


def test_links_saved_read_back_by_the_app_and_kmds_reads_every_observation_as_before(
        kmds_data: Path, tmp_path: Path, paper_store: Path, kmds_site: Path) -> None:
    path = _kb_copy(kmds_data, tmp_path)
    before_app = _content(load_kb(path))
    before_kmds = read_with_kmds(path, kmds_site, tmp_path)
    assert len(before_kmds) == len(before_app) > 0
    first, second = before_app[0], before_app[1]

    with FulltextStore(paper_store) as store:
        supported = link_evidence(path, first.iri, f"https://doi.org/{PEG_DOI.upper()}", "supports", [5],
                                  PEG_QUOTE, store=store)
        disputed = link_evidence(path, second.name, KIR_DOI, "disputes", [7, 8], "a sentence we cannot check",
                                 store=store)
        cited = link_evidence(path, first.iri, PEG_DOI, "citesAsEvidence", [5], store=store)
    assert supported.link.quote_status == VERIFIED and supported.notes == []
    assert supported.link.title  # the title the importer found in the PDF, on the paper
    assert disputed.link.quote_status == NOT_CHECKED
    assert "not in the full-text store" in disputed.notes[0]
    assert cited.link.quote is None

    again = load_kb(path)
    assert _content(again) == before_app  # the observations are untouched
    links = {(link.observation, link.relation): link for link in evidence_links(again)}
    assert set(links) == {(first.iri, "supports"), (second.iri, "disputes"), (first.iri, "citesAsEvidence")}
    assert links[(first.iri, "supports")].pages == (5,)
    assert links[(first.iri, "supports")].doi == PEG_DOI
    assert links[(first.iri, "supports")].quote == PEG_QUOTE
    assert links[(second.iri, "disputes")].pages == (7, 8)
    assert evidence_lines(again, first.name) == [
        f"supports: {PEG_DOI}, p. 5 \u2014 \u201c{PEG_QUOTE}\u201d", f"citesAsEvidence: {PEG_DOI}, p. 5"]

    after_kmds = read_with_kmds(path, kmds_site, tmp_path)
    key = lambda row: (row["obs_type"], row["finding_seq"] or 0, row["finding"])  # noqa: E731
    assert sorted(after_kmds, key=key) == sorted(before_kmds, key=key)


def test_the_file_states_cito_relations_in_their_direction_and_the_paper_with_its_doi(
        kmds_data: Path, tmp_path: Path) -> None:
    import rdflib

    path = _kb_copy(kmds_data, tmp_path)
    obs = load_kb(path).observations[0]
    link_evidence(path, obs.iri, PEG_DOI, "supports", [5], PEG_QUOTE)
    link_evidence(path, obs.iri, KIR_DOI, "citesAsEvidence", [7])
    graph = rdflib.Graph().parse(path, format="xml")
    cito, bibo = rdflib.Namespace(CITO_NS), rdflib.Namespace("http://purl.org/ontology/bibo/")
    paper, other = rdflib.URIRef(DOI_IRI + PEG_DOI), rdflib.URIRef(DOI_IRI + KIR_DOI)
    observation = rdflib.URIRef(obs.iri)
    assert (paper, cito.supports, observation) in graph  # the paper (citing) supports the finding
    assert (observation, cito.citesAsEvidence, other) in graph  # the finding cites the paper as evidence
    assert (paper, bibo.doi, rdflib.Literal(PEG_DOI, datatype=rdflib.XSD.string)) in graph
    assert (paper, rdflib.RDF.type, bibo.AcademicArticle) in graph
    nodes = list(graph.subjects(rdflib.RDF.type, rdflib.URIRef(EVIDENCE_NS + "EvidenceLink")))
    assert len(nodes) == 2 and all(str(n).startswith(EVIDENCE_NS) for n in nodes)
    kmds_terms = {str(t) for triple in graph for t in triple if str(t).startswith("http://test.org/kmds/")}
    original = rdflib.Graph().parse(kmds_data / "example_ml_kb_exp_workflow.xml", format="xml")
    before_terms = {str(t) for triple in original for t in triple if str(t).startswith("http://test.org/kmds/")}
    assert kmds_terms <= before_terms | {str(o.iri) for o in load_kb(path).observations}  # no new KMDS term


def test_a_quote_not_on_its_page_is_refused_and_the_file_is_unchanged(
        kmds_data: Path, tmp_path: Path, paper_store: Path) -> None:
    path = _kb_copy(kmds_data, tmp_path)
    original = path.read_bytes()
    obs = load_kb(path).observations[0]
    with FulltextStore(paper_store) as store, pytest.raises(ValueError, match="not on page 3"):
        link_evidence(path, obs.iri, PEG_DOI, "supports", [3], PEG_QUOTE, store=store)
    with FulltextStore(paper_store) as store, pytest.raises(ValueError, match="page 999 does not exist"):
        link_evidence(path, obs.iri, PEG_DOI, "supports", [999], store=store)
    with pytest.raises(ValueError, match="not a DOI"):
        link_evidence(path, obs.iri, "sciadv.add4623", "supports", [5])
    with pytest.raises(ValueError, match="unknown relation"):
        link_evidence(path, obs.iri, PEG_DOI, "agreesWith", [5])
    with pytest.raises(KnowledgeBaseError, match="no observation"):
        link_evidence(path, "no_such_observation", PEG_DOI, "supports", [5])
    assert path.read_bytes() == original


def test_links_survive_edits_and_saves_and_leave_with_their_observation(
        kmds_data: Path, tmp_path: Path) -> None:
    path = _kb_copy(kmds_data, tmp_path)
    kb = load_kb(path)
    keep, drop = kb.observations[0], kb.observations[1]
    link_evidence(kb, keep.iri, PEG_DOI, "supports", [5], PEG_QUOTE, save=False)
    link_evidence(kb, keep.iri, PEG_DOI, "supports", [5], PEG_QUOTE, save=False)  # the same link again
    link_evidence(kb, drop.iri, KIR_DOI, "disputes", [7], save=False)
    assert kb.dirty and len(evidence_links(kb)) == 2
    kb.update_observation(keep.iri, finding=keep.finding + " (checked)")
    kb.delete_observation(drop.iri)
    save_kb(kb)
    again = load_kb(path)
    assert [(link.observation, link.relation) for link in evidence_links(again)] == [(keep.iri, "supports")]
    assert again.observation(keep.iri).finding.endswith("(checked)")
    assert remove_evidence_link(again, evidence_links(again)[0].iri)
    save_kb(again)
    assert evidence_links(load_kb(path)) == []


def test_a_verdict_is_filed_as_supports_links_with_its_quotes(
        kmds_data: Path, tmp_path: Path, paper_store: Path) -> None:
    path = _kb_copy(kmds_data, tmp_path)
    obs = load_kb(path).observations[2]
    verdict = ClaimVerdict("over 40% PEG-maleimide stops transfection", "offline", [
        DocumentVerdict(PEG_DOI, SUPPORTS, PEG_QUOTE, (5,), 0.8, PEG_DOI, "sciadv.add4623.pdf"),
        DocumentVerdict("scan.pdf", SUPPORTS, "a quote from a paper without a DOI", (1,), 0.7, None,
                        "scan.pdf"),
        DocumentVerdict(KIR_DOI, "not addressed", None, (), 0.2, KIR_DOI, "s00125.pdf"),
    ])
    with FulltextStore(paper_store) as store:
        outcomes, notes = link_verdict(path, obs.iri, verdict, store=store)
    assert [o.link.relation for o in outcomes] == ["supports"]
    assert outcomes[0].link.quote_status == VERIFIED
    assert notes == ["scan.pdf: no DOI found in the PDF, not linked"]
    assert [link.doi for link in evidence_links(load_kb(path), obs.iri)] == [PEG_DOI]


def test_cli_links_evidence_and_kb_show_exports_the_links(
        kmds_data: Path, tmp_path: Path, paper_store: Path, data_home: Path, capsys) -> None:
    from kmds_desktop.cli import main

    (data_home / "fulltext").mkdir()
    shutil.copyfile(paper_store, data_home / "fulltext" / "fulltext.sqlite")
    path = _kb_copy(kmds_data, tmp_path)
    obs = load_kb(path).observations[0]
    assert main(["kb", "link-evidence", str(path), obs.name, "--doi", PEG_DOI, "--page", "5",
                 "--relation", "supports", "--quote", PEG_QUOTE, "--json"]) == 0
    saved = json.loads(capsys.readouterr().out)
    assert saved["link"]["quote_status"] == VERIFIED and saved["link"]["pages"] == [5]

    original = path.read_bytes()
    assert main(["kb", "link-evidence", str(path), obs.name, "--doi", PEG_DOI, "--page", "2",
                 "--relation", "disputes", "--quote", PEG_QUOTE]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not on page 2" in err
    assert path.read_bytes() == original

    assert main(["kb", "show", str(path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(e["observation"], e["relation"], e["doi"]) for e in shown["evidence_links"]] == [
        (obs.iri, "supports", PEG_DOI)]
    assert main(["kb", "evidence", str(path), obs.name]) == 0
    assert f"supports: {PEG_DOI}, p. 5" in capsys.readouterr().out


def test_the_kb_browser_shows_an_observations_evidence(qtbot, kmds_data: Path, tmp_path: Path) -> None:
    from kmds_desktop.ui.kb.browser import KBBrowser

    path = _kb_copy(kmds_data, tmp_path)
    kb = load_kb(path)
    linked, plain = kb.observations[0], kb.observations[1]
    link_evidence(kb, linked.iri, PEG_DOI, "supports", [5], PEG_QUOTE, save=False)
    browser = KBBrowser()
    qtbot.addWidget(browser)
    browser.set_kb(kb)
    browser.show()
    assert browser.select_observation(linked.iri)
    qtbot.waitUntil(lambda: "Evidence" in browser.details.toPlainText())
    text = browser.details.toPlainText()
    assert "supports" in text and PEG_DOI in text and "p. 5" in text and PEG_QUOTE in text
    assert f"https://doi.org/{PEG_DOI}" in browser.details.toHtml()
    assert browser.select_observation(plain.iri)
    qtbot.waitUntil(lambda: plain.finding.split()[0] in browser.details.toPlainText())
    assert "Evidence" not in browser.details.toPlainText()
