"""Models name concepts, the app writes the queries: concept JSON compiled by the built-in's machinery.

Real parts: the fake Ollama and OpenAI-compatible servers are real HTTP servers with scripted replies
(driven through the app's own clients), the database is the real PostgreSQL with CF and SciFact
imported, which judges every compiled query (``to_tsquery``) and counts its matches.
"""

from __future__ import annotations

import json
import re

import pytest
from support.fake_ollama import ModelScript
from support.fake_openai import FakeOpenAI, OpenAIScript

from kmds_desktop.config import QueryGenerationSettings, Settings
from kmds_desktop.literature import QueryAgent
from kmds_desktop.literature.queries import concept_json
from kmds_desktop.literature.queries.abstract_words import (
    ABSTRACT_WORD_MAX_SHARE,
    ABSTRACT_WORD_MIN_DOCS,
    ABSTRACT_WORDS,
)
from kmds_desktop.literature.queries.concept_json import (
    CONCEPT_SYSTEM_PROMPT,
    EXPANSION_SYSTEM_PROMPT,
    MAX_JSON_DEPTH,
    SCHEMA_MAX_TERMS,
    ConceptReplyError,
    ModelConcept,
    compile_concepts,
    parse_concepts,
)
from kmds_desktop.literature.queries.query_generation import MODE_CONCEPTS, MODE_VERBATIM
from kmds_desktop.literature.retrieval.semantic import HYPOTHETICAL_MAX_TOKENS, clean_abstract

QUESTION = "Is Pseudomonas aeruginosa infection in cystic fibrosis patients treated with antibiotics?"
INVENTED = "zorblaxifen"
INVENTED_IN_ABSTRACT = "quorblatine"
#: What the model writes as the paper answering QUESTION: words of the field a paper on it would use,
#: the question's own words, common words, and a drug no paper names.
ABSTRACT = (
    "Chronic Pseudomonas aeruginosa infection in cystic fibrosis patients is treated with inhaled "
    "tobramycin and other aminoglycosides. In this study, sputum cultures of 40 patients were followed "
    "during pulmonary exacerbations; colistin and quorblatine were compared. Mucoid isolates persisted "
    "despite treatment, and sputum bacterial density fell with the aminoglycosides."
)
#: Over-specific: five concepts, two of which the question never names, and one invented term.
CONCEPTS = {"concepts": [
    {"name": "Pseudomonas aeruginosa", "terms": ["Pseudomonas aeruginosa", "P. aeruginosa", "pseudomonas"]},
    {"name": "cystic fibrosis", "terms": ["cystic fibrosis", "CF", "mucoviscidosis"]},
    {"name": "antibiotics", "terms": ["antibiotics", "tobramycin", INVENTED]},
    {"name": "hospital admission", "terms": ["hospital admission", "hospitalisation"]},
    {"name": "lung function decline", "terms": ["lung function decline", "FEV1 decline"]},
]}


def _settings(url: str, **changes: object) -> QueryGenerationSettings:
    base: dict[str, object] = {"multi_model_enabled": True, "models": ["qwen", "builtin:keywords"],
                               "queries_per_model": 3, "ollama_host": url, "timeout_s": 10,
                               "builtin_embedding_variants": False}
    base.update(changes)
    return QueryGenerationSettings(**base)


def _and_groups(query: str) -> int:
    """How many blocks the widest AND of ``query`` joins (parenthesised OR groups count as one)."""
    depth, widest, current = 0, 1, 1
    for char in query:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "&" and depth == 0:
            current += 1
            widest = max(widest, current)
        elif char == "|" and depth == 0:
            current = 1
    return widest


# --------------------------------------------------------------------------- parsing, bounded

def test_concept_replies_are_read_in_the_shapes_small_models_write() -> None:
    fenced = "Here are the concepts:\n```json\n" + json.dumps(CONCEPTS) + "\n```\nHope it helps."
    concepts = parse_concepts(fenced)
    assert [c.name for c in concepts][:2] == ["Pseudomonas aeruginosa", "cystic fibrosis"]
    assert "tobramycin" in concepts[2].terms
    bare = parse_concepts('[{"concept": "asthma", "synonyms": ["wheeze"]}, "eczema"]')
    assert [(c.name, c.terms) for c in bare] == [("asthma", ["asthma", "wheeze"]), ("eczema", ["eczema"])]
    # terms that are not a list (null, a number, an object) leave the concept its name: a TypeError from
    # slicing them escaped the whole generation once
    odd = parse_concepts('{"concepts": [{"name": "calcium", "terms": null}, {"name": "mucus", "terms": 5},'
                         ' {"name": "sputum", "terms": {"a": 1}}]}')
    assert [(c.name, c.terms) for c in odd] == [("calcium", ["calcium"]), ("mucus", ["mucus"]),
                                                ("sputum", ["sputum"])]


def test_a_reply_cut_off_by_the_token_limit_keeps_what_was_complete() -> None:
    cut = ('{"concepts": [{"name": "asthma", "terms": ["asthma", "wheeze"]}, '
           '{"name": "smoking", "terms": ["smoking", "tobacco", "cigar')
    concepts = parse_concepts(cut)
    assert [(c.name, c.terms) for c in concepts] == [("asthma", ["asthma", "wheeze"]),
                                                     ("smoking", ["smoking", "tobacco"])]
    with pytest.raises(ConceptReplyError, match="not valid JSON"):
        parse_concepts('{"concepts": [{"name": "asth')


@pytest.mark.parametrize(("reply", "reason"), [
    ("", "empty"),
    ("cystic fibrosis AND antibiotics", "not JSON"),
    ('{"concepts": [{"name": "x", "terms": [', "not valid JSON"),
    ('{"queries": ["a & b"]}', 'no "concepts" list'),
    ('{"concepts": [{"name": "", "terms": []}, 3]}', "names no concept"),
    ("[" * 200_000 + "]" * 200_000, f"deeper than {MAX_JSON_DEPTH}"),
    ('{"concepts": ["' + "a" * 3_000_000 + '"]}', "too long"),
])
def test_a_reply_without_concepts_says_why_in_one_line(reply: str, reason: str) -> None:
    with pytest.raises(ConceptReplyError) as caught:
        parse_concepts(reply)
    message = str(caught.value)
    assert reason in message and "\n" not in message and len(message) < 200


# --------------------------------------------------------------------------- compiled rows

def _concepts_and_abstract(abstract: str) -> ModelScript:
    """The model's two replies of a concept round: the concepts as JSON, then its abstract."""
    def reply(prompt: str, body: dict[str, object]) -> str:
        return abstract if prompt.startswith("Write the abstract") else json.dumps(CONCEPTS)
    return ModelScript(replies=[reply])


def test_compiled_rows_are_valid_k_of_n_and_drop_the_invented_term(pg_database, fake_ollama) -> None:
    fake_ollama.models["qwen"] = _concepts_and_abstract(ABSTRACT)
    agent = QueryAgent(pg_database, _settings(fake_ollama.url))
    generated = agent.convert_question_multi_model(QUESTION)

    # one call names the concepts for all three queries; the static prompt first, the question last;
    # a second writes the abstract whose words widen the broad row
    calls = fake_ollama.completion_requests()
    assert [c.model for c in calls] == ["qwen", "qwen"]
    system = next(m["content"] for m in calls[0].body["messages"] if m["role"] == "system")
    assert system == CONCEPT_SYSTEM_PROMPT
    assert calls[0].body["messages"][-1]["content"].rstrip().endswith(f"{QUESTION}\nJSON:")

    rows = [r for r in generated.all_queries if r.model == "qwen"]
    assert [r.attempt_number for r in rows] == [1, 2, 3]
    assert all(r.ok and r.query_mode == MODE_CONCEPTS for r in rows), [r.error for r in rows]
    for row in rows:
        valid, reason = pg_database.validate_tsquery(row.query)
        assert valid, (row.query, reason)
        assert pg_database.count_matches(row.query) > 0, row.query
        assert INVENTED not in row.query.lower()
        assert f"'{INVENTED}' (no document has it)" in row.note
    precise, medium, broad = (r.query for r in rows)
    # concepts the question never names never become blocks of their own: they widen the broad row only
    for query in (precise, medium):
        assert "hospital" not in query and "decline" not in query
    assert "hospital <-> admission" in broad
    assert "tobramycin" in precise  # the model's term joins the question's 'antibiotics' block
    assert "'tobramycin' (antibiotics)" in rows[0].note
    assert "hospital" in rows[0].note and "not a concept of the question" in rows[0].note
    # the medium row asks for k of the n blocks, not every block ANDed
    assert ") | (" in medium and _and_groups(medium) < _and_groups(" & ".join(["x"] * 4))
    assert "&" not in broad
    # the model's rows then run and merge with the built-in's, as any rows do
    result = agent.run_reviewed_queries(generated.unique_queries, max_rows=20, fetch=False)
    assert not result.failed_queries and result.ids


def test_the_abstracts_rare_words_widen_the_broad_row_and_the_abstract_is_written_once(
        pg_database, fake_ollama) -> None:
    """The model's hypothetical abstract lends its rarest words the corpus has to the model's broad
    row (query2doc-like); the question's own words, common words and words no paper uses stay out; the
    hypothetical-abstract row then reuses the same abstract instead of asking again."""
    fake_ollama.models["qwen"] = _concepts_and_abstract(ABSTRACT)
    agent = QueryAgent(pg_database, _settings(fake_ollama.url))
    generated = agent.convert_question_multi_model(QUESTION)
    abstract_call = fake_ollama.completion_requests()[1]
    assert abstract_call.prompt.startswith("Write the abstract")
    assert abstract_call.body["options"]["num_predict"] == HYPOTHETICAL_MAX_TOKENS
    precise, medium, broad = (r for r in generated.all_queries if r.model == "qwen")
    words = re.findall(r"'([^']+)'", broad.note.split("words of its abstract ", 1)[1])
    assert 1 <= len(words) <= ABSTRACT_WORDS, broad.note
    total = pg_database.status()["documents"]
    question_words = {w.lower().strip("?") for w in QUESTION.split()}
    for word in words:
        assert word in ABSTRACT.lower() and word not in question_words
        assert f"| {word}" in broad.query or broad.query.startswith(word), (word, broad.query)
        assert word not in precise.query and word not in medium.query
        documents = pg_database.count_matches(word)
        assert documents >= ABSTRACT_WORD_MIN_DOCS, word
        assert documents <= ABSTRACT_WORD_MAX_SHARE * total, (word, documents, total)
    assert INVENTED_IN_ABSTRACT not in broad.query and "patients" not in words
    # the hypothetical-abstract row is the same abstract, without a third call
    rows = agent.semantic_rows(QUESTION)
    assert rows[-1].kind == "hypothetical" and rows[-1].text == clean_abstract(ABSTRACT)
    assert len(fake_ollama.completion_requests()) == 2


def test_an_abstract_that_fails_costs_only_its_words(pg_database, fake_ollama) -> None:
    fake_ollama.models["qwen"] = _concepts_and_abstract("No.")
    agent = QueryAgent(pg_database, _settings(fake_ollama.url))
    generated = agent.convert_question_multi_model(QUESTION)
    rows = [r for r in generated.all_queries if r.model == "qwen"]
    assert len(rows) == 3 and all(r.ok for r in rows), [r.error for r in rows]
    assert "no words from an abstract: model 'qwen' wrote no usable abstract" in rows[2].note
    assert "words of its abstract" not in rows[2].note


def test_the_schema_bounds_the_terms_a_model_may_repeat(pg_database, fake_ollama) -> None:
    # a small model at a low temperature repeated one term until the token limit; the schema the
    # server is held to bounds the terms of each concept (one bound only: nested ones were slow)
    fake_ollama.models["qwen"] = _concepts_and_abstract(ABSTRACT)
    QueryAgent(pg_database, _settings(fake_ollama.url)).convert_question_multi_model(QUESTION)
    schema = fake_ollama.completion_requests()[0].body["format"]
    item = schema["properties"]["concepts"]["items"]
    assert item["properties"]["terms"]["maxItems"] == SCHEMA_MAX_TERMS
    assert "maxItems" not in schema["properties"]["concepts"] and "enum" not in item["properties"]["name"]


def test_an_expansion_request_widens_the_builtins_own_concepts(pg_database, fake_ollama,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(concept_json, "CONCEPT_REQUEST", "expansion")
    agent = QueryAgent(pg_database, _settings(fake_ollama.url))
    labels = [c.label for c in agent.generator.keyword_builder().plan(QUESTION).concepts]
    antibiotics = next(label for label in labels if label.lower().startswith("antibiotic"))
    fibrosis = next(label for label in labels if "fibrosis" in label.lower())
    reply = {"concepts": [
        # named "antibiotics", but its terms share more words with the cystic fibrosis block: the name decides
        {"name": antibiotics,
         "terms": ["tobramycin", "cystic fibrosis therapy", "cystic fibrosis treatment"]},
        # a narrower phrase of the block's own variant "CF" adds nothing to the OR: left out
        {"name": fibrosis, "terms": ["CF patients", INVENTED]},
    ]}
    fake_ollama.models["qwen"] = ModelScript(replies=[json.dumps(reply)])
    generated = agent.convert_question_multi_model(QUESTION)

    call = fake_ollama.completion_requests()[0]
    system = next(m["content"] for m in call.body["messages"] if m["role"] == "system")
    assert system == EXPANSION_SYSTEM_PROMPT  # static: the server's prompt cache keeps it
    user = call.body["messages"][-1]["content"]
    assert user.startswith("Concepts: " + "; ".join(labels[:concept_json.MAX_EXPANSION_CONCEPTS]))
    assert user.rstrip().endswith(f"Question: {QUESTION}\nJSON:")  # the question last
    name_schema = call.body["format"]["properties"]["concepts"]["items"]["properties"]["name"]
    assert name_schema["enum"] == labels[:concept_json.MAX_EXPANSION_CONCEPTS]

    rows = [r for r in generated.all_queries if r.model == "qwen"]
    assert len(rows) == 3 and all(r.ok for r in rows), [r.error for r in rows]
    assert f"'tobramycin' ({antibiotics})" in rows[0].note
    assert f"'{INVENTED}' (no document has it)" in rows[0].note
    for row in rows:
        assert pg_database.validate_tsquery(row.query)[0], row.query
        assert "patients" not in row.query and INVENTED not in row.query


def test_garbage_json_is_a_clear_note_and_the_builtin_rows_still_run(pg_database) -> None:
    with FakeOpenAI() as fake:
        fake.models["qwen"] = OpenAIScript(replies=["Sure! The concepts are cystic fibrosis {and more"])
        settings = _settings("http://127.0.0.1:9", models=["openai:qwen", "builtin:keywords"],
                             openai_base_url=fake.url)
        agent = QueryAgent(pg_database, settings)
        generated = agent.convert_question_multi_model(QUESTION)
    first, *rest = [r for r in generated.all_queries if r.model == "openai:qwen"]
    assert not first.ok and first.error is not None
    assert first.error.startswith("the reply held no concepts as JSON: the reply is not valid JSON")
    assert "the other models' rows still run" in first.error and "\n" not in first.error
    assert [r.skipped for r in rest] == [True, True]
    builtin = [r for r in generated.all_queries if r.model == "builtin:keywords"]
    assert len(builtin) == 3 and all(r.ok for r in builtin)
    assert generated.unique_queries == [r.query for r in builtin]
    result = agent.run_reviewed_queries(generated.unique_queries, max_rows=20, fetch=False)
    assert result.ids and not result.failed_queries


def test_the_verbatim_option_keeps_the_models_own_queries(pg_database, fake_ollama) -> None:
    own = ["(cystic <-> fibrosis) & pseudomonas", "Query: antibiotic & cystic <-> fibrosis"]
    fake_ollama.models["qwen"] = ModelScript(replies=own)
    agent = QueryAgent(pg_database, _settings(fake_ollama.url, queries_per_model=2,
                                              verbatim_query_models=["  QWEN "]))
    generated = agent.convert_question_multi_model(QUESTION)
    rows = [r for r in generated.all_queries if r.model == "qwen"]
    assert [r.query for r in rows] == ["(cystic <-> fibrosis) & pseudomonas",
                                       "antibiotic & cystic <-> fibrosis"]
    assert all(r.query_mode == MODE_VERBATIM for r in rows)
    assert len(fake_ollama.completion_requests()) == 2  # one call per attempt, as before


def test_the_verbatim_option_is_a_setting_that_round_trips() -> None:
    settings = Settings.model_validate({"query_generation": {"verbatim_query_models": [" qwen ", ""]}})
    assert settings.query_generation.verbatim_query_models == ["qwen"]
    assert QueryGenerationSettings().verbatim_query_models == []


def test_preferences_set_which_models_write_their_own_query(qtbot, jobs, data_home) -> None:
    from kmds_desktop.config import load_settings
    from kmds_desktop.ui.preferences.dialog import PreferencesDialog

    path = data_home / "settings.json"
    dialog = PreferencesDialog(Settings(), jobs, settings_path=path)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.query_page.qg_verbatim.text() == ""  # every model names concepts by default
    dialog.query_page.qg_verbatim.setText(" qwen2.5-coder:1.5b , openai:local ,")
    assert dialog.save() is True
    saved = load_settings(path).query_generation
    assert saved.verbatim_query_models == ["qwen2.5-coder:1.5b", "openai:local"]


def test_a_model_term_already_among_a_blocks_variants_is_not_added_again(pg_database) -> None:
    """The blocks' variants are stemmed as the model's terms are: a neighbour variant "pulmonary <->
    function" and the model's "Pulmonary function" are one term (it was added again, using up one of
    the block's places for the model's terms)."""
    from kmds_desktop.literature.queries.keyword_queries import KeywordQueryBuilder

    builder = KeywordQueryBuilder(pg_database)
    question = "Does lung function decline in cystic fibrosis?"
    lung = next(c for c in builder.plan(question).concepts if "lung" in c.label)
    lung.variants.append("pulmonary <-> function")  # as an embedding neighbour would add it
    compiled = compile_concepts(question, [ModelConcept("lung function", ["Pulmonary function",
                                                                          "spirometry"])], builder)
    precise = compiled.queries[0]
    assert precise.lower().count("pulmonary <-> function") == 1, precise
    assert not any("Pulmonary function" in a for a in compiled.added), compiled.added
