"""Model scores: each LLM scores the undecided records 1–5 (the score alone; a reason a model adds is
kept), through the real Ollama client against a scripted server on 127.0.0.1; hostile replies end as a
note per record; scores are cached per (model, question, document), so a second run asks nothing again
(and Cancel + run resumes); without an LLM the embedding similarity scores, labelled as such; the queue
can be ordered by the scores; a score never decides."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
from support.fake_ollama import ModelScript

from kmds_desktop.app.events import Change
from kmds_desktop.app.screening import MODEL_SCORES_CHANGED, ScreeningSession
from kmds_desktop.app.screening_scores import SCORE_MAX_TOKENS, score_by_similarity, score_undecided
from kmds_desktop.literature.screening.decisions import DecisionStore, ScreeningError
from kmds_desktop.literature.screening.model_scores import (
    EMBEDDING_SCORER,
    MAX_ABSTRACT_CHARS,
    SCORE_SCHEMA,
    SCORE_SYSTEM,
    ScoreReplyError,
    parse_score,
    score_prompt,
)
from kmds_desktop.literature.screening.ordering import OrderMode
from kmds_desktop.literature.screening.records import ScreeningRecord
from kmds_desktop.llm.ollama_backend import OllamaBackend
from kmds_desktop.tasks import CancelToken

MB = 1024 * 1024
QUESTION = "Does sputum viscosity change with inhaled mucolytics in cystic fibrosis?"
REPLIES = [
    '{"score": 5, "reason": "A trial of inhaled DNase measuring sputum viscosity. It is on topic."}',
    '{"score": ' * 4000 + "3" + "}" * 4000,  # nested past the JSON decoder's depth
    "{" * (10 * MB),  # 10 MB: the backend stops reading at its limit
    '{"score": "very", "reason": "Relevant, I think."}',  # no number
    "Score: 2. Reason: about sweat chloride, not sputum.",  # prose, still a score
]


def records(n: int = 5) -> list[ScreeningRecord]:
    topics = ["inhaled dnase sputum viscosity", "pseudomonas", "sweat chloride", "growth", "sweat test"]
    return [
        ScreeningRecord(source="cf", external_id=str(i), title=f"Record {i}: {topics[i % 5]}",
                        abstract=f"We studied {topics[i % 5]} in {10 + i} patients.", rank=i + 1)
        for i in range(n)
    ]


@pytest.fixture()
def session(tmp_path: Path):
    store = DecisionStore(tmp_path / "screening.sqlite3")
    s = ScreeningSession.open(store, "r", question=QUESTION, background=False)
    s.add_records(records(), origin="#1")
    yield s
    s.close()
    store.close()


def test_hostile_replies_end_as_a_note_per_record_and_the_rest_are_scored(session, fake_ollama) -> None:
    fake_ollama.models["judge"] = ModelScript(replies=list(REPLIES), chunk_size=64 * 1024)
    backend = OllamaBackend(fake_ollama.url, "judge", timeout=60)
    seen: list[tuple[int, int]] = []
    summary = score_undecided(session, backend, ["judge"], progress=lambda d, t, _m: seen.append((d, t)))
    assert seen == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]  # serial, one record at a time
    assert summary.scored == 2 and len(summary.notes) == 3 and not summary.cancelled
    by_id = {k[1]: session.model_scores(k) for k in (r.key for r in session.records)}
    assert by_id["0"][0].score == 5 and by_id["0"][0].reason.startswith("A trial of inhaled DNase")
    assert by_id["4"][0].score == 2 and "sweat chloride" in by_id["4"][0].reason
    assert by_id["1"][0].score is None and "nested too deeply" in by_id["1"][0].note
    assert by_id["2"][0].score is None and "characters" in by_id["2"][0].note  # the reading limit
    assert by_id["3"][0].score is None and "no score 1–5" in by_id["3"][0].note
    assert all(not s.text().endswith("— ") for v in by_id.values() for s in v)
    assert session.decisions == {}  # a score never decides
    body = fake_ollama.completion_requests()[0].body
    assert body.get("format", {}).get("required") == ["score"]  # the schema asks for the score alone
    assert body["options"]["num_predict"] == SCORE_MAX_TOKENS <= 16  # and a runaway reply is cut short


def test_a_score_alone_is_stored_and_shown_without_a_reason(session, fake_ollama) -> None:
    fake_ollama.models["judge"] = ModelScript(replies=['{"score": 3}'])
    summary = score_undecided(session, OllamaBackend(fake_ollama.url, "judge", timeout=60), ["judge"])
    assert summary.scored == 5 and not summary.notes
    first = session.model_scores(session.records[0].key)[0]
    assert (first.score, first.reason, first.text()) == (3, "", "judge: 3/5")
    assert "reason" not in SCORE_SYSTEM and "reason" not in json.dumps(SCORE_SCHEMA)


def test_the_prompt_carries_the_abstract_up_to_its_limit_cut_at_a_word() -> None:
    long = "word " * (MAX_ABSTRACT_CHARS // 2)
    prompt = score_prompt(QUESTION, "Title", long)
    assert prompt.startswith(f"Review question: {QUESTION}")  # the question first: the cached prefix
    abstract = prompt.split("Abstract: ", 1)[1]
    assert abstract.endswith("word …") and len(abstract) <= MAX_ABSTRACT_CHARS + 2
    assert score_prompt(QUESTION, "Title", "short one").endswith("Abstract: short one")


def test_scores_are_cached_and_a_cancelled_run_resumes(session, fake_ollama, tmp_path: Path) -> None:
    fake_ollama.models["judge"] = ModelScript(replies=['{"score": 4, "reason": "On topic."}'])
    backend = OllamaBackend(fake_ollama.url, "judge", timeout=60)
    cancel = CancelToken()

    def progress(done: int, _total: int, _msg: str) -> None:
        if done == 3:
            cancel.cancel()

    first = score_undecided(session, backend, ["judge"], progress=progress, cancel=cancel)
    assert first.cancelled and first.scored < 5
    asked_before = len(fake_ollama.completion_requests())
    second = score_undecided(session, backend, ["judge"])
    assert not second.cancelled and second.cached == first.scored
    assert second.scored == 5 - first.scored
    assert len(fake_ollama.completion_requests()) == asked_before + second.scored
    third = score_undecided(session, backend, ["judge"])
    assert third.scored == 0 and third.cached == 5  # nothing asked again
    assert len(fake_ollama.completion_requests()) == asked_before + second.scored
    # Another review of the same question, in the same store, reuses the cache.
    other = ScreeningSession.open(session.store, "r2", question=QUESTION, background=False)
    other.add_records(records(), origin="#1")
    assert all(other.model_scores(r.key)[0].score == 4 for r in other.records)
    other.close()


def test_the_queue_can_be_ordered_by_the_scores(session, fake_ollama) -> None:
    scores = {"0": 1, "1": 2, "2": 5, "3": 3, "4": 4}

    def reply(prompt: str, _body: dict) -> str:
        rid = prompt.split("Title: Record ", 1)[1].split(":", 1)[0]
        return f'{{"score": {scores[rid]}, "reason": "Because."}}'

    fake_ollama.models["judge"] = ModelScript(replies=[reply])
    score_undecided(session, OllamaBackend(fake_ollama.url, "judge", timeout=60), ["judge"])
    session.set_order(OrderMode.SCORE)
    assert session.current.external_id == "2" and session.view().ordered_by == "model score (1–5)"
    session.exclude("wrong population")
    assert session.current.external_id == "4"
    session.set_order(OrderMode.RANK)
    assert session.current.external_id == "0"


def test_without_an_llm_the_embedding_similarity_scores_labelled(session) -> None:
    with pytest.raises(ScreeningError, match="no embedding vectors"):
        score_by_similarity(session)
    q = np.zeros(4, dtype=np.float32)
    q[0] = 1
    vectors = {r.key: np.array([1.0 - 0.2 * i, 0.2 * i, 0, 0], dtype=np.float32) for i, r in
               enumerate(session.records)}
    session.add_vectors(vectors, question_vector=q)
    summary = score_by_similarity(session)
    assert summary.scored == 5
    first = session.model_scores(session.records[0].key)[0]
    last = session.model_scores(session.records[4].key)[0]
    assert first.model.startswith(EMBEDDING_SCORER) and "no LLM read it" in first.reason
    assert first.score == 5 and last.score < first.score


def test_score_parsing_is_bounded_in_time() -> None:
    import time

    started = time.perf_counter()
    for reply in ['{"score": ' * 20000, "score " * 12000, "{" * 60000, '"' * 60000]:
        with pytest.raises(ValueError):
            parse_score(reply)
    assert time.perf_counter() - started < 1.0


def test_a_hung_model_is_cancelled_promptly(session, fake_ollama) -> None:
    fake_ollama.models["hang"] = ModelScript(hang=True)
    cancel = CancelToken()
    threading.Timer(0.5, cancel.cancel).start()
    summary = score_undecided(session, OllamaBackend(fake_ollama.url, "hang", timeout=60), ["hang"],
                              cancel=cancel)
    assert summary.cancelled and summary.scored == 0


def test_decided_records_are_scored_first_so_the_scores_can_be_checked(session, fake_ollama) -> None:
    """A run on a review with decisions asks about a few decided records first (includes and excludes
    in turn), then the undecided; every request sends the same instructions as its system message and
    the question before the record, so the server's prompt cache reads the instructions once."""
    session.go_to(session.records[1].key)
    session.include()
    session.go_to(session.records[3].key)
    session.exclude("wrong population")
    seen: list[str] = []

    def reply(prompt: str, _body: dict) -> str:
        seen.append(prompt.split("Title: Record ", 1)[1].split(":", 1)[0])
        return '{"score": 4, "reason": "On topic."}'

    fake_ollama.models["judge"] = ModelScript(replies=[reply])
    summary = score_undecided(session, OllamaBackend(fake_ollama.url, "judge", timeout=60), ["judge"])
    assert seen == ["1", "3", "0", "2", "4"]  # the include, the exclude, then the undecided in order
    assert summary.scored == 5 and "too few screened records with a score" in summary.line()
    bodies = [r.body for r in fake_ollama.completion_requests()]
    systems = {b["messages"][0]["content"] for b in bodies}
    assert systems == {SCORE_SYSTEM} and all(b["messages"][0]["role"] == "system" for b in bodies)
    users = [b["messages"][-1]["content"] for b in bodies]
    assert all(u.startswith(f"Review question: {QUESTION}\n\nTitle: Record ") for u in users)
    assert len(SCORE_SYSTEM) < 300  # short: the model reads it on every cold cache
    assert session.decisions.keys() == {session.records[1].key, session.records[3].key}  # nothing decided


def test_each_score_is_announced_as_it_comes(session, fake_ollama) -> None:
    fake_ollama.models["judge"] = ModelScript(replies=['{"score": 2, "reason": "Off topic."}'])
    scored_when_told: list[int] = []

    def told(change: Change) -> None:
        if change.kind == MODEL_SCORES_CHANGED:
            scored_when_told.append(sum(bool(session.model_scores(r.key)) for r in session.records))

    session.subscribe(told)
    score_undecided(session, OllamaBackend(fake_ollama.url, "judge", timeout=60), ["judge"])
    assert scored_when_told[:5] == [1, 2, 3, 4, 5]  # one event per record, then the run's own


@pytest.mark.parametrize(("reply", "score"), [
    ('{"score": "\u00b2"}', None),  # a digit to str.isdigit(), not to int()
    ('{"score": "' + "1" * 5000 + '"}', None),  # too many digits for int()
    ("score: -3", None), ("score:\n-2", None),  # a sign: not on the 1-5 scale
    ("Score: 4/10", None), ("score = 1e9", None), ("score: 3.5", None),  # another scale, not a score
    ("Score: 4/5", 4), ("score: 4", 4), ('{"score": "5"}', 5),
])
def test_a_score_is_read_only_where_the_reply_gives_one_on_the_scale(reply: str, score: int | None) -> None:
    if score is None:
        with pytest.raises(ScoreReplyError):
            parse_score(reply)
    else:
        assert parse_score(reply)[0] == score


def test_an_odd_score_reply_is_a_note_and_the_run_goes_on(session, fake_ollama) -> None:
    """A reply whose "score" int() could not read (a superscript two) once raised out of the run and
    stopped it at the same record every time."""
    fake_ollama.models["judge"] = ModelScript(replies=['{"score": "\u00b2"}', '{"score": 4}'])
    summary = score_undecided(session, OllamaBackend(fake_ollama.url, "judge", timeout=60), ["judge"])
    assert summary.scored == 4 and len(summary.notes) == 1


def test_the_score_order_reads_one_kind_of_score_as_the_column_does(session, fake_ollama) -> None:
    """A review scored by similarity first and by an LLM after: the score order (and the Scores tab's
    mean) read the LLM's scores alone, as the active-learning column does; averaging a cosine's 5 with a
    reader's 2 put the similarity's favourite first."""
    q = np.array([1.0, 0, 0, 0], dtype=np.float32)
    near = np.array([1.0, 0, 0, 0], dtype=np.float32)
    far = np.array([0, 1.0, 0, 0], dtype=np.float32)
    session.add_vectors({r.key: near if r.external_id == "4" else far for r in session.records},
                        question_vector=q)
    score_by_similarity(session)

    def reply(prompt: str, _body: dict) -> str:
        return '{"score": 5}' if "Title: Record 1:" in prompt else '{"score": 2}'

    fake_ollama.models["judge"] = ModelScript(replies=[reply])
    score_undecided(session, OllamaBackend(fake_ollama.url, "judge", timeout=60), ["judge"])
    session.set_order(OrderMode.SCORE)
    assert session.current.external_id == "1"  # the LLM's 5, not record 4's similarity 5 averaged in
    means, _kind = session.score_column()
    assert means[[r.external_id for r in session.records].index("1")] == 5
