"""Full texts in: the shared PDFs read page by page in the bounded child process, their DOIs found by
the app, bad PDFs named with their own reasons while the rest imports, pages cleaned, passages with
page ranges, incremental re-imports, and the CLI's JSON."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from support.fulltext import (
    ENCRYPTED_NAME,
    SCANNED_NAME,
    TRUNCATED_NAME,
    link_pdfs,
    litqa_dir,
    make_scanned_pdf,
    manifest,
)

from kmds_desktop.literature.fulltext import cleaning, reader
from kmds_desktop.literature.fulltext.importer import import_folder
from kmds_desktop.literature.fulltext.store import FulltextStore

#: The first test imports the 40 shared PDFs (700 pages, real embeddings) once for the process
#: (``pdf_import`` in tests/support/fulltext.py): minutes on a busy two-core machine.
pytestmark = pytest.mark.timeout(1800)


def test_every_shared_pdf_imports_with_the_doi_it_prints(pdf_import, pdf_store) -> None:
    expected = manifest()
    outcomes = {Path(f.path).name: f for f in pdf_import.report.files}
    for name, entry in expected.items():
        outcome = outcomes[name]
        assert outcome.action == "imported", (name, outcome.reason)
        assert outcome.pages == entry["pages"], name
        assert outcome.passages > 0, name
    found = {name: outcomes[name].doi for name in expected}
    wrong = {name: doi for name, doi in found.items()
             if doi is not None and doi != expected[name]["doi"].lower()}
    assert wrong == {}
    assert sum(doi is not None for doi in found.values()) >= 38
    assert all(doi is not None for doi in found.values())  # the app finds every one of the 40 here
    assert pdf_store.counts()["papers"] == 40


def test_each_bad_pdf_gets_a_reason_of_its_own_and_the_rest_imports(pdf_import, pdf_store) -> None:
    outcomes = {Path(f.path).name: f for f in pdf_import.report.files}
    assert outcomes[SCANNED_NAME].code == reader.SCANNED
    assert "OCR" in outcomes[SCANNED_NAME].reason
    assert outcomes[ENCRYPTED_NAME].code == reader.ENCRYPTED
    assert "password" in outcomes[ENCRYPTED_NAME].reason
    assert outcomes[TRUNCATED_NAME].code == reader.TRUNCATED
    assert "download it again" in outcomes[TRUNCATED_NAME].reason
    for name in (SCANNED_NAME, ENCRYPTED_NAME, TRUNCATED_NAME):
        assert outcomes[name].action == "failed"
        assert "\n" not in outcomes[name].reason
    assert pdf_import.report.count("imported") == 40
    assert pdf_store.counts()["failed"] == 3


def test_a_hung_or_oversized_reader_is_replaced_and_named(tmp_path: Path) -> None:
    pdf = litqa_dir() / "pdfs" / "j.bpj.2021.11.1119.pdf"
    with reader.PdfReader(timeout_s=0.01) as slow:
        answer = slow.read(pdf)
    assert answer["ok"] is False and answer["code"] == reader.TIMEOUT
    with reader.PdfReader(memory_mb=16) as starved:  # not even the interpreter fits in 16 MB
        answer = starved.read(pdf)
    assert answer["ok"] is False and answer["code"] == reader.CRASHED, answer
    with reader.PdfReader() as healthy:
        first = healthy.read(litqa_dir() / "pdfs" / "nonexistent.pdf")
        second = healthy.read(pdf)
    assert first["ok"] is False and first["code"] == reader.BROKEN
    assert second["ok"] is True and second["doi"] == "10.1016/j.bpj.2021.11.1119"


def test_a_document_of_more_pages_than_a_book_is_refused_with_its_reason(tmp_path: Path) -> None:
    """A file claiming thousands of pages would be read whole, sent to the app and embedded: it is
    refused in the child with a reason of its own."""
    import pypdfium2 as pdfium

    path = tmp_path / "endless.pdf"
    pdf = pdfium.PdfDocument.new()
    for _ in range(reader.MAX_PAGES + 1):
        pdf.new_page(200, 200).close()
    pdf.save(str(path))
    pdf.close()
    with reader.PdfReader() as child:
        answer = child.read(path)
    assert answer["ok"] is False and answer["code"] == reader.TOO_LONG
    assert f"{reader.MAX_PAGES + 1:,} pages" in answer["reason"], answer


def test_pages_lose_running_headers_reference_lists_line_numbers_and_pdfium_marks(pdf_store) -> None:
    papers = {Path(p.path).name: p for p in pdf_store.papers()}
    diabetologia = papers["s00125-024-06103-w.pdf"]
    pages = [pdf_store.page_text(diabetologia.id, n) for n in range(1, diabetologia.page_count + 1)]
    assert not any("Diabetologia (2024) 67:940" in page for page in pages)
    assert "surface expression of hetS118L" in " ".join(pages[6].split())  # page 7 keeps its findings
    assert not any(re.search(r"(?m)^References$", page) for page in pages)
    for paper in papers.values():
        for n in range(1, paper.page_count + 1):
            text = pdf_store.page_text(paper.id, n)
            assert "\ufffe" not in text and not re.search("[\ufb00-\ufb06\x00-\x08]", text), (paper.path, n)
    preprint = papers["2024.04.08.588603.pdf"]
    page = pdf_store.page_text(preprint.id, 8)
    numbered = [line for line in page.splitlines() if re.match(r"\d{3}\s", line)]
    assert len(numbered) < 3  # the printed line numbers are gone
    assert "For regions not associated with the phenotypes" in " ".join(page.split())


def test_passages_carry_page_ranges_and_offsets_into_their_pages(pdf_store) -> None:
    sizes = []
    for paper in pdf_store.papers():
        if paper.status != "ok":
            continue
        for passage in pdf_store.passages_of(paper.id):
            assert 1 <= passage.start_page <= passage.end_page <= paper.page_count
            pages = range(passage.start_page, passage.end_page + 1)
            texts = [pdf_store.page_text(paper.id, n) for n in pages]
            if len(texts) == 1:
                source = texts[0][passage.start_offset : passage.end_offset]
            else:  # from the start offset on the first page, over whole pages, to the end offset on the last
                source = "\n".join([texts[0][passage.start_offset :], *texts[1:-1],
                                     texts[-1][: passage.end_offset]])
            assert " ".join(source.split()) == passage.text
            sizes.append(len(passage.text.split()))
    within = sum(60 <= n <= 320 for n in sizes) / len(sizes)
    assert within > 0.9, within
    passages = [p for paper in pdf_store.papers() for p in pdf_store.passages_of(paper.id)]
    assert any(p.start_page != p.end_page for p in passages)


def test_cleaning_repairs_hyphenation_ligatures_and_running_lines() -> None:
    words = cleaning.vocabulary(["transport is specific", "self-assembly"])
    assert cleaning.repair_hyphenation("trans-\nport and self-\nassembly of CD122-\nbiased", words) == (
        "transport and self-assembly of CD122-biased")
    repaired = cleaning.repair_ligature_gaps("a speci fi c signal, of course", words)
    assert repaired == "a specific signal, of course"
    assert cleaning.normalise_page("inhibi\ufffe\r\ntors \ufb01x 37\x01C") == "inhibitors fix 37 C"
    bodies = ["Apples fall far", "Bears sleep long", "Cats purr softly", "Dogs bark loudly", "Eels swim deep",
              "Foxes run fast"]
    pages = [[f"{i} Journal of Tests (2024)" if i % 2 else f"Journal of Tests (2024) {i}", body]
             for i, body in enumerate(bodies, start=1)]
    assert [lines for lines in cleaning.remove_running_lines(pages)] == [[body] for body in bodies]


def test_reimport_skips_unchanged_relinks_moved_and_removes_deleted(tmp_path: Path, data_home: Path) -> None:
    folder = link_pdfs(["j.bpj.2021.11.1119.pdf", "science.aaw1219.pdf", "pnas.0403760101.pdf"],
                       tmp_path / "papers")
    seen: list[str] = []
    with FulltextStore(tmp_path / "store.sqlite") as store:
        first = import_folder(store, folder, progress=lambda done, total, message: seen.append(message))
        assert first.count("imported") == 3 and seen
        passages_before = store.counts()["passages"]
        again = import_folder(store, folder)
        assert again.count("unchanged") == 3 and again.count("imported") == 0
        assert store.counts()["passages"] == passages_before
        (folder / "moved").mkdir()
        shutil.move(folder / "science.aaw1219.pdf", folder / "moved" / "slide-seq.pdf")
        (folder / "pnas.0403760101.pdf").unlink()
        third = import_folder(store, folder)
        assert third.count("moved") == 1 and third.count("unchanged") == 1
        assert [Path(p).name for p in third.removed] == ["pnas.0403760101.pdf"]
        names = sorted(Path(p.path).name for p in store.papers())
        assert names == ["j.bpj.2021.11.1119.pdf", "slide-seq.pdf"]
        assert store.counts()["passages"] < passages_before
        assert store.lexical("adiponectin paralogs", 5) == []  # the deleted paper's passages left the index


def test_cli_imports_a_folder_with_json_per_file(tmp_path: Path, data_home: Path, capsys) -> None:
    from kmds_desktop.cli import main

    folder = link_pdfs(["j.bpj.2021.11.1119.pdf"], tmp_path / "in")
    make_scanned_pdf(litqa_dir() / "pdfs" / "j.bpj.2021.11.1119.pdf", folder / "scan.pdf")
    assert main(["literature", "fulltext", "import", str(folder), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by_name = {Path(f["path"]).name: f for f in out["files"]}
    assert by_name["j.bpj.2021.11.1119.pdf"]["action"] == "imported"
    assert by_name["j.bpj.2021.11.1119.pdf"]["doi"] == "10.1016/j.bpj.2021.11.1119"
    assert by_name["scan.pdf"]["code"] == "scanned"
    assert (data_home / "fulltext" / "fulltext.sqlite").is_file()
    assert main(["literature", "fulltext", "status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["paper_count"] == 1 and status["failed"] == 1
    assert main(["literature", "fulltext", "import", str(tmp_path / "missing")]) == 1
    assert "is not a folder" in capsys.readouterr().err


@pytest.mark.parametrize("page", ["a" * 40_000, "f" * 40_000 + "1", "\n" * 40_000 + "x"])
def test_cleaning_a_page_of_one_character_repeated_keeps_it_as_it_is(page: str) -> None:
    """A hostile page of one letter (or blank line) repeated: the hyphenation, ligature and DOI-line
    patterns each took seconds on 40,000 of them; the page comes back unchanged, with no DOI."""
    from kmds_desktop.literature.fulltext.identify import find_doi

    assert "".join(cleaning.clean_pages([page])[0].split()) == "".join(page.split())
    assert find_doi({}, [page]) is None
