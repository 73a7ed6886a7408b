"""The literature query agent on the real PostgreSQL test database with the shared corpora imported.

Generation goes through the fake Ollama server (real sockets, the real ``ollama`` client) and the
built-in keyword generator. The database is the real one; :class:`CountingDatabase` only counts
which methods the agent calls (to prove the documents are fetched once and what ran is what the
review returned) and forwards every call unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.fake_ollama import ModelScript

from kmds_desktop.config import QueryGenerationSettings
from kmds_desktop.literature import QueryAgent
from kmds_desktop.literature.queries.agent import QueryAgentError, QueryRunStats, merge_ranked
from kmds_desktop.tasks import Cancelled, CancelToken

QUESTION = "Is Pseudomonas aeruginosa infection in cystic fibrosis patients treated with antibiotics?"
Q_CF = "cystic <-> fibrosis & pseudomonas"
Q_ANTI = "(antibiotic:* | tobramycin) & cystic <-> fibrosis"
Q_COVID = "(covid:* | sars-cov-2) & vaccin:*"


class CountingDatabase:
    """Forwards to the real database and records the calls the agent makes."""

    def __init__(self, db: Any) -> None:
        self._db = db
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._db, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return target(*args, **kwargs)

        return call

    def called(self, name: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        return [(a, k) for n, a, k in self.calls if n == name]


def _settings(fake_url: str, **changes: Any) -> QueryGenerationSettings:
    base = {"multi_model_enabled": True, "models": ["fenced", "builtin:keywords"], "queries_per_model": 2,
            "ollama_host": fake_url, "timeout_s": 10,
            # these tests script the models' own tsqueries (the option; concepts: test_concept_queries)
            "verbatim_query_models": ["fenced", "echo", "prose", "missing", "evil"]}
    base.update(changes)
    return QueryGenerationSettings(**base)


def _fenced(fake_ollama, replies: list[str] | None = None) -> None:
    fake_ollama.models["fenced"] = ModelScript(replies=replies or [
        f"Here is the query:\n```\n{Q_CF}\n```", f"Query: {Q_ANTI.upper()}"])


def test_flow_runs_the_reviewed_queries_and_merges_their_ids(pg_database, fake_ollama) -> None:
    _fenced(fake_ollama)
    db = CountingDatabase(pg_database)
    agent = QueryAgent(db, _settings(fake_ollama.url))
    offered: list[list[str]] = []
    generation_calls: list[int] = []

    def review(queries: list[str]) -> list[str]:
        offered.append(list(queries))
        # the built-in generator reads the database while it writes its queries: count only the runs
        generation_calls.append(len(db.called("find_abstract_ids_ranked")))
        # edit the first query, keep the second, drop the rest, add one of our own
        return [queries[0] + " & !covid", queries[1], Q_COVID]

    stats: list[QueryRunStats] = []
    docs = list(agent.find_abstracts_multi_query(QUESTION, max_rows=15, human_in_the_loop=True,
                                                 human_query_modifier=review, on_query=stats.append))
    # generated once: two fenced attempts (the builtin needs no server)
    assert [r.model for r in fake_ollama.completion_requests()] == ["fenced", "fenced"]
    assert offered[0][:2] == [Q_CF, Q_ANTI.upper()] and len(offered[0]) == 4
    ran = [a[0] for a, _ in db.called("find_abstract_ids_ranked")][generation_calls[0]:]
    assert ran == [Q_CF + " & !covid", Q_ANTI.upper(), Q_COVID]  # exactly the review's edits, in order
    assert [s.query for s in stats] == ran and all(s.ok for s in stats)

    # merged ids == union of each query's own result computed separately
    ranking = agent.retrieval.fulltext_ranking
    separately = [{i for i, _ in pg_database.find_abstract_ids_ranked(q, max_rows=15, ranking=ranking)}
                  for q in ran]
    result = agent.last_result
    assert set(result.ids) == set().union(*separately) and len(result.ids) == len(set(result.ids))
    for stat, own in zip(result.queries, separately, strict=True):
        assert set(stat.ids) == own and stat.ids_returned == len(own) <= 15
        assert stat.matches >= stat.ids_returned and stat.time_s > 0
        others = set().union(*(s for s in separately if s is not own))
        assert stat.unique_ids == len(own - others)
    assert result.queries[2].unique_ids > 0  # the covid query finds what the CF queries do not

    # fetched once, the whole union, and streamed in merged order
    fetches = db.called("fetch_documents_by_ids")
    assert len(fetches) == 1 and list(fetches[0][0][0]) == result.ids
    assert [d["id"] for d in docs] == result.ids
    for doc in docs:
        assert result.queries_for(doc["id"]) and all(q in ran for q in result.queries_for(doc["id"]))


def test_merged_order_is_best_rank_first() -> None:
    ids, found_by = merge_ranked([[5, 1, 2], [1, 9], [7]])
    assert ids == [1, 5, 7, 9, 2]  # 1 is first in list 1 and found twice; then other first places
    assert found_by[1] == [0, 1] and found_by[7] == [2]


def test_run_reviewed_queries_never_regenerates_and_skips_bad_queries(pg_database, fake_ollama) -> None:
    _fenced(fake_ollama)
    agent = QueryAgent(pg_database, _settings(fake_ollama.url))
    seen: list[QueryRunStats] = []
    result = agent.run_reviewed_queries([Q_CF, "fibrosis & (lung", "the & of", ""], max_rows=5,
                                        on_query=seen.append)
    assert fake_ollama.completion_requests() == []
    assert [s.ok for s in seen] == [True, False, False, False]
    assert "invalid" in (seen[1].error or "") and "stop words" in (seen[2].error or "")
    assert result.ids and len(result.documents) == len(result.ids) and result.failed_queries == seen[1:]
    with pytest.raises(QueryAgentError, match="none of the 2 queries could run"):
        agent.run_reviewed_queries(["fibrosis & (lung", "the"])


def test_check_query_validates_and_counts_without_running(pg_database) -> None:
    db = CountingDatabase(pg_database)
    agent = QueryAgent(db)
    good = agent.check_query("Cystic & Fibrosis:*")
    assert good.ok and good.normalized and "'cystic'" in good.normalized
    assert good.matches == pg_database.count_matches("Cystic & Fibrosis:*") > 0
    bad = agent.check_query("cystic & (fibrosis")
    assert not bad.ok and "invalid query" in (bad.error or "") and bad.matches is None
    assert db.called("find_abstract_ids_ranked") == [] and db.called("fetch_documents_by_ids") == []


def test_source_filters_reach_the_database(pg_database) -> None:
    agent = QueryAgent(pg_database)
    everything = agent.run_reviewed_queries([Q_COVID], max_rows=50)
    assert any(d["source_name"].lower() == "pubmed" for d in everything.documents)
    no_pubmed = agent.run_reviewed_queries([Q_COVID], max_rows=50, use_pubmed=False, fetch=True)
    assert all(d["source_name"].lower() != "pubmed" for d in no_pubmed.documents)


def test_multi_model_disabled_asks_the_first_model_queries_per_model_times(pg_database, fake_ollama) -> None:
    """Queries per model is never silently ignored: with one model it still sets how many queries."""
    _fenced(fake_ollama)
    settings = _settings(fake_ollama.url, multi_model_enabled=False, queries_per_model=2)
    agent = QueryAgent(pg_database, settings)
    result = agent.convert_question_multi_model(QUESTION)
    assert result.total_queries == 2 and result.model_count == 1
    assert result.unique_queries == [Q_CF, Q_ANTI.upper()]
    assert {r.model for r in result.all_queries} == {"fenced"}  # builtin:keywords, listed second, not asked
    assert agent.convert_question(QUESTION) == Q_ANTI.upper()  # one more query: the script's last reply
    assert len(fake_ollama.completion_requests()) == 3


def test_each_setting_changes_what_the_agent_does(pg_database, fake_ollama) -> None:
    replies = ["cystic & fibrosis", "Cystic&Fibrosis", "lung & fibrosis"]
    fake_ollama.models["echo"] = ModelScript(replies=replies)

    def offered_with(**changes: Any) -> tuple[list[str], Any]:
        fake_ollama.requests.clear()
        fake_ollama._calls.clear()
        agent = QueryAgent(pg_database, _settings(fake_ollama.url, models=["echo"], **changes))
        seen: list[list[str]] = []
        list(agent.find_abstracts_multi_query(QUESTION, max_rows=3, human_in_the_loop=True,
                                              human_query_modifier=lambda qs: seen.append(qs) or qs))
        return seen[0], agent

    # the modifier receives the unique queries (BMLibrarian's documented behaviour), whatever the
    # review table shows (show_all_queries_to_user is the table's setting)
    for show_all in (True, False):
        unique_shown, agent = offered_with(queries_per_model=3, show_all_queries_to_user=show_all)
        assert unique_shown == ["cystic & fibrosis", "lung & fibrosis"]
        assert len(agent.last_result.queries) == 2
    all_shown, agent = offered_with(queries_per_model=3, deduplicate_results=False)
    assert all_shown == ["cystic & fibrosis", "Cystic & Fibrosis", "lung & fibrosis"]
    assert [s.query for s in agent.last_result.queries] == ["cystic & fibrosis", "Cystic & Fibrosis",
                                                             "lung & fibrosis"]
    one, _ = offered_with(queries_per_model=1)
    assert one == ["cystic & fibrosis"]
    offered_with(temperature=0.7, queries_per_model=1)
    assert fake_ollama.completion_requests()[0].body["options"]["temperature"] == 0.7

    strict = QueryAgent(pg_database, _settings(fake_ollama.url, models=["echo"], queries_per_model=3,
                                               allow_query_selection=False))
    with pytest.raises(QueryAgentError, match="allow_query_selection"):
        list(strict.find_abstracts_multi_query(QUESTION, human_in_the_loop=True,
                                               human_query_modifier=lambda qs: qs[:1]))
    edited = list(strict.find_abstracts_multi_query(
        QUESTION, max_rows=3, human_in_the_loop=True,
        human_query_modifier=lambda qs: [q.replace("lung", "pancrea:*") for q in qs]))
    assert edited and [s.query for s in strict.last_result.queries][-1] == "pancrea:* & fibrosis"

    offline = QueryAgent(pg_database, _settings("http://127.0.0.1:9", models=["echo", "builtin:keywords"]))
    result = offline.convert_question_multi_model(QUESTION)
    assert "127.0.0.1:9" in (result.all_queries[0].error or "") and result.unique_queries


def test_no_query_at_all_is_a_clear_error(pg_database, fake_ollama) -> None:
    fake_ollama.models["prose"] = ModelScript(replies=["I am sorry, I cannot write database queries today."])
    agent = QueryAgent(pg_database, _settings(fake_ollama.url, models=["prose", "missing"]))
    with pytest.raises(QueryAgentError, match="no query could be generated"):
        list(agent.find_abstracts_multi_query(QUESTION))


def test_cancel_stops_before_the_next_query(pg_database) -> None:
    token = CancelToken()
    agent = QueryAgent(pg_database)
    db_calls: list[QueryRunStats] = []

    def stop_after_first(stat: QueryRunStats) -> None:
        db_calls.append(stat)
        token.cancel()

    with pytest.raises(Cancelled):
        agent.run_reviewed_queries([Q_CF, Q_COVID], cancel=token, on_query=stop_after_first)
    assert [s.query for s in db_calls] == [Q_CF]


def test_cli_search_json(pg_dsn, capsys, data_home) -> None:
    from kmds_desktop.cli import main

    code = main(["literature", "search", QUESTION, "--models", "builtin:keywords", "--queries-per-model", "3",
                 "--max-rows", "5", "--dsn", pg_dsn, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads(out)
    rows = data["attempts"]
    assert [(r["model"], r["attempt"]) for r in rows] == [("builtin:keywords", a) for a in (1, 2, 3)]
    assert all("generation_time" in r and r["error"] is None for r in rows)
    assert len(data["queries"]) == 3 and all({"matches", "ids", "refs", "unique_ids", "time_s", "error"}
                                              <= set(q) for q in data["queries"])
    assert [q["provenance"]["attempt"] for q in data["queries"]] == [1, 2, 3]
    union = set().union(*(set(q["ids"]) for q in data["queries"]))
    assert set(data["merged_ids"]) == union and [d["id"] for d in data["documents"]] == data["merged_ids"]
    assert [d["rank"] for d in data["documents"]] == list(range(1, len(data["documents"]) + 1))
    assert all(d["found_by"] and d["ref"] for d in data["documents"])

    code = main(["literature", "search", QUESTION, "--queries-per-model", "3", "--models", " ",
                 "--dsn", pg_dsn])
    assert code == 2 and "query_generation.models" in capsys.readouterr().err

    # an empty question and one made only of common words: a message, not a traceback
    assert main(["literature", "search", "  ", "--dsn", pg_dsn]) == 1
    err = capsys.readouterr().err
    assert "error: the research question is empty" in err and "Traceback" not in err
    assert main(["literature", "search", "What is the effect of the?", "--dsn", pg_dsn]) == 1
    assert "no usable content words" in capsys.readouterr().err


AGENT_INJECTIONS = [
    "'; DROP TABLE document; --",
    "cancer') OR 1=1 --",
    "x'); DELETE FROM sources; --",
    "$$; SELECT pg_sleep(10); $$",
    "fibrosis & !x'); TRUNCATE document CASCADE; --",
    "%s %(q)s {0} %%",
]


def test_injection_strings_through_the_agent_and_the_cli(pg_database, pg_dsn, fake_ollama, capsys,
                                                         data_home) -> None:
    """SQL in the question, in a model's reply, in the review's edits and in the CLI stays data."""
    import psycopg

    from kmds_desktop.cli import main

    def counts() -> tuple[int, int]:
        with psycopg.connect(pg_dsn) as conn:
            return (conn.execute("SELECT count(*) FROM document").fetchone()[0],
                    conn.execute("SELECT count(*) FROM sources").fetchone()[0])

    before = counts()
    fake_ollama.models["evil"] = ModelScript(replies=AGENT_INJECTIONS)
    agent = QueryAgent(pg_database, _settings(fake_ollama.url, models=["evil", "builtin:keywords"],
                                              queries_per_model=3))
    for text in AGENT_INJECTIONS:
        fake_ollama._calls.clear()
        # the question reaches builtin:keywords (which asks the database to stem its words), the model's
        # replies are injection strings, and the review appends the raw string as a query of its own
        docs = list(agent.find_abstracts_multi_query(
            f"cystic fibrosis {text}", max_rows=5, human_in_the_loop=True,
            human_query_modifier=lambda qs, t=text: [*qs, t]))
        assert docs and agent.last_result.ok_queries
        # the raw string is either a valid tsquery (it runs) or the server says why it is not
        raw = [s for s in agent.last_result.queries if s.query == text.strip()]
        assert len(raw) == 1
        stat = agent.check_query(text)
        assert stat.valid is not None
        assert raw[0].ok is stat.valid, (raw[0], stat)
        if not stat.valid:
            assert stat.invalid_reason and raw[0].error == f"invalid query: {stat.invalid_reason}"
        result = agent.run_reviewed_queries([text, Q_CF], max_rows=3)
        assert result.queries[1].ok and result.ids
        code = main(["literature", "search", f"cystic fibrosis {text}", "--models", "builtin:keywords",
                     "--max-rows", "3", "--dsn", pg_dsn, "--json"])
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        # builtin:keywords turns the question's words into a query: the SQL is only ever data
        assert code == 0, captured.err
        assert isinstance(json.loads(captured.out)["merged_ids"], list)
    assert counts() == before
    assert pg_database.count_matches("cystic & fibrosis") > 0


def test_check_query_names_the_terms_no_document_has(pg_database) -> None:
    """An invented term still validates and, inside an OR, even matches: the check names it."""
    agent = QueryAgent(pg_database)
    stat = agent.check_query("cystic & (fibrosis | fungalxyzzy:*)")
    assert stat.valid and stat.matches and stat.matches > 0
    assert stat.absent_terms == ["'fungalxyzzi':*"]
    assert agent.check_query("cystic & fibrosis").absent_terms == []
    assert pg_database.absent_terms("qqqzzz | wwwxxx") == ["'qqqzzz'", "'wwwxxx'"]
