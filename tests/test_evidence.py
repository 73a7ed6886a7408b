"""Evidence from the imported full texts: hybrid passage search with paper and page, the one quote
verifier (a quote not on its page refused, one running onto the next page citing both), offline
answers whose every quote is on its page, "do not answer" for weak evidence, Markdown, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fulltext import litqa_dir

from kmds_desktop.literature.evidence.answer import NO_ANSWER, extractive_answer
from kmds_desktop.literature.evidence.quotes import locate_quote, verify_quote
from kmds_desktop.literature.evidence.search import search_passages
from kmds_desktop.literature.fulltext.store import FulltextStore

PEG_QUESTION = ("I am designing peptide-guided LNPs for delivery to the retina, and am using PEG-maleimide "
                "to attach peptides to the surface of the LNP. What fraction of the total PEG replaced with "
                "PEG-Maleimide would show no transfection?")
PEG_KEY = "over 40% substitution with PEG-maleimide showed no detectable levels of transfection"


#: The first test imports the 40 shared PDFs (700 pages, real embeddings) once for the process
#: (``pdf_import`` in tests/support/fulltext.py): minutes on a busy two-core machine.
pytestmark = pytest.mark.timeout(1800)


def _paper(pdf_store: FulltextStore, file_name: str):
    return next(p for p in pdf_store.papers() if Path(p.path).name == file_name)


def test_a_question_finds_its_key_passage_with_paper_and_page(pdf_store) -> None:
    hits = search_passages(pdf_store, PEG_QUESTION, 5)
    holding = [h for h in hits if PEG_KEY in h.text]
    assert holding, [h.text[:80] for h in hits]
    hit = holding[0]
    assert hit.doi == "10.1126/sciadv.add4623"
    assert Path(hit.file).name == "sciadv.add4623.pdf"
    assert hit.start_page <= 5 <= hit.end_page
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))


def test_search_restricted_to_papers_stays_inside_them(pdf_store) -> None:
    slide_seq = _paper(pdf_store, "science.aaw1219.pdf")
    hits = search_passages(pdf_store, PEG_QUESTION, 5, paper_ids=[slide_seq.id])
    assert hits and {h.paper_id for h in hits} == {slide_seq.id}
    with pytest.raises(ValueError, match="question is empty"):
        search_passages(pdf_store, "  ", 5)


def test_the_verifier_refuses_a_quote_that_is_not_on_its_page(pdf_store) -> None:
    paper = _paper(pdf_store, "sciadv.add4623.pdf")

    def page_text(n: int) -> str | None:
        return pdf_store.page_text(paper.id, n)

    real = ("Formulations with over 40% substitution with PEG-maleimide showed no detectable levels of "
            "transfection")
    assert verify_quote(real, page_text, 5).pages == (5,)
    assert not verify_quote(real, page_text, 4).verified  # the right words, the wrong page
    altered = real.replace("40%", "20%")
    assert not verify_quote(altered, page_text, 5).verified
    assert not verify_quote("showed no transfection at all in any rodent retina", page_text, 5).verified
    assert not verify_quote(real, page_text, 99).verified
    # whitespace, line breaks and typographic hyphens do not count against a real quote
    rewrapped = real.replace(" with ", "\n with  ").replace("PEG-maleimide", "PEG\u2010maleimide")
    assert verify_quote(rewrapped, page_text, 5).verified
    # a quote that ends or starts inside a word says what the page does not ("no detectable levels of
    # transf"), and an exponent is not a number: "10⁵ cells" on a page is not "105 cells"
    assert not verify_quote(real[:-5], page_text, 5).verified
    assert not verify_quote(real[3:], page_text, 5).verified
    pages = {1: "Cells were seeded at 10\u2075 cells per well and the protein is inactive in them."}
    assert not verify_quote("seeded at 105 cells per well", pages.get, 1).verified
    assert verify_quote("seeded at 10\u2075 cells per well", pages.get, 1).verified
    assert not verify_quote("and the protein is in", pages.get, 1).verified


def test_a_quote_running_onto_the_next_page_cites_both(pdf_store) -> None:
    paper = _paper(pdf_store, "s00125-024-06103-w.pdf")
    page, following = pdf_store.page_text(paper.id, 6), pdf_store.page_text(paper.id, 7)
    tail = " ".join(page.split()[-6:])
    head = " ".join(following.split()[:6])

    def page_text(n: int) -> str | None:
        return pdf_store.page_text(paper.id, n)

    check = verify_quote(f"{tail} {head}", page_text, 6)
    assert check.verified and check.pages == (6, 7)
    assert locate_quote(head, page_text, 6, 7).pages == (7,)


def test_an_offline_answer_quotes_only_what_is_on_the_cited_pages(pdf_store) -> None:
    hits = search_passages(pdf_store, PEG_QUESTION, 10)
    answer = extractive_answer(pdf_store, PEG_QUESTION, hits)
    assert answer.answered and answer.quotes
    sources = {s.number: s for s in answer.sources}
    for quote in answer.quotes:
        source = sources[quote.source]
        paper = next(p for p in pdf_store.papers() if p.path == source.file)
        check = verify_quote(quote.text, lambda n, pid=paper.id: pdf_store.page_text(pid, n), source.pages[0])
        assert check.verified and check.pages == source.pages
        assert f"[{quote.source}]" in answer.text
    assert any(s.doi == "10.1126/sciadv.add4623" and 5 in s.pages for s in answer.sources)
    markdown = answer.markdown()
    assert "https://doi.org/10.1126/sciadv.add4623" in markdown
    assert f"> {answer.quotes[0].text}" in markdown


def test_weak_evidence_is_answered_with_do_not_answer(pdf_store) -> None:
    question = "How long should sourdough bread rise before baking?"
    answer = extractive_answer(pdf_store, question, search_passages(pdf_store, question, 10))
    assert not answer.answered and answer.quotes == [] and answer.sources == []
    assert answer.text == NO_ANSWER
    assert "below" in answer.notes[0]


def test_cli_evidence_and_answer_json_and_markdown(pdf_import, tmp_path, monkeypatch, capsys) -> None:
    from kmds_desktop import paths
    from kmds_desktop.cli import main

    monkeypatch.setenv("KMDS_DESKTOP_HOME", str(pdf_import.data_dir))
    paths.set_data_dir(None)
    assert main(["literature", "evidence", PEG_QUESTION, "--json", "--top", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["passages"]) == 3
    for passage in out["passages"]:
        assert passage["file"].endswith(".pdf") and passage["doi"]
        assert 1 <= passage["start_page"] <= passage["end_page"]
        assert len(passage["text"].split()) > 20
    assert any(PEG_KEY in p["text"] for p in out["passages"])
    target = tmp_path / "answer.md"
    assert main(["literature", "answer", PEG_QUESTION, "--json", "--markdown", str(target)]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["answered"] is True and answer["quotes"] and answer["sources"]
    assert "## I am designing peptide-guided LNPs" in target.read_text(encoding="utf-8")
    assert litqa_dir().is_dir()


def test_a_page_that_claims_an_enormous_size_is_drawn_within_the_pixel_bound(tmp_path) -> None:
    """The page's size is the file's word: a MediaBox of 100,000 points at the default scale would be
    a bitmap of 30 gigapixels, allocated in the window's process. It is drawn smaller instead."""
    import pypdfium2 as pdfium

    from kmds_desktop.app.evidence_pages import MAX_PAGE_PIXELS, render_page

    path = tmp_path / "huge.pdf"
    pdf = pdfium.PdfDocument.new()
    pdf.new_page(100_000, 100_000).close()
    pdf.save(str(path))
    pdf.close()
    image = render_page(path, 1)
    assert 0 < image.width * image.height <= MAX_PAGE_PIXELS
    assert abs(image.width - image.height) <= 1  # drawn whole, in proportion
