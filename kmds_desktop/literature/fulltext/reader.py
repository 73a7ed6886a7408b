"""Reading a PDF in a child process bounded in time and memory, so a hostile or broken file cannot
take the app down.

Why a process and not a thread: pdfium is C code. A file built to loop, to allocate without end or
to crash the parser would hang or kill the process it runs in; in a child, the parent notices (no
answer in :data:`TIMEOUT_S`, or the pipe closes), names the file with a reason, kills the child and
starts a fresh one for the next file. The child limits its own address space (``RLIMIT_AS``, POSIX)
to :data:`MEMORY_LIMIT_MB`, so an allocation storm ends in a failed allocation there and not in the
machine's swap.

Protocol: one JSON line per request on the child's stdin (``{"path": ...}``), one JSON line per
answer on its stdout: ``{"ok": true, "pages": [...], "doi", "title", "metadata"}`` or
``{"ok": false, "code": ..., "reason": ...}``. The child reads, cleans (:mod:`.cleaning`) and
identifies (:mod:`.identify`) the file, so the parent receives only text.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kmds_desktop.literature.fulltext.cleaning import clean_pages
from kmds_desktop.literature.fulltext.identify import find_doi, find_title

#: The internal command of a frozen build (``kmds-desktop _pdf-reader``); a checkout runs the module.
COMMAND = "_pdf-reader"
#: Seconds one file may take in the child (700 pages of the shared set take about 3 s in all).
TIMEOUT_S = 120.0
#: The child's address-space limit. Python with pdfium maps about 300 MB before reading anything.
MEMORY_LIMIT_MB = 2048
#: A document whose pages average fewer visible characters than this has no text layer worth the
#: name: a scan (a cover page or a figure page alone still has a caption or a running line).
SCANNED_CHARS_PER_PAGE = 25
#: How far from the end "%%EOF" must be seen: a file cut short (an interrupted download) lacks it.
TAIL_BYTES = 4096
#: Pages a document may have: a paper or a thesis has hundreds; a file of more is refused, not read
#: (its text would be sent to the app whole and embedded passage by passage).
MAX_PAGES = 2000
#: Characters kept of one page's text: a dense page has about 10,000; a page claiming more is cut.
MAX_PAGE_CHARS = 100_000

# Reason codes, each with its own message (the import lists them per file).
NOT_PDF = "not-pdf"
TRUNCATED = "truncated"
ENCRYPTED = "encrypted"
BROKEN = "broken"
SCANNED = "scanned"
TOO_LONG = "too-long"
TIMEOUT = "timeout"
CRASHED = "crashed"


def _failure(code: str, reason: str) -> dict[str, Any]:
    return {"ok": False, "code": code, "reason": reason}


def _first_page_lines(textpage: Any, text: str) -> list[tuple[str, float]]:
    """Page one's lines with the largest font size of their characters (for the title)."""
    import pypdfium2.raw as pdfium_c  # why: pypdfium2 loads on first use, not at start-up

    count = textpage.count_chars()
    if count != len(text):  # the character indices do not line up with the text: no sizes
        return [(line, 0.0) for line in text.splitlines()]
    lines: list[tuple[str, float]] = []
    start = 0
    for line in text.split("\r\n"):
        end = start + len(line)
        sizes = [pdfium_c.FPDFText_GetFontSize(textpage.raw, i) for i in range(start, min(end, count))]
        lines.append((line, max(sizes, default=0.0)))
        start = end + 2
    return lines


def read_pdf(path: str) -> dict[str, Any]:
    """Read one PDF into cleaned page texts, its DOI and title, or a failure with its reason.

    Runs in the child process (and directly in tests of the reading itself)."""
    import pypdfium2 as pdfium  # only the reader's child process loads pdfium

    try:
        with open(path, "rb") as fh:
            head = fh.read(1024)
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            tail = fh.read()
    except OSError as err:
        return _failure(BROKEN, f"cannot read the file ({err.strerror or err}); check it is readable")
    if b"%PDF-" not in head:
        return _failure(NOT_PDF, "not a PDF (no %PDF- header); remove it from the folder or export it as PDF")
    if b"%%EOF" not in tail:
        return _failure(TRUNCATED, "truncated: the file ends before the PDF does (an interrupted download?); "
                                   "download it again")
    try:
        pdf = pdfium.PdfDocument(path)
    except pdfium.PdfiumError as err:
        if "password" in str(err).lower():
            return _failure(ENCRYPTED, "encrypted: the PDF needs a password; save an unlocked copy and "
                                       "import that")
        return _failure(BROKEN, f"broken: the PDF reader cannot open it ({err}); download it again")
    try:
        metadata = {k: str(v) for k, v in pdf.get_metadata_dict(skip_empty=True).items()}
        raw_pages: list[str] = []
        first_lines: list[tuple[str, float]] = []
        if len(pdf) > MAX_PAGES:
            return _failure(TOO_LONG, f"too long: {len(pdf):,} pages (at most {MAX_PAGES:,} are read); "
                                      "import the chapters you need as files of their own")
        for index in range(len(pdf)):
            try:
                page = pdf[index]
                textpage = page.get_textpage()
                text = textpage.get_text_range()
                if index == 0:
                    first_lines = _first_page_lines(textpage, text)
                textpage.close()
                page.close()
            except pdfium.PdfiumError:  # one unreadable page: an empty page, the others still count
                text = ""
            raw_pages.append(text[:MAX_PAGE_CHARS])
    finally:
        pdf.close()
    if not raw_pages:
        return _failure(BROKEN, "broken: the PDF has no pages; download it again")
    visible = sum(len("".join(text.split())) for text in raw_pages)
    if visible < SCANNED_CHARS_PER_PAGE * len(raw_pages):
        return _failure(SCANNED, "no text layer (a scan or images of pages); run OCR on it (e.g. ocrmypdf) "
                                 "and import the result")
    pages = clean_pages(raw_pages)
    return {
        "ok": True,
        "pages": pages,
        "doi": find_doi(metadata, [t.replace("\r\n", "\n") for t in raw_pages]),
        "title": find_title(metadata, first_lines),
        "metadata": metadata,
    }


def _limit_memory(megabytes: int) -> None:
    try:
        import resource  # why: POSIX only
    except ImportError:  # pragma: no cover - Windows: the time bound still holds
        return
    limit = megabytes * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is the memory bound biting: a MemoryError, or a library that could not be
    mapped under it ("failed to map segment", "Cannot allocate memory") when pdfium loads."""
    if isinstance(err, (MemoryError, ImportError)):  # pdfium's library not mapped under the bound
        return True
    text = str(err).lower()
    return any(sign in text for sign in ("cannot allocate memory", "failed to map", "out of memory"))


def serve(argv: list[str]) -> int:
    """The child's loop: a request line in, an answer line out, until stdin closes."""
    memory_mb = int(argv[0]) if argv else MEMORY_LIMIT_MB
    _limit_memory(memory_mb)
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            answer = read_pdf(str(request["path"]))
        except Exception as err:  # noqa: BLE001 - any reader failure is this file's reason, not the child's end
            detail = f"{type(err).__name__}: {err}"
            if _out_of_memory(err):
                answer = _failure(CRASHED, f"the PDF reader could not read it within {memory_mb} MB; it is "
                                           f"skipped ({detail})")
            else:
                answer = _failure(BROKEN, f"broken: the PDF reader failed on it ({detail})")
        out.write(json.dumps(answer, ensure_ascii=False) + "\n")
        out.flush()
    return 0


def launch_command(memory_mb: int) -> list[str]:
    """How to start the child: the app's internal command in a frozen build, else this module."""
    if getattr(sys, "frozen", False):
        return [sys.executable, COMMAND, str(memory_mb)]
    return [sys.executable, "-m", "kmds_desktop.literature.fulltext.reader", str(memory_mb)]


@dataclass
class PdfReader:
    """The parent's handle on the child: :meth:`read` one file at a time; a child that hangs or dies
    is replaced, and the file it was on gets that as its reason. Use as a context manager."""

    timeout_s: float = TIMEOUT_S
    memory_mb: int = MEMORY_LIMIT_MB
    _process: subprocess.Popen[str] | None = field(default=None, init=False, repr=False)
    _answers: queue.Queue[str | None] = field(default_factory=queue.Queue, init=False, repr=False)

    def __enter__(self) -> PdfReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> subprocess.Popen[str]:
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        process = subprocess.Popen(
            launch_command(self.memory_mb), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, encoding="utf-8", env=env,
        )
        answers: queue.Queue[str | None] = queue.Queue()
        self._answers = answers

        def pump(stream: Any = process.stdout) -> None:
            for line in stream:
                answers.put(line)
            answers.put(None)  # the child is gone

        threading.Thread(target=pump, name="pdf-reader-pipe", daemon=True).start()
        self._process = process
        return process

    def read(self, path: Path) -> dict[str, Any]:
        """The child's answer for ``path``, or a failure naming a hang (:data:`TIMEOUT`) or a crash."""
        process = self._process if self._process is not None and self._process.poll() is None else None
        if process is None:
            process = self._start()
        assert process.stdin is not None  # noqa: S101 - narrows: started with a pipe
        try:
            process.stdin.write(json.dumps({"path": str(path)}) + "\n")
            process.stdin.flush()
            line = self._answers.get(timeout=self.timeout_s)
        except queue.Empty:
            self._stop()
            return _failure(TIMEOUT, f"the PDF reader took longer than {self.timeout_s:g} s on it; it is "
                                     "skipped (a damaged or hostile file?)")
        except OSError:
            line = None
        if line is None:
            self._stop()
            return _failure(CRASHED, "the PDF reader crashed on it (or it needed more than "
                                     f"{self.memory_mb} MB); it is skipped")
        return json.loads(line)

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            process.kill()
            process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass

    def close(self) -> None:
        """End the child: stdin closed lets it finish; one that does not is killed."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()
            process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait(timeout=10)


if __name__ == "__main__":  # pragma: no cover - the child process
    sys.exit(serve(sys.argv[1:]))
