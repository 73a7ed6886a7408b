"""A cited page as an image with the cited text's rectangles, and the questions asked (kept in the data
folder), for the window's Evidence view.

Why render with pypdfium2 and not QtPdf: pypdfium2 already reads the PDFs (a permissive licence, in
the bundle today); QtPdf is in PySide6-Addons, tens of MB the app does not ship otherwise. Why the
highlight is found here and not in the view: the view must not import pypdfium2 (views talk to the
application layer only), and finding text on a page is the PDF's business.

How the highlight is found: the stored passage is the *cleaned* text (hyphenation repaired, ligatures
spelled out, running lines dropped), so pdfium's own search for it fails. Both sides are reduced to
their letters and digits (NFKC-folded, lower-cased), each page character keeping its index; windows
of :data:`WINDOW` characters of the wanted text are looked up in order on the page, and the span from
the first window found to the last one is the highlight. pdfium then gives that span's rectangles, one
per line, in page points, turned into the image's pixels here.

Rendering opens the file directly (in the window's process, on a worker), and only when its bytes are
still those the import read in the bounded child without harm (the SHA-256 is compared first: a few
milliseconds); the child only read the text, so the page is drawn with at most
:data:`MAX_PAGE_PIXELS` whatever size the file claims. One page renders in tens of milliseconds.
"""

from __future__ import annotations

import json
import os
import threading
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kmds_desktop.literature.fulltext.importer import file_sha256

#: Letters and digits per lookup window of the wanted text (long enough not to match by chance).
WINDOW = 24
#: Pixels per PDF point of the rendered page (a 612-point page becomes 1071 pixels wide).
DEFAULT_SCALE = 1.75
#: The most pixels a page is drawn with (64 MB of BGRx): an A0 poster at the default scale fits
#: nearly whole; a page whose file claims a size of 100,000 points is drawn smaller, not allocated.
MAX_PAGE_PIXELS = 16_000_000
#: Questions the history keeps, newest first.
HISTORY_LIMIT = 100
HISTORY_FILE = "questions.json"

_render_lock = threading.Lock()  # pdfium is not thread-safe: one render at a time in this process


@dataclass(frozen=True)
class PageImage:
    """One rendered page: RGBX pixels (``stride`` bytes a row) and the highlight's rectangles
    ``(x, y, width, height)`` in those pixels."""

    paper_id: int
    page_no: int
    page_count: int
    width: int
    height: int
    stride: int
    pixels: bytes
    highlights: list[tuple[float, float, float, float]] = field(default_factory=list)
    label: str = ""


def _folded(text: str) -> tuple[str, list[int]]:
    """``text``'s letters and digits, NFKC-folded and lower-cased, with each one's index in ``text``."""
    out: list[str] = []
    where: list[int] = []
    for index, char in enumerate(text):
        for piece in unicodedata.normalize("NFKC", char).lower():
            if piece.isalnum():
                out.append(piece)
                where.append(index)
    return "".join(out), where


def find_span(page_chars: str, wanted: str, window: int = WINDOW) -> tuple[int, int] | None:
    """``(first, last)`` page-character indices of ``wanted`` on the page (see the module), or None."""
    page, where = _folded(page_chars)
    target, _ = _folded(wanted)
    if not page or not target:
        return None
    if len(target) <= window:
        at = page.find(target)
        return (where[at], where[at + len(target) - 1]) if at >= 0 else None
    first = last = None
    cursor = 0
    starts = list(range(0, len(target) - window + 1, window // 2))
    if starts[-1] != len(target) - window:
        starts.append(len(target) - window)  # the last window ends on the wanted text's last letter
    for start in starts:
        at = page.find(target[start : start + window], cursor)
        if at < 0:
            continue
        if first is None:
            first = at
        last = at + window - 1
        cursor = at + 1
    if first is None or last is None:
        return None
    return where[first], where[last]


def render_page(path: str | Path, page_no: int, highlight: str = "", *, scale: float = DEFAULT_SCALE,
                paper_id: int = 0, label: str = "") -> PageImage:
    """Page ``page_no`` (1-based) of the PDF at ``path`` as pixels, with ``highlight``'s rectangles.

    Raises ``ValueError`` with what to do when the file is gone or has no such page."""
    # why: pypdfium2 loads on first use, not at start-up
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    source = Path(path)
    if not source.is_file():
        raise ValueError(f"{source} is no longer there; import its folder again to find it where it went")
    with _render_lock:
        try:
            pdf = pdfium.PdfDocument(str(source))
        except pdfium.PdfiumError as err:
            raise ValueError(f"{source.name} cannot be opened ({err}); import it again") from None
        try:
            count = len(pdf)
            if not 1 <= page_no <= count:
                raise ValueError(f"{source.name} has {count} pages, not a page {page_no}; import it again")
            page = pdf[page_no - 1]
            width_pt, height_pt = page.get_size()
            # a page's size is the file's word: a hostile MediaBox of 100,000 points would ask for a
            # bitmap of gigapixels, so the page is drawn no larger than MAX_PAGE_PIXELS
            area = max(width_pt, 1.0) * max(height_pt, 1.0)
            scale = min(scale, (MAX_PAGE_PIXELS / area) ** 0.5)
            bitmap = page.render(scale=scale, force_bitmap_format=pdfium_c.FPDFBitmap_BGRx,
                                 rev_byteorder=True)
            pixels = bytes(bitmap.buffer)
            width, height, stride = bitmap.width, bitmap.height, bitmap.stride
            rects: list[tuple[float, float, float, float]] = []
            if highlight.strip():
                textpage = page.get_textpage()
                chars = textpage.count_chars()
                text = "".join(chr(pdfium_c.FPDFText_GetUnicode(textpage.raw, i)) for i in range(chars))
                span = find_span(text, highlight)
                if span is not None:
                    first, last = span
                    for index in range(textpage.count_rects(first, last - first + 1)):
                        left, bottom, right, top = textpage.get_rect(index)
                        rects.append((left * scale, (height_pt - top) * scale, (right - left) * scale,
                                      (top - bottom) * scale))
                textpage.close()
            page.close()
        finally:
            pdf.close()
    return PageImage(paper_id, page_no, count, width, height, stride, pixels, rects, label)


class QuestionHistory:
    """The questions asked in the Evidence view, newest first, in ``questions.json`` beside the store
    (the data folder's ``fulltext/``), so they outlive the window as the search history does."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / HISTORY_FILE

    def questions(self) -> list[str]:
        try:
            data: Any = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []  # none yet, or a damaged file: start again rather than fail the view
        return [q for q in data.get("questions", []) if isinstance(q, str)] if isinstance(data, dict) else []

    def add(self, question: str) -> list[str]:
        """Put ``question`` first (once), keep :data:`HISTORY_LIMIT`, write atomically; the new list."""
        question = " ".join(question.split())
        kept = [question] + [q for q in self.questions() if q != question]
        kept = kept[:HISTORY_LIMIT]
        staging = self.path.with_suffix(".json.tmp")
        staging.write_text(json.dumps({"questions": kept}, ensure_ascii=False, indent=1), encoding="utf-8")
        os.replace(staging, self.path)
        return kept


def render_paper_page(session: Any, paper_id: int, page_no: int, highlight: str = "",
                      scale: float = DEFAULT_SCALE) -> PageImage:
    """Page ``page_no`` of the store's paper ``paper_id`` (``session``: an
    :class:`~kmds_desktop.app.evidence.EvidenceSession`), ``highlight`` marked."""
    paper = session.store.paper(paper_id)
    if paper is None:
        raise ValueError("that paper is no longer in the store; run the search again")
    try:
        unchanged = file_sha256(Path(paper.path)) == paper.sha256
    except OSError:
        unchanged = False
    if not unchanged:  # only bytes the bounded reader has read safely are opened in this process
        raise ValueError(f"{Path(paper.path).name} has changed or moved since it was imported; import its "
                         "folder again to see its pages")
    return render_page(paper.path, page_no, highlight, scale=scale, paper_id=paper_id,
                       label=f"{paper.title or paper.label}")
