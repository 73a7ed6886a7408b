"""Full-text test data: the shared LitQA PDFs imported once per test process, and PDFs made to fail.

``shared_import`` is cached so that tests which are not fixtures' users (the window's tests, which
copy the store) share the one import with the fixtures ``pdf_import`` and ``pdf_store`` (registered by
conftest.py); 700 pages with real embeddings are worth doing once.
The bad PDFs are made here from real ones: a scan (page one rendered to an image, no text layer), an
encrypted file (a standard security handler whose empty password does not open it), and a download
cut in half.
"""

from __future__ import annotations

import atexit
import functools
import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

LITQA = (Path(__file__).resolve().parents[2].parent / "shared" / "data" / "fulltext" / "litqa").resolve()
SCANNED_NAME = "scanned copy.pdf"
ENCRYPTED_NAME = "locked.pdf"
TRUNCATED_NAME = "half download.pdf"


def litqa_dir() -> Path:
    """The shared LitQA folder; fails loudly when missing."""
    assert (LITQA / "pdfs").is_dir(), f"shared full-text data missing: {LITQA}"
    return LITQA


def manifest() -> dict[str, dict[str, Any]]:
    """file name -> manifest entry (DOI, pages, sha256): for checking, never for the import."""
    lines = (litqa_dir() / "manifest.jsonl").read_text(encoding="utf-8").splitlines()
    return {entry["file"]: entry for entry in map(json.loads, lines)}


def make_scanned_pdf(source: Path, target: Path) -> Path:
    """A one-page PDF that is an image of ``source``'s first page: what a scanner produces."""
    import pypdfium2 as pdfium

    original = pdfium.PdfDocument(source)
    page = original[0]
    width, height = page.get_size()
    bitmap = page.render(scale=0.5)
    scan = pdfium.PdfDocument.new()
    new_page = scan.new_page(width, height)
    image = pdfium.PdfImage.new(scan)
    image.set_bitmap(bitmap)
    image.set_matrix(pdfium.PdfMatrix().scale(width, height))
    new_page.insert_obj(image)
    new_page.gen_content()
    scan.save(target)
    return target


def make_encrypted_pdf(target: Path) -> Path:
    """A PDF whose trailer names a standard security handler the empty password does not open (an
    incremental update adds the /Encrypt dictionary), as a password-protected download is."""
    import pypdfium2 as pdfium

    plain = pdfium.PdfDocument.new()
    plain.new_page(200, 200)
    staging = target.with_suffix(".plain")
    plain.save(staging)
    data = staging.read_bytes()
    staging.unlink()
    previous = int(re.findall(rb"startxref\s+(\d+)", data)[-1])
    ids = re.findall(rb"/ID\s*(\[[^\]]*\])", data)[-1]
    offset = len(data)
    encrypt = (b"5 0 obj\n<</Filter/Standard/V 1/R 2/Length 40/P -4/O<" + b"11" * 32 + b">/U<"
               + b"22" * 32 + b">>>\nendobj\n")
    xref_at = offset + len(encrypt)
    tail = (b"xref\n5 1\n%010d 00000 n \ntrailer\n<</Size 6/Root 1 0 R/Info 3 0 R/Prev %d/Encrypt 5 0 R"
            b"/ID%s>>\nstartxref\n%d\n%%%%EOF\n" % (offset, previous, ids, xref_at))
    target.write_bytes(data + encrypt + tail)
    return target


def make_truncated_pdf(source: Path, target: Path) -> Path:
    """The first half of ``source``'s bytes: an interrupted download."""
    data = source.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    return target


def link_pdfs(names: list[str], folder: Path) -> Path:
    """Copies of the named shared PDFs in ``folder`` (copies: tests move and delete them)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(litqa_dir() / "pdfs" / name, folder / name)
    return folder


@dataclass(frozen=True)
class SharedImport:
    data_dir: Path  # a data folder whose fulltext store holds the import (for the CLI)
    folder: Path
    store_path: Path
    report: Any


@functools.cache
def shared_import() -> SharedImport:
    """The 40 shared PDFs (links) and the three bad ones, imported once into a store in a data folder
    of their own."""
    from kmds_desktop.literature.fulltext.importer import import_folder
    from kmds_desktop.literature.fulltext.store import FILE_NAME, FulltextStore

    root = Path(tempfile.mkdtemp(prefix="kmds-fulltext-test-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    folder = root / "downloads"
    (folder / "nested").mkdir(parents=True)
    for pdf in sorted((litqa_dir() / "pdfs").glob("*.pdf")):
        (folder / pdf.name).symlink_to(pdf)
    source = litqa_dir() / "pdfs" / "s00125-024-06103-w.pdf"
    make_scanned_pdf(source, folder / "nested" / SCANNED_NAME)
    make_encrypted_pdf(folder / ENCRYPTED_NAME)
    make_truncated_pdf(source, folder / TRUNCATED_NAME)
    data_dir = root / "data"
    store_path = data_dir / "fulltext" / FILE_NAME
    with FulltextStore(store_path) as store:
        report = import_folder(store, folder)
    return SharedImport(data_dir, folder, store_path, report)


@pytest.fixture()
def pdf_import() -> SharedImport:
    """The shared import (made on first use, then reused by every test of the process)."""
    return shared_import()


@pytest.fixture()
def pdf_store(pdf_import: SharedImport):
    """The shared import's store, opened for one test."""
    from kmds_desktop.literature.fulltext.store import FulltextStore

    with FulltextStore(pdf_import.store_path) as opened:
        yield opened
