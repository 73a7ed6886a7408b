"""Semantic and hypothetical rows, reciprocal rank fusion and re-ranking, on the real PostgreSQL
(pgvector) with the real bundled model; the LLM is the fake Ollama server through the real client."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.fake_ollama import ModelScript

from kmds_desktop.cli import main
from kmds_desktop.config import QueryGenerationSettings, RetrievalSettings
from kmds_desktop.index.embeddings import encode
from kmds_desktop.literature import QueryAgent
from kmds_desktop.literature.retrieval.fusion import reciprocal_rank_fusion, rerank_by_similarity
from kmds_desktop.literature.retrieval.semantic import (
    HYPOTHETICAL_MAX_TOKENS,
    SearchRow,
    clean_abstract,
    similarities_to_question,
)
from kmds_desktop.literature.store.vectors import embed_documents


def test_rrf_orders_by_summed_reciprocal_ranks_and_keeps_found_by():
    ids, scores, found_by = reciprocal_rank_fusion([[1, 2, 3], [3, 1], [4]], k=60)
    assert scores[1] == pytest.approx(1 / 61 + 1 / 62) and scores[3] == pytest.approx(1 / 63 + 1 / 61)
    assert ids == [1, 3, 4, 2]  # agreement first; alone, a first rank beats a second one
    assert found_by == {1: [0, 1], 2: [0], 3: [0, 1], 4: [2]}
    weighted, _, _ = reciprocal_rank_fusion([[1, 2, 3], [3, 1], [4]], k=60, weights=[1, 1, 3])
    assert weighted[0] == 4
    # the constant matters: with a small k the head of one list outweighs agreement lower down
    assert reciprocal_rank_fusion([[5, 6, 0, 7], [8, 9, 10, 7]], k=1)[0][:2] == [5, 8]
    assert reciprocal_rank_fusion([[5, 6, 0, 7], [8, 9, 10, 7]], k=1000)[0][0] == 7
    with pytest.raises(ValueError, match="k must be at least 1"):
        reciprocal_rank_fusion([[1]], k=0)


def test_rerank_mixes_fused_order_with_similarity():
    fused = [1, 2, 3, 4]
    sims = {1: 0.1, 2: 0.5, 3: 0.9}
    assert rerank_by_similarity(fused, sims, weight=0.0) == fused
    assert rerank_by_similarity(fused, sims, weight=1.0) == [3, 2, 1, 4]  # 4 has no similarity: last


def test_clean_abstract_strips_labels_and_fences():
    reply = "```\nTitle: X\n**Abstract:** Vitamin D supplementation reduced fractures in older adults.\n```"
    assert clean_abstract(reply) == "Vitamin D supplementation reduced fractures in older adults."


def _sample(literature_data: Path, tmp_path: Path, n: int, skip: int = 0) -> tuple[Path, list[dict]]:
    records = []
    with open(literature_data / "scifact" / "corpus.jsonl", encoding="utf-8") as fh:
        for number, line in enumerate(fh):
            if number >= skip:
                records.append(json.loads(line))
            if len(records) == n:
                break
    path = tmp_path / f"sample-{skip}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path, records


@pytest.fixture()
def embedded_sample(pg_empty_database, literature_data, tmp_path):
    path, records = _sample(literature_data, tmp_path, 24)
    pg_empty_database.import_files([path])
    assert embed_documents(pg_empty_database).embedded == 24
    ids = {e: i for e, i in pg_empty_database.run(
        lambda c: c.execute("SELECT external_id, id FROM document").fetchall())}
    return pg_empty_database, records, ids


def test_semantic_row_runs_beside_tsquery_rows_with_its_own_statistics(embedded_sample):
    db, records, ids = embedded_sample
    target = records[11]
    sentence = target["title"]
    agent = QueryAgent(db, retrieval=RetrievalSettings(rerank=False))
    result = agent.run_reviewed_queries(["cell | protein", SearchRow(sentence, "semantic")], max_rows=10,
                                        question=sentence)
    assert agent.retrieval.fusion_k == 20 and agent.retrieval.semantic_weight == 3.0
    text_row, semantic_row = result.queries
    assert (text_row.kind, semantic_row.kind) == ("tsquery", "semantic")
    assert semantic_row.ok and semantic_row.ids_returned == 10 and semantic_row.matches == 24
    assert semantic_row.ids[0] == ids[target["id"]]
    assert semantic_row.best_similarity > semantic_row.last_similarity
    assert result.fusion == "rrf"
    # found-by keeps which rows found each document; the fused order is reciprocal rank fusion
    expected, _, found_by = reciprocal_rank_fusion([text_row.ids, semantic_row.ids], k=20, weights=[1, 3])
    assert result.ids == expected and result.found_by == found_by
    assert 1 in result.found_by[ids[target["id"]]]
    assert result.queries_for(ids[target["id"]])[-1] == sentence


def test_rerank_uses_stored_vectors_and_computes_missing_ones(embedded_sample, literature_data, tmp_path):
    db, records, ids = embedded_sample
    late, late_records = _sample(literature_data, tmp_path, 5, skip=100)
    db.import_files([late])  # imported after embedding: no stored vector
    by_external = dict(db.run(lambda c: c.execute("SELECT external_id, id FROM document").fetchall()))
    new_ids = [by_external[r["id"]] for r in late_records]
    question = late_records[0]["title"]
    sims = similarities_to_question(db, encode([question])[0], [ids[records[0]["id"]], *new_ids],
                                    model_name="all-MiniLM-L6-v2")
    assert set(sims) == {ids[records[0]["id"]], *new_ids}
    assert max(sims, key=sims.get) == new_ids[0] and sims[new_ids[0]] > 0.6
    # the vectors computed on demand are kept: the semantic row now finds those documents too
    from kmds_desktop.literature.store.vectors import nearest_ids, stored_vectors

    kept = stored_vectors(db, new_ids)
    assert set(kept) == set(new_ids)
    assert np.allclose(kept[new_ids[0]], encode([_text_of(db, new_ids[0])])[0], atol=1e-4)
    assert new_ids[0] in [i for i, _ in nearest_ids(db, encode([question])[0], 5)]

    agent = QueryAgent(db, retrieval=RetrievalSettings(rerank=True, rerank_weight=1.0))
    words = " | ".join(w for w in question.lower().replace(",", " ").split() if w.isalpha() and len(w) > 4)
    result = agent.run_reviewed_queries([words, SearchRow(question, "semantic")], max_rows=20,
                                        question=question)
    assert result.fusion == "rrf+rerank"
    order = sorted(result.ids, key=lambda i: -similarities_to_question(
        db, encode([question])[0], [i], model_name="all-MiniLM-L6-v2")[i])
    assert result.ids == order  # weight 1: similarity alone decides


def test_hypothetical_row_from_the_llm(embedded_sample, fake_ollama):
    db, records, ids = embedded_sample
    target = records[5]
    fake_ollama.models["writer"] = ModelScript(replies=[
        f"Abstract: {target['abstract'][:600]}"])
    settings = QueryGenerationSettings(models=["writer"], ollama_host=fake_ollama.url, timeout_s=10)
    agent = QueryAgent(db, settings, retrieval=RetrievalSettings(rerank=False))
    rows = agent.semantic_rows("What does this study find?")
    assert [r.kind for r in rows] == ["semantic", "hypothetical"]
    assert rows[1].text.startswith(target["abstract"][:40])
    # the abstract is asked for with a token limit, so a model that repeats itself cannot hold the search
    written = fake_ollama.completion_requests()[-1].body
    assert written["options"]["num_predict"] == HYPOTHETICAL_MAX_TOKENS
    result = agent.run_reviewed_queries(rows, max_rows=5)
    assert result.queries[1].kind == "hypothetical" and result.queries[1].ids[0] == ids[target["id"]]
    # without an LLM model there is no hypothetical row
    offline = QueryAgent(db, QueryGenerationSettings(), retrieval=RetrievalSettings())
    assert [r.kind for r in offline.semantic_rows("What does this study find?")] == ["semantic"]


def test_evaluate_command_reports_recall_and_ndcg_per_row_type(pg_empty_database, literature_data, tmp_path,
                                                              capsys, data_home):
    db = pg_empty_database
    scifact = literature_data / "scifact"
    with open(scifact / "queries.jsonl", encoding="utf-8") as lines:
        claims = [json.loads(line) for line in lines]
    train = [c for c in claims if c["split"] == "train"][:4]
    with open(scifact / "qrels.tsv", encoding="utf-8") as lines:
        qrels_lines = list(lines)
    wanted = {c["id"] for c in train}
    header, judged = qrels_lines[0], [ln for ln in qrels_lines[1:] if ln.split("\t")[0] in wanted]
    relevant = {ln.split("\t")[1] for ln in judged}
    corpus = []
    with open(scifact / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            if record["id"] in relevant or len(corpus) < 12:
                corpus.append(record)
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus), encoding="utf-8")
    db.import_files([tmp_path / "corpus.jsonl"])
    embed_documents(db)
    queries, qrels = tmp_path / "q.jsonl", tmp_path / "q.tsv"
    queries.write_text("".join(json.dumps(c) + "\n" for c in train), encoding="utf-8")
    qrels.write_text(header + "".join(judged), encoding="utf-8")

    assert main(["literature", "evaluate", "--queries", str(queries), "--qrels", str(qrels),
                 "--split", "train", "--dsn", db.dsn, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["questions"] == 4 and list(data["measures"]) == ["fulltext", "semantic", "fused"]
    # every document of this small database is within the first 100 by meaning: full recall
    assert data["measures"]["semantic"]["R@100"] == pytest.approx(1.0)
    assert 0.3 < data["measures"]["semantic"]["nDCG@10"] <= 1.0
    assert all(0.0 <= v["nDCG@10"] <= 1.0 and 0.0 <= v["R@100"] <= 1.0 for v in data["measures"].values())
    assert main(["literature", "evaluate", "--queries", str(queries), "--qrels", str(qrels),
                 "--rows", "semantic", "--dsn", db.dsn]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["channel", "nDCG@10", "R@100"] and "4 judged questions" in out[0]
    assert [line.split()[0] for line in out[1:]] == ["semantic", "fused"]
    # bad input: one clear line, exit 2
    assert main(["literature", "evaluate", "--queries", str(queries), "--qrels", str(tmp_path / "none.tsv"),
                 "--dsn", db.dsn]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read judgements file") and "Traceback" not in err
    assert main(["literature", "evaluate", "--queries", str(queries), "--qrels", str(qrels),
                 "--rows", "magic", "--dsn", db.dsn]) == 1
    assert "unknown row type(s) magic" in capsys.readouterr().err


def test_cli_search_with_semantic_rows(embedded_sample, capsys, data_home):
    db, records, ids = embedded_sample
    question = records[2]["title"]
    assert main(["literature", "search", question, "--semantic", "--rerank", "--max-rows", "5",
                 "--dsn", db.dsn, "--json"]) == 0
    log = json.loads(capsys.readouterr().out)
    kinds = [q["kind"] for q in log["queries"]]
    assert kinds[-1] == "semantic" and set(kinds[:-1]) == {"tsquery"}
    assert log["queries"][-1]["provenance"]["row_type"] == "semantic"
    assert log["fusion"] == "rrf+rerank" and ids[records[2]["id"]] in log["merged_ids"][:3]
    semantic_index = len(kinds) - 1
    top = next(d for d in log["documents"] if d["id"] == ids[records[2]["id"]])
    assert semantic_index in top["found_by"]

    # default: the database has vectors, so the round adds the question as a semantic row, first (as
    # the window's round does)
    assert main(["literature", "search", question, "--max-rows", "3", "--dsn", db.dsn, "--json"]) == 0
    queries = json.loads(capsys.readouterr().out)["queries"]
    assert [q["kind"] for q in queries][0] == "semantic" and queries[0]["model"] == "[semantic] question"

    assert main(["literature", "search", question, "--no-generate", "--semantic", "--no-rerank",
                 "--max-rows", "3", "--dsn", db.dsn]) == 0
    captured = capsys.readouterr()
    assert "semantic" in captured.err and "documents with vectors" in captured.err
    # re-ranking is off by default
    assert "3 documents from 1 of 1 query (merged: rrf)" in captured.out and "[found by #1]" in captured.out
    assert main(["literature", "search", question, "--no-generate", "--dsn", db.dsn, "--no-semantic"]) == 1
    assert "--no-generate needs a semantic row" in capsys.readouterr().err


def test_rerank_mixes_similarity_with_full_text_evidence():
    fused = [1, 2, 3]
    sims = {1: 0.2, 2: 0.3, 3: 0.4}
    lexical = {1: 1.0, 2: 0.1}  # 3 was found by the semantic row only
    assert rerank_by_similarity(fused, sims, weight=0.0, lexical=lexical) == [1, 2, 3]
    assert rerank_by_similarity(fused, sims, weight=1.0, lexical=lexical) == [3, 2, 1]
    # 1: 0.3 * 1.0 + 0.7 * 0 = 0.3; 2: 0.03 + 0.35; 3: 0 + 0.7
    assert rerank_by_similarity(fused, sims, weight=0.7, lexical=lexical) == [3, 2, 1]
    assert rerank_by_similarity(fused, sims, weight=0.2, lexical=lexical) == [1, 3, 2]
    with pytest.raises(ValueError, match="between 0 and 1"):
        rerank_by_similarity(fused, sims, weight=1.5)


def _text_of(db, doc_id: int) -> str:
    from kmds_desktop.literature.store.vectors import document_texts

    return document_texts(db, [doc_id])[doc_id]


def test_fusion_ties_are_broken_as_documented_whatever_order_the_lists_come_in() -> None:
    """Two documents at the same ranks in other lists score the same (summed exactly: a plain sum
    differed in the last bit, and the documented tie-break never applied); the smaller id goes first."""
    first = [10, 99, 98, 97, 96, 95, 11]
    second = [11, 10]
    third = [94, 11, 93, 92, 91, 90, 10]
    for lists in ([first, second, third], [third, first, second], [second, third, first]):
        ordered, scores, _found_by = reciprocal_rank_fusion(lists, k=60)
        assert scores[10] == scores[11] and ordered.index(10) < ordered.index(11)
