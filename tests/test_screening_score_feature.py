"""Model scores feeding the order: with the option on, each record's 1–5 score is a feature of the
active-learning model, so with scores that separate the includes from the excludes the high-scored
undecided records come first (and with it off they play no part); "why ranked high" names the score
where it adds; records without one get the mean and a "no score" mark; the choice is kept per review;
a score never decides a record."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kmds_desktop.app.screening import (
    EMBEDDING_SCORE_LABEL,
    LLM_SCORE_LABEL,
    SCORES_SETTING,
    ScreeningSession,
)
from kmds_desktop.literature.screening.decisions import DecisionStore
from kmds_desktop.literature.screening.model_scores import EMBEDDING_SCORER
from kmds_desktop.literature.screening.ordering import TextFeatures
from kmds_desktop.literature.screening.records import ScreeningRecord

QUESTION = "Does quuxomab help zebrafish fins regrow?"  # no word of it in the records: no question prior
N = 20
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
         "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"]


def records() -> list[ScreeningRecord]:
    """Texts that say nothing about relevance (one word of its own each), ranks 1..N; the relevant
    ones (10..19) come last in rank order."""
    return [
        ScreeningRecord(source="t", external_id=str(i), title=f"Record {WORDS[i]}",
                        abstract=f"A study of {WORDS[i]}{WORDS[i]} outcomes.", rank=i + 1)
        for i in range(N)
    ]


def relevant(i: int) -> bool:
    return i >= N // 2


@pytest.fixture()
def store(tmp_path: Path):
    s = DecisionStore(tmp_path / "screening.sqlite3")
    yield s
    s.close()


def open_session(store: DecisionStore, **kwargs) -> ScreeningSession:
    s = ScreeningSession.open(store, "r", question=QUESTION, background=False, **kwargs)
    if not s.records:
        s.add_records(records(), origin="#1")
    return s


def score_all(session: ScreeningSession, model: str = "judge", skip: tuple[int, ...] = ()) -> None:
    for rec in session.records:
        if int(rec.external_id) in skip:
            continue
        good = relevant(int(rec.external_id))
        reason = "on topic" if good else "off topic"
        session.store.set_model_score(model, QUESTION, rec.key, 5 if good else 1, reason)
    session.model_scores_changed()


def first_decisions(session: ScreeningSession) -> None:
    """One exclude (the first by rank) and one include, so the model trains."""
    assert session.current.external_id == "0"
    session.exclude("wrong population")
    session.go_to(("t", "10"))
    session.include()


def upcoming(session: ScreeningSession, n: int = 5) -> list[int]:
    return [int(session.records[i].external_id) for i, _how in session.queue(n)]


def test_separating_scores_put_the_high_scored_undecided_records_first(store) -> None:
    session = open_session(store)
    score_all(session)
    first_decisions(session)
    assert session.scores_in_model is False  # off by default
    off = upcoming(session)
    assert not all(relevant(i) for i in off)  # without the option the scores play no part
    assert session.view().record.external_id == str(off[0])

    decided = dict(session.decisions)
    session.set_scores_in_model(True)
    on = upcoming(session)
    assert all(relevant(i) for i in on), on
    assert relevant(int(session.current.external_id))  # the queue went on from the new order
    assert session.view().ordered_by == "model score"
    assert session.decisions == decided  # a score never decides a record
    why = dict(session.view().why)
    assert LLM_SCORE_LABEL in why and why[LLM_SCORE_LABEL] > 0

    session.set_scores_in_model(False)
    assert upcoming(session) == off
    assert all(t != LLM_SCORE_LABEL for t, _w in session.view().why)
    session.close()


def test_the_choice_is_kept_with_the_review_and_new_scores_join_the_features(store) -> None:
    session = open_session(store)
    first_decisions(session)
    session.set_scores_in_model(True)
    assert session.features.score_columns == 0  # nothing scored yet: no columns
    assert "none yet" in session.scores_in_model_line()
    score_all(session, skip=(3, 15))
    assert session.features.score_columns == 2 and session.features.with_scores_count == N - 2
    assert "LLM scores of 18 of 20 records feed the order" in session.scores_in_model_line()
    assert all(relevant(i) for i in upcoming(session))
    session.close()

    again = open_session(store)
    assert again.scores_in_model is True and again.review.settings[SCORES_SETTING] is True
    assert open_session(store, scores_in_model=False).scores_in_model is False
    again.close()


def test_embedding_scores_are_used_when_no_llm_scored_and_labelled_so(store) -> None:
    session = open_session(store, scores_in_model=True)
    score_all(session, model=f"{EMBEDDING_SCORER} (all-MiniLM-L6-v2)")
    assert session.score_column()[1] == EMBEDDING_SCORE_LABEL
    first_decisions(session)
    assert all(relevant(i) for i in upcoming(session))
    assert EMBEDDING_SCORE_LABEL in dict(session.view().why)
    # Once an LLM scored, its scores alone make the column (a reader's 4 is not a cosine's 4).
    session.store.set_model_score("judge", QUESTION, session.records[0].key, 2, "off topic")
    session.model_scores_changed()
    values, label = session.score_column()
    assert label == LLM_SCORE_LABEL and values[0] == 2 and all(v is None for v in values[1:])
    session.close()


def test_score_columns_scaled_with_the_mean_and_a_mark_for_the_unscored() -> None:
    feats = TextFeatures.build(["a cat", "a dog", "a cow"], "cat")
    scored = feats.with_scores([5, None, 1], weight=1.0, label="LLM score (1–5)")
    block = scored.matrix[:, -2:].toarray()
    assert np.allclose(block, [[1.0, 0.0], [0.5, 1.0], [0.0, 0.0]])
    assert scored.question is not None and np.allclose(scored.question[:, -2:].toarray(), [[1.0, 0.0]])
    assert scored.with_scores([None, None, None]).score_columns == 0  # back to the plain features
    assert scored.with_scores([2, 2, 2]).matrix.shape == scored.matrix.shape
    assert scored.with_question("dog").question.shape[1] == scored.matrix.shape[1]


def test_cli_order_turns_the_scores_in_the_model_on_and_off(tmp_path: Path, data_home: Path, capsys) -> None:
    import json

    from kmds_desktop.cli import main

    path = tmp_path / "cli.sqlite3"
    store = DecisionStore(path)
    session = open_session(store)
    score_all(session)
    first_decisions(session)
    session.close()
    store.close()

    def order(*extra: str) -> dict:
        assert main(["literature", "screen", "order", "r", "--store", str(path), "--next", "5", "--json",
                     *extra]) == 0
        return json.loads(capsys.readouterr().out)

    off = order()
    assert off["scores_in_model"] is False and off["scores_line"] == (
        "model scores do not feed the order (LLM scores for 20 of 20 records)"
    )
    assert not all(relevant(int(r["external_id"])) for r in off["next"])
    on = order("--scores-in-model", "on")
    assert on["scores_in_model"] is True
    assert "LLM scores of 20 of 20 records feed the order" in on["scores_line"]
    assert all(relevant(int(r["external_id"])) for r in on["next"])
    assert all(LLM_SCORE_LABEL in r["why"] for r in on["next"])
    assert order()["scores_in_model"] is True  # kept with the review
    ids = [r["external_id"] for r in off["next"]]
    assert [r["external_id"] for r in order("--scores-in-model", "off")["next"]] == ids
    assert main(["literature", "screen", "order", "r", "--store", str(path)]) == 0
    text = capsys.readouterr().out
    assert "order active; model scores do not feed the order" in text and "  1. t:" in text
    with pytest.raises(SystemExit):
        main(["literature", "screen", "order", "r", "--store", str(path), "--scores-in-model", "maybe"])
