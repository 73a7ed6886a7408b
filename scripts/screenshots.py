"""Save PNGs of the app's main states into docs/screenshots/ (run by ``make screenshots`` under xvfb-run).

The window is 1600x1000 (the screen ``make screenshots`` gives Xvfb) and laid out as the app lays it
out; nothing is resized or fitted for the picture. States:

- ``kb-open.png``: the demo KB (the user's copy in the data folder) with an observation selected;
- ``answer-with-citations.png``: an offline answer, the question still in its box, a citation
  clicked so the KB browser shows the cited record;
- ``literature-review.png``: the literature search given the window's width (Wide), the review
  table after generation (the question as a semantic row, three queries from the built-in keyword
  model, plus a hand-written one), every column readable: run, model, query, validity, matches, IDs,
  unique, error;
- ``literature-results.png``: the same after Run selected: per-row IDs and unique counts, the
  fused documents best rank first with the rows that found each ("found by"), one document's detail;
- ``evidence.png``: the Evidence dock over three shared PDFs, a question's passages and answer, a
  choice between options made and its quote's page shown (see :func:`evidence_shot`);
- ``error.png``: a file that is not a KB opened: the message bar says why and the open KB stays;
- ``screening.png``, ``screening-scores.png``, ``screening-flow.png``, ``screening-agreement.png``: the
  screening window on 400 CF records (bm25s rank for a CF question, the records' vectors from the shipped
  embedding model) after 30 decisions taken from the CF judgements: the record the model picked with
  why it ranks high, the Scores tab (embedding similarity, labelled, as with no LLM), the PRISMA flow,
  and a second reviewer's file compared (``--screening`` shoots these alone, in about a minute).

Everything the app writes goes to ``bench/.data/screenshots/`` (git-ignored); the literature corpus
is imported there once. Runs on the real display given by ``DISPLAY`` (xvfb) or offscreen when there
is none.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "screenshots"
DATA = ROOT / "bench" / ".data" / "screenshots"
SHARED = ROOT.parent / "shared" / "data"
os.environ["KMDS_DESKTOP_HOME"] = str(DATA / "home")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(ROOT))


def wait_for(predicate, timeout_s: float = 300) -> None:
    from PySide6.QtWidgets import QApplication

    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the app did not reach the expected state in time")
        QApplication.processEvents()
        time.sleep(0.01)


def settle(seconds: float = 0.4) -> None:
    from PySide6.QtWidgets import QApplication

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        QApplication.processEvents()
        time.sleep(0.01)


def shoot(window, name: str) -> Path:
    settle()
    path = OUT / name
    window.grab().save(str(path), "PNG")
    print(f"saved {path.relative_to(ROOT)}")
    return path


def main() -> int:
    from PySide6.QtWidgets import QApplication

    from kmds_desktop.config import LiteratureSettings, Settings
    from kmds_desktop.literature import open_database
    from kmds_desktop.ui.shell.main_window import MainWindow
    from kmds_desktop.ui.shell.menus import app_icon

    OUT.mkdir(parents=True, exist_ok=True)
    import shutil

    # A first session's pictures: no search history or demo-KB copy left by an earlier run (the
    # imported corpus and the index are kept, they only save time).
    for name in ("history", "demo", "settings.json"):
        target = DATA / "home" / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    app = QApplication.instance() or QApplication(sys.argv)
    app.setWindowIcon(app_icon())

    db = open_database(settings=LiteratureSettings())
    if int(db.status().get("documents") or 0) == 0:
        print("importing the SciFact and PubMed sample corpora (first run only)…", flush=True)
        db.import_files([SHARED / "literature" / "scifact" / "corpus.jsonl",
                         SHARED / "literature" / "pubmed_sample" / "corpus.jsonl"])
    from kmds_desktop.literature.store.vectors import embed_documents, vector_status

    if vector_status(db)["needing"] != 0:  # the window embeds after an import; done here once, up front
        print("embedding the documents for semantic rows (first run only)…", flush=True)
        embed_documents(db)

    settings = Settings()
    settings.llm.backend = "offline"
    qg = settings.query_generation
    qg.multi_model_enabled = True
    qg.models = ["builtin:keywords"]
    qg.queries_per_model = 3
    window = MainWindow(settings, settings_path=DATA / "home" / "settings.json",
                        literature_kwargs={"database": db}, probe_llm=True)
    window.move(0, 0)
    window.resize(1600, 1000)
    window.show()

    loaded = []
    window.kb_loaded.connect(loaded.append)
    from kmds_desktop import paths

    window.open_kb(paths.demo_kb_path())  # what a new user sees first: 2 workflows, 42 observations
    warm = window.warm_up()  # as run_app does at start-up: the index process loads the model
    wait_for(lambda: bool(loaded) and window.index_follower.is_ready(window.kb)
             and (warm is None or warm.done))
    kb = window.kb
    window.browser.select_observation(kb.observations[3].iri)
    wait_for(lambda: "documents" in window.lit_status.text() or "unavailable" in window.lit_status.text(), 60)
    shoot(window, "kb-open.png")

    answered = []
    window.ask.answer_finished.connect(answered.append)
    window.ask.question.setPlainText("What data quality problems were found in the penguin data?")
    window.ask.ask()
    wait_for(lambda: bool(answered))
    window.ask.question.moveCursor(window.ask.question.textCursor().MoveOperation.End)  # no highlight
    window.ask.activate_citation(1)
    shoot(window, "answer-with-citations.png")

    # An error: a file that is not a knowledge base. The message bar says why; the demo KB stays open.
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="kmds-"))
    bad = folder / "meeting-notes.xml"
    bad.write_text("<notes><note>not a knowledge base</note></notes>\n", encoding="utf-8")
    before = window.messages.current
    window.open_kb(bad)
    wait_for(lambda: window.messages.current is not None and window.messages.current is not before, 60)
    wait_for(lambda: not window.jobs.is_busy("kb.load"), 60)
    shoot(window, "error.png")
    window.messages.dismiss()
    shutil.rmtree(folder, ignore_errors=True)

    panel = window.literature
    panel.wide_button.click()  # the review gets the window's width, as a user does for this work
    panel.question.setText("Does vitamin D supplementation reduce cancer risk or mortality?")
    job = panel.generate()
    wait_for(lambda: job is None or job.done, 120)
    panel.add_query("vitamin & cancer & (risk | mortality)")
    wait_for(lambda: all(r.validity not in ("checking", "unchecked") for r in panel.review.rows()), 60)
    wait_for(lambda: not window.jobs.is_busy("literature.check"), 60)
    settle(1.0)
    shoot(window, "literature-review.png")

    run = panel.run_selected()
    wait_for(lambda: run is None or run.done, 120)
    settle(1.0)
    if panel.documents.rowCount():
        panel.select_document(0)
    shoot(window, "literature-results.png")
    evidence_shot(window)

    window.jobs.shutdown()
    window._force_close = True
    window.close()
    db.close()
    screening_shots()
    return 0


def evidence_shot(window) -> None:
    """``evidence.png``: the Evidence dock beside the question box (KB browser and literature panel
    hidden, as when reading pages) over three shared PDFs: a question's passages and offline answer, then
    a choice between options made offline and its quote's page shown marked."""
    from kmds_desktop.app.verdicts import Judge

    papers = DATA / "papers"
    papers.mkdir(parents=True, exist_ok=True)
    for name in ("pnas.0403760101.pdf", "14712598.2019.1685489.pdf", "j.bpj.2021.11.1119.pdf"):
        if not (papers / name).exists():
            (papers / name).symlink_to(SHARED / "fulltext" / "litqa" / "pdfs" / name)
    window.literature.wide_button.click()  # undo Wide
    window.browser.setVisible(False)
    window.literature.setVisible(False)
    window.evidence_dock.show()
    view, imported = window.evidence, []
    view.with_database = None  # the pictures' literature database gets no records made from PDFs
    view.judge_factory = lambda: Judge(None, "offline")
    view.papers_changed.connect(imported.append)
    view.import_pdfs(papers)
    wait_for(lambda: bool(imported))
    view.questions.line.setText("How many Gly-X-Y repeats are in the collagenous domain of mCTRP1?")
    view.ask(view.questions.question())  # the passages and the cited answer fill their panes
    wait_for(lambda: view.answer.answer is not None and not window.jobs.is_busy())
    view.choice.options.setPlainText("14\n2\n15\n24")
    view.choice.choose_button.click()
    wait_for(lambda: view.choice.choice is not None and not window.jobs.is_busy())
    view.show_page(view.choice.paper_id, view.choice.choice.pages[0], view.choice.choice.quote or "")
    wait_for(lambda: view.page.page_no == view.choice.choice.pages[0] and not window.jobs.is_busy())
    shoot(window, "evidence.png")


def screening_shots() -> None:
    """The screening window's states (see the module docstring), on its own data folder."""
    import collections
    import json
    import shutil

    import bm25s
    from PySide6.QtWidgets import QApplication

    from kmds_desktop.app.screening import ScreeningSession
    from kmds_desktop.app.screening_scores import score_by_similarity
    from kmds_desktop.index.embeddings import encode
    from kmds_desktop.literature.screening.decisions import DecisionStore
    from kmds_desktop.literature.screening.records import ScreeningRecord
    from kmds_desktop.ui.screening.window import ScreeningWindow

    OUT.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication(sys.argv)
    cf = SHARED / "literature" / "cf"
    docs = [json.loads(line) for line in open(cf / "corpus.jsonl", encoding="utf-8")]
    question = next(json.loads(line)["text"] for line in open(cf / "queries.jsonl", encoding="utf-8")
                    if str(json.loads(line)["id"]) == "3")
    relevant: dict[str, set[str]] = collections.defaultdict(set)
    for line in list(open(cf / "qrels.tsv", encoding="utf-8"))[1:]:
        qid, doc_id, *_ = line.rstrip("\n").split("\t")
        relevant[qid].add(doc_id)
    texts = [f"{d.get('title') or ''}\n{d.get('abstract') or ''}" for d in docs]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    hits, _ = retriever.retrieve(bm25s.tokenize([question], stopwords="en", show_progress=False),
                                 k=400, show_progress=False)
    pool = [docs[int(j)] for j in hits[0]]
    folder = DATA / "screening"
    shutil.rmtree(folder, ignore_errors=True)
    store = DecisionStore(folder / "screening.sqlite3")
    store.create_review("cf-3", name=question, question=question)
    session = ScreeningSession(store, "cf-3", background=False)  # each decision's order trained at once
    session.add_records([
        ScreeningRecord(source="cf", external_id=d["id"], title=d.get("title") or "",
                        abstract=d.get("abstract") or "", rank=n, year=d.get("year"),
                        found_by=["#1 row 1: salivary & glycoprotein & cystic & fibrosis"])
        for n, d in enumerate(pool, start=1)
    ], origin="#1 CF search", per_row={"row 1: bm25s top 400": len(pool)})
    vectors = encode([f"{d.get('title') or ''}\n{d.get('abstract') or ''}" for d in pool])
    session.add_vectors({("cf", d["id"]): v for d, v in zip(pool, vectors, strict=True)},
                        question_vector=encode([question])[0])
    for _ in range(30):
        rec = session.current
        if rec.external_id in relevant["3"]:
            session.include()
        else:
            session.exclude(session.review.reasons[len(session.decisions) % 3])
    window = ScreeningWindow(session)
    window.move(0, 0)
    window.resize(1600, 1000)
    window.show()
    window.include_words.setText("sputum, mucus")
    window.exclude_words.setText("mice, rats")
    window._keywords_changed()
    window.why_button.setChecked(True)
    settle(1.0)
    shoot(window, "screening.png")
    score_by_similarity(session)
    window.tabs.setCurrentWidget(window.scores)
    window.scores.status.setText("Scored by embedding similarity (no LLM configured here): 400 records")
    window.scores.render()
    shoot(window, "screening-scores.png")
    window.tabs.setCurrentWidget(window.flow)
    shoot(window, "screening-flow.png")
    theirs = folder / "reviewer-b.csv"
    session.export_decisions(theirs, "Dr B")
    lines = theirs.read_text(encoding="utf-8").splitlines()
    swap = {",include,": ",exclude,", ",exclude,": ",include,"}
    flipped = [lines[0]] + [
        next((line.replace(a, b) for a, b in swap.items() if a in line), line) if n % 7 == 3 else line
        for n, line in enumerate(lines[1:])
    ] + ["cf-3,Dr B,cf,999999,,,not in this review,include,,,2024-01-01", "cf-3,Dr B,broken"]
    theirs.write_text("\n".join(flipped) + "\n", encoding="utf-8")
    window.tabs.setCurrentWidget(window.agreement)
    window.agreement.import_decisions(theirs)
    shoot(window, "screening-agreement.png")
    window.close()
    app.processEvents()


if __name__ == "__main__":
    if "--screening" in sys.argv[1:]:
        screening_shots()
        sys.exit(0)
    sys.exit(main())
