"""Searches on the real embedded PostgreSQL with the shared corpora: ranking, paging, filters, fetch."""

from __future__ import annotations

import datetime as dt

import psycopg
import pytest

from kmds_desktop.literature import LiteratureDatabase
from kmds_desktop.literature.errors import InvalidQuery, LiteratureError
from kmds_desktop.literature.store.schema import LATEST_VERSION
from kmds_desktop.tasks import Cancelled, CancelToken


def _sql(db: LiteratureDatabase, sql: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(db.dsn) as conn:
        return conn.execute(sql, params).fetchall()


def test_open_database_facade_and_status(pg_database):
    assert isinstance(pg_database, LiteratureDatabase)
    status = pg_database.status()
    assert status["mode"] == "embedded"
    assert status["schema_owner"] == "app" and status["schema_version"] == LATEST_VERSION
    # scifact 5183 + cf 1239 + PubMed (pubmed_sample, MEDLINE XML and PubMedQA merged by PMID)
    assert status["sources"]["SciFact"] == 5183
    assert status["sources"]["CF"] == 1239
    pubmed = status["sources"]["PubMed"]
    distinct = _sql(pg_database, "SELECT count(DISTINCT external_id) FROM document d JOIN sources s "
                                 "ON s.id = d.source_id WHERE s.name = 'PubMed'")[0][0]
    assert pubmed == distinct and 2290 < pubmed < 1290 + 604 + 4 + 1000


def test_ranking_matches_ts_rank_cd_with_id_tiebreak(pg_database):
    ranked = pg_database.find_abstract_ids_ranked("cancer & (therapy | treatment)", max_rows=40)
    assert len(ranked) == 40
    expected = _sql(
        pg_database,
        "SELECT id, ts_rank_cd(search_vector, q) r FROM document, to_tsquery('english', %s) q "
        "WHERE search_vector @@ q AND withdrawn_date IS NULL ORDER BY r DESC, id LIMIT 40",
        ("cancer & (therapy | treatment)",),
    )
    assert [i for i, _ in ranked] == [r[0] for r in expected]
    for (id_a, rank_a), (id_b, rank_b) in zip(ranked, ranked[1:], strict=False):
        assert rank_a > rank_b or (rank_a == rank_b and id_a < id_b)
    as_set = pg_database.find_abstract_ids("cancer & (therapy | treatment)", max_rows=40)
    assert as_set == {i for i, _ in ranked}


def test_paging_by_offset_is_stable_and_complete(pg_database):
    query = "cell | protein"
    whole = [i for i, _ in pg_database.find_abstract_ids_ranked(query, max_rows=60)]
    pages: list[int] = []
    for offset in range(0, 60, 15):
        pages += [i for i, _ in pg_database.find_abstract_ids_ranked(query, max_rows=15, offset=offset)]
    assert pages == whole and len(set(pages)) == 60
    assert pg_database.find_abstract_ids(query, max_rows=15, offset=15) == set(whole[15:30])


def test_source_flags_filter_by_source_name(pg_database):
    query = "cystic & fibrosis"
    everything = pg_database.find_abstract_ids(query, max_rows=10_000)
    pubmed = pg_database.find_abstract_ids(query, max_rows=10_000, use_medrxiv=False, use_others=False)
    others = pg_database.find_abstract_ids(query, max_rows=10_000, use_pubmed=False, use_medrxiv=False)
    assert pubmed and others and pubmed | others == everything and not pubmed & others
    docs = pg_database.fetch_documents_by_ids(pubmed)
    assert {d["source_name"] for d in docs} == {"PubMed"}
    assert all(d["source_name"] in {"CF", "SciFact"} for d in pg_database.fetch_documents_by_ids(others))
    # medRxiv is absent: its flag alone filters to nothing, never to everything
    assert pg_database.find_abstract_ids(query, use_pubmed=False, use_others=False) == set()
    assert pg_database.count_matches(query, use_pubmed=False, use_others=False) == 0
    nothing = pg_database.find_abstract_ids(query, use_pubmed=False, use_medrxiv=False, use_others=False)
    assert nothing == set()


def test_date_filters_include_partial_dates(pg_database):
    query = "cystic & fibrosis"
    all_ids = pg_database.find_abstract_ids(query, max_rows=10_000)
    recent = pg_database.find_abstract_ids(query, max_rows=10_000, from_date="2000")
    old = pg_database.find_abstract_ids(query, max_rows=10_000, to_date=dt.date(1999, 12, 31))
    assert recent and old and not recent & old
    undated = {d["id"] for d in pg_database.fetch_documents_by_ids(all_ids) if d["publication_date"] is None}
    assert recent | old | undated == all_ids
    for doc in pg_database.fetch_documents_by_ids(recent):
        assert doc["publication_date"] >= "2000-01-01"
    window = pg_database.find_abstract_ids(query, max_rows=10_000, from_date="1975-03", to_date="1976")
    for doc in pg_database.fetch_documents_by_ids(window):
        assert "1975-03-01" <= doc["publication_date"] <= "1976-12-31"
    assert pg_database.count_matches(query, from_date="1975-03", to_date="1976") == len(window) > 0
    with pytest.raises(LiteratureError, match="from_date"):
        pg_database.find_abstract_ids(query, from_date="last year")


def test_plain_mode_reads_text_as_typed(pg_database):
    plain = pg_database.find_abstract_ids("cancer therapy", max_rows=500, plain=True)
    strict = pg_database.find_abstract_ids("cancer & therapy", max_rows=500)
    assert plain == strict and plain
    phrase = pg_database.find_abstract_ids('"low back pain"', plain=True, max_rows=500)
    loose = pg_database.find_abstract_ids("low & back & pain", max_rows=500)
    assert phrase and phrase <= loose
    # text that is not tsquery syntax: an error in tsquery mode, fine in plain mode
    with pytest.raises(InvalidQuery, match="syntax error"):
        pg_database.find_abstract_ids("cancer therapy (")
    assert isinstance(pg_database.find_abstract_ids("cancer therapy (", plain=True), set)


def test_count_matches_is_exact_and_estimates_on_timeout(pg_database):
    query = "protein | cell"
    count = pg_database.count_matches(query)
    assert count == len(pg_database.find_abstract_ids(query, max_rows=100_000)) > 500
    assert count.estimated is False
    broad = "a:* | b:* | c:* | d:* | e:* | p:* | s:* | t:*"
    # the import built the top-k index of this (app-owned) database: counts come from it, exact
    assert pg_database.topk_index() is not None
    fast = pg_database.count_matches(broad, timeout_ms=1)
    assert fast.estimated is False and fast == len(pg_database.find_abstract_ids(broad, max_rows=100_000))
    index = pg_database.topk_index()
    pg_database.attach_topk_index(None)  # without it, PostgreSQL counts and estimates on a timeout
    try:
        estimate = pg_database.count_matches(broad, timeout_ms=1)
    finally:
        pg_database.attach_topk_index(index)
    assert estimate.estimated is True and estimate > 0
    assert repr(estimate).startswith("~")


def test_validate_tsquery_asks_the_server(pg_database):
    assert pg_database.validate_tsquery("cancers & therapies") == (True, "'cancer' & 'therapi'")
    ok, message = pg_database.validate_tsquery("cancer & (therapy")
    assert not ok and "syntax error in tsquery" in message
    assert pg_database.validate_tsquery("the & of")[0] is False
    assert pg_database.validate_tsquery("")[0] is False
    assert pg_database.validate_tsquery(None)[0] is False  # type: ignore[arg-type]
    assert pg_database.validate_tsquery("heart attack (", plain=True)[0] is True
    # text the parser gives up on (nesting deeper than its stack, a phrase distance out of range) is
    # an answer, not an exception, and a search with it is an InvalidQuery naming the reason
    deep = "(" * 50_000 + "cancer" + ")" * 50_000
    ok, message = pg_database.validate_tsquery(deep)
    assert not ok and "stack depth" in message
    assert pg_database.validate_tsquery("a <99999> b")[0] is False
    with pytest.raises(InvalidQuery, match="stack depth"):
        pg_database.find_abstract_ids(deep)
    with pytest.raises(InvalidQuery, match="distance"):
        pg_database.count_matches("cancer <99999> therapy")


def test_fetch_keeps_given_order_across_batches_and_normalizes(pg_database):
    ranked = [i for i, _ in pg_database.find_abstract_ids_ranked("pain", max_rows=23)]
    reversed_ids = list(reversed(ranked)) + [ranked[0], 999_999_999]  # duplicate and missing id
    seen: list[tuple[int, int | None]] = []
    docs = pg_database.fetch_documents_by_ids(reversed_ids, batch_size=5,
                                              progress=lambda d, t, m: seen.append((d, t)))
    assert [d["id"] for d in docs] == list(reversed(ranked))
    assert seen[0] == (0, 24) and seen[-1] == (24, 24) and len(seen) == 6
    for doc in docs:
        assert isinstance(doc["authors"], list) and isinstance(doc["mesh_terms"], list)
        assert isinstance(doc["keywords"], list)
        assert doc["source_name"] in {"PubMed", "SciFact", "CF"}
        if doc["source_name"] == "PubMed":
            assert doc["pmid"] == doc["external_id"] and doc["pmid"].isdigit()
        else:
            assert doc["pmid"] is None
        if doc["publication_date"] is not None:
            dt.date.fromisoformat(doc["publication_date"])


def test_fetch_of_a_set_is_newest_first_globally(pg_database):
    ids = pg_database.find_abstract_ids("infection", max_rows=120)
    docs = pg_database.fetch_documents_by_ids(ids, batch_size=7)
    assert {d["id"] for d in docs} == ids
    keys = [(d["publication_date"] is None, _neg_date(d["publication_date"]), d["id"]) for d in docs]
    assert keys == sorted(keys)
    batches = list(pg_database.iter_document_batches(ids, batch_size=50))
    assert [len(b) for b in batches] == [50, 50, 20]
    assert [d["id"] for b in batches for d in b] == [d["id"] for d in docs]


def _neg_date(iso: str | None) -> int:
    return -dt.date.fromisoformat(iso).toordinal() if iso else 0


def test_fetch_can_be_cancelled_between_batches(pg_database):
    ids = [i for i, _ in pg_database.find_abstract_ids_ranked("cell", max_rows=100)]
    token = CancelToken()
    got: list[list[dict]] = []
    with pytest.raises(Cancelled):
        for batch in pg_database.iter_document_batches(ids, batch_size=10, cancel=token):
            got.append(batch)
            token.cancel()
    assert len(got) == 1
    with pytest.raises(LiteratureError, match="whole numbers"):
        pg_database.fetch_documents_by_ids(["1; DROP TABLE document"])
