"""The built-in generator keeps short meaningful terms, goes from strict to broad without flooding,
and does something sensible on an empty database (real PostgreSQL with the shared corpora)."""

from __future__ import annotations

import json

from kmds_desktop.literature.queries.keyword_queries import (
    FLOOD_MIN,
    FLOOD_SHARE,
    KeywordQueryBuilder,
    content_words,
)
from kmds_desktop.literature.queries.query_cleaning import clean_query


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
    import kmds_desktop.literature.queries.keyword_queries as keyword_queries

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


# --- the building-block strategy (concepts, variants from the corpus, precise to broad) -------------

CF_QUESTION = "Does Pseudomonas aeruginosa infection worsen lung function in cystic fibrosis patients?"


def _cf_database(pg_empty_database, literature_data):
    pg_empty_database.import_files([literature_data / "cf" / "corpus.jsonl"])
    return pg_empty_database


def test_a_topical_question_gets_concept_blocks_not_its_rarest_word(pg_empty_database, literature_data):
    db = _cf_database(pg_empty_database, literature_data)
    builder = KeywordQueryBuilder(db)
    concepts = {c.label.lower(): c for c in builder.concepts(CF_QUESTION)}
    assert {"pseudomonas aeruginosa", "lung function", "cystic fibrosis"} <= set(concepts)
    assert "worsen" not in concepts  # a word of the claim's direction is not a concept
    assert "CF" in concepts["cystic fibrosis"].variants  # the abbreviation the corpus uses with it
    queries = [builder.query(CF_QUESTION, a) for a in (1, 2, 3)]
    counts = [int(db.count_matches(q)) for q in queries]
    assert "&" in queries[0] and "pseudomonas <-> aeruginosa" in queries[0].lower()
    assert 0 < counts[0] <= counts[1] <= counts[2], (queries, counts)
    # a frequent topical term is a concept: the precise query keeps "cystic fibrosis" although nearly
    # every CF record has it
    assert "cystic <-> fibrosis" in queries[0]
    note = builder.explain(CF_QUESTION, 1)
    assert note.startswith("precise:") and "Pseudomonas aeruginosa" in note and "CF" in note


def test_an_abbreviation_in_the_question_is_expanded_as_the_corpus_defines_it(pg_empty_database,
                                                                             literature_data):
    db = _cf_database(pg_empty_database, literature_data)
    builder = KeywordQueryBuilder(db)
    question = "What are the effects of calcium on the physical properties of mucus from CF patients?"
    concepts = {c.label: c for c in builder.concepts(question)}
    assert "cystic <-> fibrosis" in concepts["CF"].variants
    assert any("defined as 'cystic fibrosis'" in n for n in concepts["CF"].notes)
    assert "physical properties" in concepts  # used as a phrase in this corpus
    precise = builder.query(question, 1)
    assert precise.count("&") >= 1 and int(db.count_matches(precise)) >= 1


def test_no_multi_concept_question_gets_a_one_word_first_query(pg_empty_database, literature_data):
    from kmds_desktop.literature.retrieval.evaluation import load_questions

    db = _cf_database(pg_empty_database, literature_data)
    builder = KeywordQueryBuilder(db)
    for question in load_questions(literature_data / "cf" / "queries.jsonl")[:25]:
        if len(builder.concepts(question.text)) < 2:
            continue
        first = builder.query(question.text, 1)
        assert any(op in first for op in ("&", "|", "<->")), (question.text, first)
        ok, _ = db.validate_tsquery(first)
        assert ok


def test_spelling_variants_are_kept_only_when_the_corpus_uses_them(pg_database):
    from kmds_desktop.literature.queries.concept_blocks import spelling_variants

    assert "tumor" in spelling_variants("tumour") and "haemoglobin" in spelling_variants("hemoglobin")
    assert "randomized" in spelling_variants("randomised")
    builder = KeywordQueryBuilder(pg_database)
    tumour = next(c for c in builder.concepts("Do tumour cells evade immune surveillance?")
                  if c.label == "tumour")
    assert "tumor" in tumour.variants and any("another spelling" in n for n in tumour.notes)
    unknown = next(c for c in builder.concepts("Does colour vision decline with age?") if c.label == "colour")
    for variant in unknown.variants[1:]:
        assert int(pg_database.count_matches(variant)) > 0


def test_each_generated_query_carries_its_reason(pg_empty_database, literature_data):
    from kmds_desktop.literature.queries.query_generation import MultiModelQueryGenerator

    db = _cf_database(pg_empty_database, literature_data)
    generator = MultiModelQueryGenerator(database=db)
    result = generator.generate_queries(CF_QUESTION, None, ["builtin:keywords"], 3)
    notes = [r.note for r in result.all_queries]
    assert [n.split(":")[0] for n in notes] == ["precise", "medium", "broad"]
    assert len(result.unique_queries) == 3


def test_a_long_question_still_gets_three_queries_the_cleaner_accepts(pg_database):
    from kmds_desktop.literature.queries.query_cleaning import clean_query_with_reason

    question = ("Chronic exposure to fine particulate matter air pollution accelerates atherosclerosis, "
                "coronary calcification, arterial stiffness and systemic inflammation in elderly "
                "hypertensive smokers with impaired renal function and diabetes mellitus")
    builder = KeywordQueryBuilder(pg_database)
    for attempt in (1, 2, 3):
        raw = builder.query(question, attempt)
        cleaned, why = clean_query_with_reason(raw)
        assert cleaned == raw, (attempt, len(raw), why)
        assert pg_database.validate_tsquery(cleaned)[0]


# --- neighbours in the shipped embedding model's space ------------------------------------------------

def _write_corpus(path, records):
    import json

    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def test_a_concept_gets_its_neighbours_in_the_embedding_space_as_variants(pg_empty_database, tmp_path):
    """'pulmonary function' is another name of 'lung function' that the corpus uses (MiniLM: 0.88):
    with the embedding model the block holds both, the note says why; without it, only the question's
    wording. A word merely related ('sputum') is not made a variant."""
    from kmds_desktop.literature.store.vectors import encoder_for

    records = []
    for i in range(8):
        records.append({"id": f"t:{i}",
                        "title": f"Azithromycin and pulmonary function in cystic fibrosis {i}",
                        "abstract": "Pulmonary function improved with azithromycin in children with cystic "
                                    "fibrosis; sputum cultures were taken."})
    for i in range(3):
        records.append({"id": f"l:{i}", "title": f"Lung function in cystic fibrosis cohort {i}",
                        "abstract": "Azithromycin was given and lung function measured."})
    for i in range(30):
        records.append({"id": f"o:{i}", "title": f"Bone density in adults {i}",
                        "abstract": "Calcium intake and fractures in a population study."})
    pg_empty_database.import_files([_write_corpus(tmp_path / "corpus.jsonl", records)])
    question = "Does azithromycin improve lung function in cystic fibrosis?"

    plain = {c.label: c for c in KeywordQueryBuilder(pg_empty_database).concepts(question)}
    assert plain["lung function"].variants == ["lung <-> function"]

    builder = KeywordQueryBuilder(pg_empty_database, encoder_for("all-MiniLM-L6-v2"))
    concepts = {c.label: c for c in builder.concepts(question)}
    lung = concepts["lung function"]
    assert "pulmonary <-> function" in lung.variants, lung
    assert any("embedding model" in n and "pulmonary function" in n for n in lung.notes)
    assert not any("sputum" in v for c in concepts.values() for v in c.variants)
    precise = builder.query(question, 1)
    assert "pulmonary <-> function" in precise
    assert pg_empty_database.count_matches(precise) == 11  # both wordings found
    assert "embedding model" in builder.explain(question, 1)


def test_a_failing_embedding_model_leaves_the_strategy_as_without_it(pg_empty_database, literature_data):
    db = _cf_database(pg_empty_database, literature_data)

    def broken(texts):
        raise RuntimeError("the embedding model is not installed")

    with_broken = KeywordQueryBuilder(db, broken)
    assert [with_broken.query(CF_QUESTION, a) for a in (1, 2, 3)] == [
        KeywordQueryBuilder(db).query(CF_QUESTION, a) for a in (1, 2, 3)]
    # and each query's note says why there are no neighbours (it was said nowhere)
    for attempt in (1, 2, 3):
        assert "no embedding neighbours (RuntimeError)" in with_broken.explain(CF_QUESTION, attempt)


def test_the_same_question_gets_the_same_queries_in_every_run(pg_empty_database, literature_data):
    """Words tied in the feedback documents are taken in one order, not in the order Python's string hash
    (randomised per process) gives a set: a search the researcher repeats, or a review's update, runs the
    same queries. Three processes with different hash seeds write the broad queries of questions whose
    feedback words tie."""
    import os
    import subprocess
    import sys

    db = _cf_database(pg_empty_database, literature_data)
    questions = [
        "What non-invasive tests can be performed for the evaluation of exocrine pancreatic function in "
        "patients with CF?",
        "What complications of pancreatic enzyme therapy have been reported in CF patients?",
        "What are the results of genetic counseling of families of children with CF?",
    ]
    script = (
        "import json, sys\n"
        "from kmds_desktop.literature.store.database import open_database\n"
        "from kmds_desktop.literature.queries.keyword_queries import KeywordQueryBuilder\n"
        "builder = KeywordQueryBuilder(open_database(sys.argv[1]))\n"
        "print(json.dumps([builder.query(q, 3) for q in json.loads(sys.argv[2])]))\n"
    )
    runs = set()
    for seed in ("1", "2", "3"):
        done = subprocess.run(
            [sys.executable, "-c", script, str(db.dsn), json.dumps(questions)], capture_output=True,
            text=True, timeout=300, env={**os.environ, "PYTHONHASHSEED": seed}, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        runs.add(done.stdout.strip().splitlines()[-1])
    assert len(runs) == 1, runs
    assert all(q.count("|") >= 5 for q in json.loads(runs.pop()))  # broad rows with feedback words


def test_concept_blocks_of_many_long_variants_still_make_three_queries_the_cleaner_accepts():
    """Five concepts of four long variants: each k-of-n group repeats the blocks, and the first medium
    query (any 4 of 5) once came to 1,267 characters, which the cleaner refused, so the row was lost
    (and the built-in's note blamed the question's words). Two such concepts with feedback words too."""
    from kmds_desktop.literature.queries.concept_blocks import Concept, CorpusLookups, write_strategy
    from kmds_desktop.literature.queries.query_cleaning import MAX_QUERY_CHARS, clean_query_with_reason

    def concept(word: str, endings: tuple[str, ...] = ("", "al", "ity", "ism")) -> Concept:
        return Concept(word, [f"{word}{n} <-> phrase <-> variant" for n in endings])

    blocks = [concept(w) for w in ("calcium", "sputum", "viscosity", "inhaled", "dornase")]
    # two concepts whose "both, or the rarer with the documents' words" repeats a 400-character block
    endings = ("", "al", "ity", "ism", "ic", "ous", "ly", "er", "est", "ed")
    pair = [concept(w, endings) for w in ("calcium", "mucus")]
    for concepts, feedback in ((blocks, None), (pair, ["mucin", "elastase", "neutrophil"])):
        strategy = write_strategy(concepts, CorpusLookups(None), (lambda _q, f=feedback: list(f))
                                  if feedback else None, [c.label for c in concepts], None)
        assert len(strategy.queries) == 3
        for query in strategy.queries:
            cleaned, why = clean_query_with_reason(query)
            assert query and len(query) <= MAX_QUERY_CHARS and cleaned == query, (len(query), why)
