"""The built-in generator keeps short meaningful terms, goes from strict to broad without flooding,
and does something sensible on an empty database (real PostgreSQL with the shared corpora)."""

from __future__ import annotations

from kmds_desktop.literature.keyword_queries import FLOOD_MIN, FLOOD_SHARE, KeywordQueryBuilder, content_words
from kmds_desktop.literature.query_cleaning import clean_query


def test_short_meaningful_terms_are_kept():
    assert content_words("Does vitamin D supplementation prevent fractures?")[0] == "vitamin D"
    assert content_words("Hepatitis B vaccination in infants")[0] == "Hepatitis B"
    words = content_words("IL-6 and TNF-alpha in CD4 T cells of type 2 diabetes patients with p53 loss")
    assert {"IL-6", "TNF-alpha", "CD4 T", "type 2", "p53"} <= set(words)
    assert content_words("Erlotinib in non-small-cell lung cancer")[1] == "non-small-cell"
    # a lone short word after a stop word is not a qualifier ("after 2 weeks")
    assert "2" not in " ".join(content_words("Pain after 2 weeks of aspirin"))
    strict = KeywordQueryBuilder().query("Does vitamin D supplementation prevent fractures?", 1)
    assert "vitamin <-> D" in strict and clean_query(strict) == strict


def test_vitamin_d_query_does_not_find_other_vitamins(pg_database):
    builder = KeywordQueryBuilder(pg_database)
    question = "Vitamin D deficiency is common in older adults"
    strict = builder.query(question, 1)
    assert "vitamin <-> D" in strict.replace("Vitamin", "vitamin")
    ids = pg_database.find_abstract_ids(strict, max_rows=1000)
    docs = pg_database.fetch_documents_by_ids(ids)
    assert docs
    text = [(d["title"] + " " + d["abstract"]).lower() for d in docs]
    assert all("vitamin d" in t for t in text)


def test_broad_query_is_checked_against_its_match_count(pg_database, monkeypatch):
    import kmds_desktop.literature.keyword_queries as keyword_queries

    question = "Erlotinib improves survival in non-small-cell lung cancer"
    strict, pairs, broad = (KeywordQueryBuilder(pg_database).query(question, a) for a in (1, 2, 3))
    counts = [pg_database.count_matches(q) for q in (strict, pairs, broad)]
    assert 0 < counts[0] <= min(counts[1], counts[2])  # strict first, then broader
    assert ":*" not in broad and "rlotinib" in broad  # stems, not prefixes
    total = pg_database.status()["documents"]
    assert counts[2] <= max(FLOOD_MIN, int(FLOOD_SHARE * total))
    # With a limit the whole OR exceeds, the most common terms go until it fits; the rare one stays.
    everything = pg_database.count_matches(" | ".join(KeywordQueryBuilder(pg_database).terms(question)))
    monkeypatch.setattr(keyword_queries, "FLOOD_MIN", 1)
    monkeypatch.setattr(keyword_queries, "FLOOD_SHARE", (everything // 3) / total)
    narrowed = KeywordQueryBuilder(pg_database).query(question, 3)
    assert narrowed.count("|") < broad.count("|") and "rlotinib" in narrowed
    assert pg_database.count_matches(narrowed) <= max(1, everything // 3) < everything


def test_empty_database_gives_a_query_of_the_key_terms(pg_empty_database):
    builder = KeywordQueryBuilder(pg_empty_database)
    question = "Does vitamin D supplementation reduce fracture risk in older women?"
    strict = builder.query(question, 1)
    assert strict.count("&") == 2 and "vitamin <-> D" in strict and "supplementation" in strict
    ok, _ = pg_empty_database.validate_tsquery(strict)
    assert ok
    assert all(builder.query(question, a) for a in (2, 3))
