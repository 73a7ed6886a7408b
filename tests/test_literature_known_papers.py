"""Reading known papers: pasted identifiers, RIS (rispy) and BibTeX (bibtexparser), bounded and strict."""

from __future__ import annotations

import bibtexparser
import pytest
import rispy

from kmds_desktop.literature.strategy.known_papers import (
    KnownPapersError,
    parse_identifiers,
    read_known_file,
)


def test_pasted_identifiers_are_classified_and_typos_named():
    papers = parse_identifiers("PMID 123, pmid:456\n789; 10.1000/ABC.1 https://doi.org/10.1056/x "
                               "doi:10.1001/y cf:139 scifact:4983")
    assert [(p.pmid, p.doi, p.external_id) for p in papers] == [
        ("123", None, None), ("456", None, None), ("789", None, None), (None, "10.1000/abc.1", None),
        (None, "10.1056/x", None), (None, "10.1001/y", None), (None, None, "cf:139"),
        (None, None, "scifact:4983")]
    with pytest.raises(KnownPapersError, match=r"pasted item 2: 'aspirin' is not a PMID, DOI or source id"):
        parse_identifiers("123 aspirin")


def test_ris_file_written_by_rispy(tmp_path):
    path = tmp_path / "refs.ris"
    path.write_text(rispy.dumps([
        {"type_of_reference": "JOUR", "title": "A", "doi": "10.1136/AbC", "accession_number": "31415"},
        {"type_of_reference": "JOUR", "title": "B", "urls": ["https://pubmed.ncbi.nlm.nih.gov/2718/"]},
        {"type_of_reference": "JOUR", "title": "C", "accession_number": "cf:12"},
        {"type_of_reference": "JOUR", "title": "Only a title"},
    ]))
    papers = read_known_file(path)
    assert [(p.pmid, p.doi, p.external_id, p.title) for p in papers] == [
        ("31415", "10.1136/abc", None, "A"), ("2718", None, None, "B"), (None, None, "cf:12", "C"),
        (None, None, None, "Only a title")]
    assert papers[0].origin == "refs.ris record 1"


def test_bibtex_file_written_by_bibtexparser(tmp_path):
    library = bibtexparser.Library()
    for key, fields in (("a", {"title": "{Aspirin} trial", "doi": "10.1016/Q", "pmid": "11"}),
                        ("b", {"title": "Other", "eprint": "22", "eprinttype": "pubmed"}),
                        ("c", {"title": "Third", "note": "PMID: 33"})):
        library.add(bibtexparser.model.Entry("article", key,
                                             [bibtexparser.model.Field(k, v) for k, v in fields.items()]))
    path = tmp_path / "refs.bib"
    path.write_text(bibtexparser.write_string(library))
    papers = read_known_file(path)
    assert [(p.pmid, p.doi, p.title) for p in papers] == [("11", "10.1016/q", "Aspirin trial"),
                                                          ("22", None, "Other"), ("33", None, "Third")]


def test_unreadable_and_oversized_files_are_one_line_errors(tmp_path):
    broken = tmp_path / "broken.bib"
    broken.write_text("@article{x, title = {unclosed\n")
    with pytest.raises(KnownPapersError) as info:
        read_known_file(broken)
    assert "broken.bib" in str(info.value) and "\n" not in str(info.value)
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    with pytest.raises(KnownPapersError, match="no papers found"):
        read_known_file(empty)
    with pytest.raises(KnownPapersError, match="cannot read"):
        read_known_file(tmp_path / "missing.ris")
    big = tmp_path / "big.txt"
    with big.open("wb") as f:
        f.truncate(21 * 1024 * 1024)
    with pytest.raises(KnownPapersError, match="larger than 20 MB"):
        read_known_file(big)


def test_pasted_ids_set_unreadable_items_aside() -> None:
    """The window's reading of a paste: unreadable items are reported, the rest kept; nothing
    readable at all is still an error."""
    from kmds_desktop.literature.strategy.known_papers import read_pasted_identifiers

    pasted = read_pasted_identifiers("123 aspirin 10.1000/x")
    assert [p.label for p in pasted.papers] == ["123", "10.1000/x"]
    assert [(u.item, u.origin) for u in pasted.unreadable] == [("aspirin", "pasted item 2")]
    assert pasted.report().startswith("Not checked: 1 of 3 pasted items could not be read:")
    assert read_pasted_identifiers("123").report() == ""
    with pytest.raises(KnownPapersError, match="'aspirin' is not a PMID"):
        read_pasted_identifiers("aspirin")
