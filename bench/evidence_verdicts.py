"""Verdicts and choices from evidence, measured: multiple choice on the LitQA dev questions, yes / no /
maybe on PubMedQA, and the offline per-document stance on SciFact's labelled claim-abstract pairs.

One command, default settings::

    .venv/bin/python bench/evidence_verdicts.py [--store FILE] [--model FILE.gguf] [--pubmedqa-model N]

- LitQA dev (``../shared/data/fulltext/litqa/questions_dev.jsonl``, all 22 questions; the options are
  the ideal answer and its distractors in a fixed shuffled order): accuracy (right / all) and
  precision (right / answered), "insufficient" allowed, and seconds a question. Offline always; with
  ``--model`` (a GGUF, default the checked Qwen2.5-Coder-1.5B when present) also the model closed-book
  and the model with the evidence (the best 8 sentences of its top 10 passages, numbered): the model's
  own pick, and the answer as the app gives it after checking the pick against the cited sentence
  (``choose_with_model``); every quote shown is verified again on its page.
- PubMedQA (``../shared/data/literature/pubmedqa/ori_pqal.json``): yes / no / maybe accuracy of the
  offline heuristic on the abstracts' contexts (the conclusion, LONG_ANSWER, is not shown), tuned on
  odd PMIDs and reported on EVEN ones; the majority answer ("yes") beside it.
- SciFact (``../shared/data/literature/scifact``): per-document stance (supports / contradicts / not
  addressed) of the offline heuristic against the labels, on the test split (thresholds set on train).

``--store`` reuses a full-text store that holds the 40 LitQA PDFs (``bench/evidence.py`` makes one);
without it they are imported into a temporary one first. With a model, each question's choices are printed
as they come: the closed-book arm first for all questions (short prompts), then the arm with evidence (about
600 prompt tokens each; ``--model-timeout`` raises the 300 s a reply may take on a loaded machine);
``--choice-only`` leaves out PubMedQA and SciFact. ``--replies FILE`` keeps the model's replies and
``--replay FILE`` answers the same prompts with them, no model: the checks after the model measured again
(only prompts the recorded run asked can be answered). Last line: offline multiple-choice accuracy and
precision, PubMedQA even accuracy, and the model's accuracy gain from evidence when measured.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SHARED = REPO.parent / "shared" / "data"
LITQA = SHARED / "fulltext" / "litqa"
PUBMEDQA = SHARED / "literature" / "pubmedqa" / "ori_pqal.json"
SCIFACT = SHARED / "literature" / "scifact"
DEFAULT_GGUF = Path.home() / ".cache" / "kmds-desktop-test-models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def litqa_questions() -> list[dict]:
    """The dev questions with their options in a fixed shuffled order (seeded by the question id)."""
    out = []
    for line in (LITQA / "questions_dev.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        options = [q["ideal"], *q["distractors"]]
        random.Random(q["id"]).shuffle(options)
        out.append({**q, "options": options, "right": options.index(q["ideal"])})
    return out


def batch_embedder(texts: list[str]):
    """An ``embed`` that looks up vectors computed in one batch (thousands of short calls would measure
    call overhead, not the heuristic)."""
    from kmds_desktop.index.embeddings import encode

    unique = list(dict.fromkeys(texts))
    vectors = encode(unique)
    row = {text: i for i, text in enumerate(unique)}
    return lambda batch: vectors[[row[t] for t in batch]]


def letter(choice: int | None) -> str:
    """An option's letter as the prompts show it, or '-' for insufficient."""
    return "-" if choice is None else chr(65 + choice)


def accuracy_precision(results: list[tuple[int | None, int]]) -> tuple[float, float, int]:
    answered = [(c, r) for c, r in results if c is not None]
    right = sum(c == r for c, r in answered)
    return right / max(1, len(results)), right / max(1, len(answered)), len(answered)


class RecordedModel:
    """The model, its replies kept by prompt (``--replies``): a later ``--replay`` answers the same prompts
    with the same replies, so a change to the checks after the model is measured again without it."""

    def __init__(self, llm=None, replayed: dict[str, str] | None = None, keep: Path | None = None) -> None:
        self.llm, self.replies, self.keep = llm, dict(replayed or {}), keep

    def __call__(self, prompt: str) -> str:
        if self.llm is None:
            if prompt not in self.replies:
                raise SystemExit("--replay: a prompt the recorded run did not ask (the prompt or the "
                                 "sentences shown changed); measure with the model again")
            return self.replies[prompt]
        reply = self.llm(prompt)
        self.replies[prompt] = reply
        if self.keep is not None:  # after every reply: an interrupted run keeps what it measured
            self.keep.write_text(json.dumps(self.replies, indent=1), encoding="utf-8")
        return reply


def multiple_choice(store, llm=None, label: str = "") -> dict[str, tuple[float, float, int]]:
    import time

    from kmds_desktop.literature.evidence.quotes import verify_quote
    from kmds_desktop.literature.evidence.search import choice_query, search_passages
    from kmds_desktop.literature.evidence.verdict import (
        PASSAGES,
        choose_closed_book,
        choose_offline,
        choose_with_model,
    )

    rows: dict[str, list[tuple[int | None, int]]] = {"offline": []}
    seconds: dict[str, list[float]] = {"offline": []}
    questions = litqa_questions()
    hits_of = {}
    quotes = verified = 0

    def check(result) -> None:
        nonlocal quotes, verified
        if result.quote is None:
            return
        quotes += 1
        paper = next(p for p in store.papers() if (p.doi or Path(p.path).name) == result.label)
        verified += verify_quote(result.quote, lambda n: store.page_text(paper.id, n),
                                 result.pages[0]).pages == result.pages

    for q in questions:
        query = choice_query(q["question"], q["options"])  # what 'literature choose' searches with
        hits_of[q["id"]] = search_passages(store, query, PASSAGES)
        started = time.perf_counter()
        offline = choose_offline(store, q["question"], q["options"], hits_of[q["id"]])
        seconds["offline"].append(time.perf_counter() - started)
        rows["offline"].append((offline.choice, q["right"]))
        check(offline)
    if llm is not None:
        # Closed-book first (short prompts): its arm is whole early, and an interrupted run still compares
        # the two arms on the questions the slower with-evidence arm reached.
        for name in ("closed-book", "with evidence, the model's pick", "with evidence, as the app answers"):
            rows[name] = []
        seconds["closed-book"], seconds["with evidence, as the app answers"] = [], []
        for i, q in enumerate(questions):
            started = time.perf_counter()
            closed = choose_closed_book(q["question"], q["options"], llm)
            seconds["closed-book"].append(time.perf_counter() - started)
            rows["closed-book"].append((closed.choice, q["right"]))
            print(f"  {q['id'][:6]}: right {letter(q['right'])}; offline {letter(rows['offline'][i][0])}, "
                  f"closed-book {letter(closed.choice)}", flush=True)
        for q in questions:
            started = time.perf_counter()
            answered = choose_with_model(store, q["question"], q["options"], hits_of[q["id"]], llm,
                                         method=label)
            seconds["with evidence, as the app answers"].append(time.perf_counter() - started)
            check(answered)
            rows["with evidence, the model's pick"].append((answered.model_choice, q["right"]))
            rows["with evidence, as the app answers"].append((answered.choice, q["right"]))
            print(f"  {q['id'][:6]}: right {letter(q['right'])}; model {letter(answered.model_choice)} "
                  f"(sentence {answered.model_sentence}), answer {letter(answered.choice)}"
                  f"{' (' + '; '.join(answered.notes) + ')' if answered.notes else ''}", flush=True)
    out = {name: accuracy_precision(r) for name, r in rows.items()}
    for name, (acc, prec, answered_count) in out.items():
        timing = (f"; {sum(seconds[name]) / len(seconds[name]):.1f} s a question" if seconds.get(name)
                  else "")
        print(f"LitQA dev multiple choice, {name}{' (' + label + ')' if name != 'offline' else ''}: "
              f"accuracy {acc:.2f}, precision {prec:.2f} ({answered_count}/{len(rows[name])} answered)"
              f"{timing}")
    print(f"  quotes verified on their cited pages: {verified}/{quotes}")
    return out


def pubmedqa(limit_model: int = 0, llm=None) -> float:
    from kmds_desktop.literature.evidence.verdict import sentences, yes_no_offline

    data = json.loads(PUBMEDQA.read_text(encoding="utf-8"))
    embed = batch_embedder([t for v in data.values()
                            for t in (v["QUESTION"], *sentences(" ".join(v["CONTEXTS"])))])
    result = 0.0
    for split, parity in (("odd (development)", 1), ("EVEN (reported)", 0)):
        items = [(pmid, v) for pmid, v in data.items() if int(pmid) % 2 == parity]
        answers = [yes_no_offline(v["QUESTION"], " ".join(v["CONTEXTS"]), embed=embed) for _, v in items]
        truth = [v["final_decision"] for _, v in items]
        acc = sum(a == t for a, t in zip(answers, truth, strict=True)) / len(items)
        majority = Counter(truth).most_common(1)[0]
        print(f"PubMedQA {split}, {len(items)} questions: offline accuracy {acc:.3f} "
              f"(answers {dict(Counter(answers))}; majority '{majority[0]}' {majority[1] / len(items):.3f})")
        result = acc
    if llm is not None and limit_model:
        items = [(p, v) for p, v in sorted(data.items()) if int(p) % 2 == 0][:limit_model]
        right = 0
        for _, v in items:
            from kmds_desktop.literature.evidence.verdict import parse_json_reply

            prompt = (f"Question: {v['QUESTION']}\n\nAbstract:\n{' '.join(v['CONTEXTS'])}\n\n"
                      'Answer the question from the abstract. JSON only: {"answer": "yes" | "no" | "maybe"}')
            answer = str(parse_json_reply(llm(prompt)).get("answer", "")).lower()
            right += answer == v["final_decision"]
        print(f"PubMedQA EVEN, model on the first {len(items)}: accuracy {right / len(items):.3f}")
    return result


def scifact() -> None:
    from kmds_desktop.literature.evidence.verdict import (
        CONTRADICTS,
        NOT_ADDRESSED,
        SUPPORTS,
        Passage,
        judge_offline,
    )

    corpus = {}
    for line in (SCIFACT / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        corpus[doc["id"]] = doc["abstract"]
    claims = {}
    for line in (SCIFACT / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        claims[q["id"]] = q["text"]
    label_of = {"SUPPORT": SUPPORTS, "CONTRADICT": CONTRADICTS, "NOINFO": NOT_ADDRESSED}
    from kmds_desktop.literature.evidence.verdict import sentences

    qrels = (SCIFACT / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]
    pairs = [line.split("\t") for line in qrels]
    judged = {doc_id for _, doc_id, *_ in pairs if doc_id in corpus}
    embed = batch_embedder([*claims.values(), *(t for doc_id in judged for t in sentences(corpus[doc_id]))])
    for split in ("train", "test"):
        truth, guess = [], []
        for qid, doc_id, _, row_split, label in pairs:
            if row_split != split or doc_id not in corpus:
                continue
            text = corpus[doc_id]
            stance = judge_offline(claims[qid], [Passage(text, 1, 1)],
                                   lambda page, t=text: t if page == 1 else None, embed=embed)[0]
            truth.append(label_of[label])
            guess.append(stance)
        compared = list(zip(truth, guess, strict=True))
        acc = sum(a == b for a, b in compared) / max(1, len(truth))
        addressed_right = sum((a != NOT_ADDRESSED) == (b != NOT_ADDRESSED) for a, b in compared)
        polar = [(a, b) for a, b in compared if a != NOT_ADDRESSED and b != NOT_ADDRESSED]
        polar_right = sum(a == b for a, b in polar) / max(1, len(polar))
        print(f"SciFact {split}, {len(truth)} claim-abstract pairs: stance accuracy {acc:.3f}; "
              f"addressed-or-not "
              f"{addressed_right / max(1, len(truth)):.3f}; supports-vs-contradicts where both addressed "
              f"{polar_right:.3f} ({len(polar)} pairs); majority '{Counter(truth).most_common(1)[0][0]}' "
              f"{Counter(truth).most_common(1)[0][1] / max(1, len(truth)):.3f}")


def start_model(gguf: Path, work: Path, timeout: float = 300.0):
    """Serve the GGUF through the test server (Ollama's API over llama.cpp, as ``bench/llm_quality.py``
    does) and return ``(llm, stop)``."""
    import subprocess
    import threading

    from kmds_desktop.llm.ollama_backend import OllamaBackend

    log = work / "server.log"
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "support" / "ollama_llamacpp_server.py"),
                             "--model", str(gguf), "--name", "bench-model",
                             "--threads", str(os.cpu_count() or 2), "--ctx", "8192"],
                            stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline() if proc.stdout else ""),
                              daemon=True)
    reader.start()
    reader.join(600)

    def stop() -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    if not line or not line[0].startswith("LISTENING "):
        stop()
        raise SystemExit(f"the model server did not start: {log.read_text(errors='replace')[-2000:]}")
    backend = OllamaBackend(f"http://127.0.0.1:{int(line[0].split()[1])}", "bench-model", 0.0, timeout)
    return backend, stop


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path,
                        help="a full-text store holding the LitQA PDFs (skip the import)")
    parser.add_argument("--model", type=Path, default=None,
                        help="a GGUF to measure closed-book vs with evidence (default: the cached Qwen 1.5B "
                             "when present; 'none' to skip)")
    parser.add_argument("--pubmedqa-model", type=int, default=0, metavar="N",
                        help="also ask the model N even PubMedQA questions")
    parser.add_argument("--model-timeout", type=float, default=300.0, metavar="S",
                        help="seconds one model reply may take (a loaded 2-core machine needs more than "
                             "the default 300 for a prompt with five passages)")
    parser.add_argument("--replies", type=Path, metavar="FILE.json",
                        help="keep the model's replies here (prompt -> reply)")
    parser.add_argument("--replay", type=Path, metavar="FILE.json",
                        help="answer with the replies a --replies run kept, no model (the checks after "
                             "the model measured again)")
    parser.add_argument("--choice-only", action="store_true",
                        help="multiple choice only (no PubMedQA, no SciFact: their embedding takes minutes)")
    args = parser.parse_args()

    from kmds_desktop.index.embeddings import encode
    from kmds_desktop.literature.fulltext.importer import import_folder
    from kmds_desktop.literature.fulltext.store import FulltextStore

    encode(["warm the model"])
    work = Path(tempfile.mkdtemp(prefix="kmds-verdict-bench-"))
    if args.store:
        store = FulltextStore(args.store)
    else:
        store = FulltextStore(work / "fulltext.sqlite")
        import_folder(store, LITQA / "pdfs")
    gguf = args.model if args.model is not None else (DEFAULT_GGUF if DEFAULT_GGUF.exists() else None)
    if gguf is not None and str(gguf) == "none":
        gguf = None
    llm, stop = (None, None)
    if args.replay:
        llm = RecordedModel(replayed=json.loads(args.replay.read_text(encoding="utf-8")))
        gguf = Path(f"{args.replay.name} (replayed)")
    elif gguf is not None:
        served, stop = start_model(gguf, work, args.model_timeout)
        llm = RecordedModel(served, keep=args.replies)
    try:
        choice = multiple_choice(store, llm, label=gguf.name if gguf else "")
        pubmed = float("nan") if args.choice_only else pubmedqa(args.pubmedqa_model, llm)
    finally:
        if stop is not None:
            stop()
    if not args.choice_only:
        scifact()
    acc, prec, _ = choice["offline"]
    gain = ""
    if "closed-book" in choice:
        closed = choice["closed-book"][0]
        app = choice["with evidence, as the app answers"][0]
        own = choice["with evidence, the model's pick"][0]
        gain = (f"; model with evidence (as the app answers) vs closed-book: {100 * (app - closed):+.0f} "
                f"points (the model's own pick: {100 * (own - closed):+.0f})")
    print(f"multiple choice offline: accuracy {acc:.2f}, precision {prec:.2f}; "
          f"PubMedQA even: {pubmed:.3f}{gain}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
