"""Full-text rows ranked by term rarity (``retrieval.fulltext_ranking = idf``) on the real PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kmds_desktop.literature.retrieval.fusion import best_lexical_scores
from kmds_desktop.literature.store.term_weights import OPERAND, idf, operands

# A rare drug named once, against a common word said many times.
RECORDS = [
    {"id": "test:rare", "title": "Outcomes in a cohort",
     "abstract": "Patients received erlotinib. Outcomes were recorded for each patient."},
    {"id": "test:common", "title": "Cancer cancer cancer",
     "abstract": "Cancer patients with cancer: a cancer registry study of cancer."},
] + [
    {"id": f"test:filler-{n}", "title": f"Cancer study {n}",
     "abstract": f"A cancer registry report number {n}."}
    for n in range(20)
]


@pytest.fixture()
def small_corpus(pg_empty_database, tmp_path: Path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    report = pg_empty_database.import_files([path])
    assert report.records == len(RECORDS), report.summary()
    return pg_empty_database


def _external(db, ranked) -> list[str]:
    ids = [i for i, _ in ranked]
    names = dict(db.fetch_all("SELECT id, external_id FROM document WHERE id = ANY(%s)", (ids,)))
    return [names[i] for i in ids]


def test_idf_ranking_puts_the_rare_term_first_where_cover_density_does_not(small_corpus):
    query = "erlotinib | cancer"
    by_density = _external(small_corpus, small_corpus.find_abstract_ids_ranked(query, ranking="ts_rank_cd"))
    by_rarity = _external(small_corpus, small_corpus.find_abstract_ids_ranked(query, ranking="idf"))
    assert set(by_density) == set(by_rarity) == {r["id"] for r in RECORDS}  # same matches, other order
    assert by_density[0] == "test:common" and by_rarity[0] == "test:rare"
    # the same rows again come from the cached counts, in the same order
    assert _external(small_corpus, small_corpus.find_abstract_ids_ranked(query, ranking="idf")) == by_rarity


def test_idf_counts_are_renewed_after_an_import(small_corpus, tmp_path: Path):
    first = small_corpus.find_abstract_ids_ranked("erlotinib | cancer", ranking="idf")
    more = tmp_path / "more.jsonl"
    extra = [{"id": f"test:e{n}", "title": "Erlotinib erlotinib", "abstract": "erlotinib"} for n in range(40)]
    more.write_text("".join(json.dumps(r) + "\n" for r in extra), encoding="utf-8")
    small_corpus.import_files([more])
    after = small_corpus.find_abstract_ids_ranked("erlotinib | cancer", ranking="idf", max_rows=200)
    scores = dict(after)
    rare = small_corpus.fetch_all("SELECT id FROM document WHERE external_id = 'test:rare'")[0][0]
    assert scores[rare] < dict(first)[rare] / 3  # erlotinib is common now, so it weighs less


def test_unknown_ranking_and_stop_word_queries(small_corpus):
    with pytest.raises(ValueError, match="unknown ranking"):
        small_corpus.find_abstract_ids_ranked("cancer", ranking="bm99")
    assert small_corpus.find_abstract_ids_ranked("the | of", ranking="idf") == []


def test_operands_read_every_term_of_a_printed_tsquery():
    printed = "'vitamin' <-> 'd' & ( 'fractur':* | 'it''s':AB ) & !'placebo'"
    assert operands(printed) == ["'vitamin'", "'d'", "'fractur':*", "'it''s':AB", "'placebo'"]
    assert OPERAND.findall("'" + "x" * 100_000) == []  # unterminated: no match, and no blow-up
    assert idf(1, 1000) > idf(500, 1000) > 0 and idf(1000, 1000) > 0


def test_best_lexical_scores_scale_each_row_by_its_top():
    rows = [([1, 2], [4.0, 1.0]), ([2, 3], [0.5, 0.25]), ([9], [0.0])]
    assert best_lexical_scores(rows) == {1: 1.0, 2: 1.0, 3: 0.5}


def test_search_command_ranks_by_the_chosen_ranking(small_corpus, capsys, data_home):
    from kmds_desktop.cli import main

    def search(ranking: str) -> dict:
        # one query from the built-in generator: the broad one, as its third attempt would be alone
        assert main(["literature", "search", "Does erlotinib help in cancer?", "--models", "builtin:keywords",
                     "--queries-per-model", "3", "--no-rerank", "--fusion", "best_rank", "--ranking", ranking,
                     "--dsn", small_corpus.dsn, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    by_rarity, by_density, by_bm25 = search("idf"), search("ts_rank_cd"), search("bm25")
    assert by_rarity["settings"]["retrieval"]["fulltext_ranking"] == "idf"
    assert by_bm25["settings"]["retrieval"]["fulltext_ranking"] == "bm25"
    assert by_bm25["documents"][0]["external_id"] == "test:rare"  # BM25 weighs rarity too
    assert by_density["settings"]["retrieval"]["fulltext_ranking"] == "ts_rank_cd"
    assert by_rarity["documents"][0]["external_id"] == "test:rare"
    ranks = {d["external_id"]: n for n, d in enumerate(by_density["documents"])}
    assert ranks["test:common"] < ranks["test:filler-0"]  # cover density: the word said most often
