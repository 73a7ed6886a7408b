"""Evidence from full texts, measured on the LitQA dev questions (``../shared/data/fulltext/litqa``).

One command, default settings::

    .venv/bin/python bench/evidence.py

It imports the 40 shared PDFs into a fresh store (a temporary folder) as the app does, then for the
19 dev questions whose key passage was located (``key_passage_page`` not null) reports:

- key-passage recall@1 and @5: a ranked passage counts when it holds the key passage (fuzzy partial
  ratio >= 90: rapidfuzz's ``partial_ratio`` when installed, else the same alignment with difflib),
  searched with the question alone (``literature evidence``) and with the question and its options
  (what ``literature choose`` searches with: :func:`~kmds_desktop.literature.evidence.search.choice_query`);
- page right: the first passage holding the key passage has the key page in its page range, and the
  offline answer cites the key page of the right paper;
- quotes verified: every quote of every answer checked again on its cited page(s) (must be 100 %),
  and the quotes the answers dropped;
- the evidence threshold: the best passage's similarity for the dev questions and for off-topic ones;
- import pages per second, and the ratio to the bare floor: pypdfium2's text of every page in this
  process plus a bare ``model.encode`` of the same passages;
- warm evidence-search latency (the median of a second search of each question).

Last line: ``key-passage recall@5: X (question), Z (with its options); import / bare floor: Y``.
``--store FILE`` reuses an existing import (the import figures are then left out).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LITQA = REPO.parent / "shared" / "data" / "fulltext" / "litqa"
OFF_TOPIC = [
    "What is the capital of France?",
    "How long should sourdough bread rise before baking?",
    "Who won the 2018 FIFA World Cup?",
    "Which programming language is best for building websites?",
    "What interest rate did the central bank set last year?",
]


def _partial_ratio_difflib(short: str, long: str) -> float:
    """fuzzywuzzy's partial ratio: the best ratio of ``short`` against windows of ``long`` aligned
    on their matching blocks (0-100)."""
    if len(short) > len(long):
        short, long = long, short
    if not short:
        return 0.0
    matcher = difflib.SequenceMatcher(None, short, long, autojunk=False)
    best = 0.0
    for i, j, _ in matcher.get_matching_blocks():
        start = max(0, j - i)
        window = long[start : start + len(short)]
        ratio = difflib.SequenceMatcher(None, short, window, autojunk=False).ratio()
        best = max(best, ratio)
        if best >= 0.995:
            break
    return 100.0 * best


try:
    from rapidfuzz import fuzz as _fuzz

    def partial_ratio(a: str, b: str) -> float:
        return float(_fuzz.partial_ratio(a, b))

    FUZZY = "rapidfuzz"
except ImportError:
    partial_ratio = _partial_ratio_difflib
    FUZZY = "difflib"


def holds(passage: str, key: str) -> bool:
    """Whether ``passage`` contains ``key`` (fuzzy >= 90). A passage holding under 70 % of the key's
    words cannot reach 90 and is passed over without the (slow, with difflib) alignment."""
    key = " ".join(key.split()).lower()
    passage = passage.lower()
    words = set(re.findall(r"\w+", key))
    if len(words & set(re.findall(r"\w+", passage))) < 0.7 * len(words):
        return False
    return partial_ratio(key, passage) >= 90


def bare_floor(pdfs: list[Path], passages: list[str]) -> float:
    """Seconds for pypdfium2's text of every page here plus a bare encode of the same passages."""
    import pypdfium2 as pdfium

    from kmds_desktop.index.embeddings import ENCODE_BATCH_SIZE, get_model

    started = time.perf_counter()
    for path in pdfs:
        pdf = pdfium.PdfDocument(path)
        for page in pdf:
            page.get_textpage().get_text_range()
        pdf.close()
    extraction = time.perf_counter() - started
    model = get_model()
    started = time.perf_counter()
    model.encode(passages, batch_size=ENCODE_BATCH_SIZE, normalize_embeddings=True, show_progress_bar=False)
    return extraction + time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="reuse this store (skip the import)")
    args = parser.parse_args()

    from kmds_desktop.index.embeddings import encode
    from kmds_desktop.literature.evidence.answer import extractive_answer
    from kmds_desktop.literature.evidence.quotes import verify_quote
    from kmds_desktop.literature.evidence.search import choice_query, search_passages
    from kmds_desktop.literature.fulltext.importer import import_folder
    from kmds_desktop.literature.fulltext.store import FulltextStore

    encode(["warm the model"])  # model loading is not part of any figure
    pdfs = sorted((LITQA / "pdfs").glob("*.pdf"))
    import_line = ""
    ratio = float("nan")
    if args.store:
        store = FulltextStore(args.store)
    else:
        folder = Path(tempfile.mkdtemp(prefix="kmds-evidence-bench-"))
        store = FulltextStore(folder / "fulltext.sqlite")
        started = time.perf_counter()
        result = import_folder(store, LITQA / "pdfs")
        seconds = time.perf_counter() - started
        texts = [p.text for paper in store.papers() for p in store.passages_of(paper.id)]
        floor = bare_floor(pdfs, texts)
        ratio = seconds / floor
        import_line = (f"import: {result.pages_read} pages, {len(texts)} passages in {seconds:.1f} s = "
                       f"{result.pages_read / seconds:.1f} pages/s; bare floor {floor:.1f} s; "
                       f"ratio {ratio:.2f}")

    questions = [json.loads(line) for line in (LITQA / "questions_dev.jsonl").read_text().splitlines()]
    located = [q for q in questions if q.get("key_passage_page") is not None]
    paper_of = {Path(p.path).name: p for p in store.papers()}
    at1 = at5 = page_right = cited_right = 0
    with_options = {"at1": 0, "at5": 0, "page": 0}
    shown = verified = dropped = 0
    best_dev: list[float] = []
    latencies: list[float] = []
    for q in located:
        hits = search_passages(store, q["question"], 10)
        started = time.perf_counter()
        search_passages(store, q["question"], 10)
        latencies.append((time.perf_counter() - started) * 1000)
        best_dev.append(max(h.similarity for h in hits))
        paper = paper_of[q["file"]]
        found = [i for i, h in enumerate(hits[:5])
                 if h.paper_id == paper.id and holds(h.text, q["key_passage"])]
        option_hits = search_passages(store, choice_query(q["question"], [q["ideal"], *q["distractors"]]), 5)
        option_found = [h for h in option_hits if h.paper_id == paper.id and holds(h.text, q["key_passage"])]
        with_options["at1"] += bool(option_found and option_found[0] is option_hits[0])
        with_options["at5"] += bool(option_found)
        with_options["page"] += bool(option_found and option_found[0].start_page <= q["key_passage_page"]
                                     <= option_found[0].end_page)
        at1 += bool(found and found[0] == 0)
        at5 += bool(found)
        if found:
            hit = hits[found[0]]
            page_right += hit.start_page <= q["key_passage_page"] <= hit.end_page
        answer = extractive_answer(store, q["question"], hits)
        dropped += sum(int(n.split()[0]) for n in answer.notes if "dropped" in n)
        sources = {s.number: s for s in answer.sources}
        cited_right += any(Path(s.file).name == q["file"] and q["key_passage_page"] in s.pages
                           for s in answer.sources)
        for quote in answer.quotes:
            shown += 1
            source = sources[quote.source]
            paper_id = paper_of[Path(source.file).name].id
            check = verify_quote(quote.text, lambda n, pid=paper_id: store.page_text(pid, n), source.pages[0])
            verified += check.verified and check.pages == source.pages
    off_topic = [max(h.similarity for h in search_passages(store, q, 10)) for q in OFF_TOPIC]
    n = len(located)
    print(f"dev questions with a located key passage: {n} of {len(questions)}; fuzzy match: {FUZZY} >= 90")
    print(f"key-passage recall@1: {at1 / n:.2f}  recall@5: {at5 / n:.2f}")
    print(f"page right (first passage holding the key passage): {page_right / n:.2f}; "
          f"answer cites the key page: {cited_right / n:.2f}")
    print(f"with its options (as 'literature choose' searches): recall@1 {with_options['at1'] / n:.2f}  "
          f"recall@5: {with_options['at5'] / n:.2f}  page right: {with_options['page'] / n:.2f}")
    print(f"quotes verified: {verified}/{shown} = {100 * verified / max(1, shown):.0f}%; "
          f"dropped by the verifier: {dropped}")
    print(f"best-passage similarity: dev {min(best_dev):.2f}-{max(best_dev):.2f}, off-topic "
          f"{min(off_topic):.2f}-{max(off_topic):.2f}")
    print(f"warm evidence search: median {statistics.median(latencies):.0f} ms, max {max(latencies):.0f} ms")
    if import_line:
        print(import_line)
    print(f"key-passage recall@5: {at5 / n:.2f} (question), {with_options['at5'] / n:.2f} (with its "
          f"options); import / bare floor: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
