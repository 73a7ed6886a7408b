"""Model scores feeding the order: with the option on, each record's 1–5 score is a feature of the
active-learning model, so with scores that separate the includes from the excludes the high-scored
undecided records come first (and with it off they play no part); "why ranked high" names the score
where it adds; records without one get the mean and a "no score" mark; the choice is kept per review;
a score never decides a record. Until the user chooses, each scorer's scores are checked against the
decisions made (AUC on the screened records): those that separate feed the order, those that do not
(3 of 5 to every record) are left out and the line says so."""

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
from kmds_desktop.literature.screening.model_scores import (
    AUC_THRESHOLD,
    EMBEDDING_SCORER,
    MIN_DECISIONS_EACH,
    auc,
    check_scores,
)
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
        "model scores do not feed the order (LLM scores for 20 of 20 records; they join once they separate "
        "your includes from your excludes, checked from 5 scored of each)"
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
    assert order("--scores-in-model", "auto")["scores_line"] == off["scores_line"]  # the check decides again
    assert order("--mode", "rank")["order"] == "rank" and order()["order"] == "rank"  # kept, as in the window
    with pytest.raises(SystemExit):
        main(["literature", "screen", "order", "r", "--store", str(path), "--scores-in-model", "maybe"])


# -- do the scores mean something? (the check against the user's decisions) --------------------------

def decide_each(session: ScreeningSession, n: int = MIN_DECISIONS_EACH) -> None:
    """``n`` excludes (records 0..n-1) and ``n`` includes (records 10..10+n-1), as a reviewer decides."""
    for i in range(n):
        session.go_to(("t", str(i)))
        session.exclude("wrong population")
        session.go_to(("t", str(10 + i)))
        session.include()


def score_flat(session: ScreeningSession, model: str, value: int = 3) -> None:
    """The same score for every record (a model that says 3 of 5 to everything)."""
    for rec in session.records:
        session.store.set_model_score(model, QUESTION, rec.key, value, "maybe relevant")
    session.model_scores_changed()


def test_auc_counts_ties_as_half_and_needs_both_sides() -> None:
    assert auc([5, 4], [1, 2]) == 1.0
    assert auc([1, 2], [5, 4]) == 0.0
    assert auc([3, 3], [3, 3]) == 0.5
    assert auc([5, 3], [3, 1]) == (1 + 1 + 0.5 + 1) / 4
    assert auc([], [1]) is None and auc([1], []) is None


def test_the_check_needs_its_decisions_and_names_a_constant_scorer() -> None:
    few = check_scores("judge", [(5, True)] * (MIN_DECISIONS_EACH - 1) + [(1, False)] * 9)
    assert few.separates is None and "too few" in few.line()
    flat = check_scores("judge", [(3, True)] * 6 + [(3, False)] * 6 + [(None, True)])
    assert flat.separates is False and flat.constant == 3 and flat.included == 6
    assert "gave 3 of 5 to every screened record" in flat.line() and "left out" in flat.line()
    good = check_scores("judge", [(5, True), (4, True), (4, True), (3, True), (5, True),
                                  (1, False), (2, False), (3, False), (1, False), (2, False)])
    assert good.auc is not None and good.auc >= AUC_THRESHOLD and good.separates is True
    weak = check_scores("judge", [(4, True), (2, True), (3, True), (3, True), (2, True),
                                  (3, False), (2, False), (4, False), (3, False), (2, False)])
    assert weak.auc is not None and weak.auc < AUC_THRESHOLD and weak.separates is False
    assert f"below {AUC_THRESHOLD:.2f}" in weak.line()


def test_scores_that_separate_the_decisions_feed_the_order_by_default(store) -> None:
    session = open_session(store)
    score_all(session)
    first_decisions(session)
    assert session.scores_in_model is False  # 1 and 1 decided: too few to tell, so not yet
    session.go_to(("t", "1"))
    decide_each(session)
    assert session.review.settings.get(SCORES_SETTING) is None  # nobody chose: the check decides
    assert session.scores_in_model is True and session.features.score_columns == 2
    assert all(relevant(i) for i in upcoming(session))
    assert "AUC 1.00 on 5 included / 5 excluded" in session.score_check_line()
    assert "separate includes from excludes" in session.score_check_line()
    session.close()


def test_scores_that_do_not_separate_are_left_out_and_said_so(store) -> None:
    session = open_session(store)
    score_flat(session, "judge")
    decide_each(session)
    plain = upcoming(session)
    assert session.scores_in_model is False and session.features.score_columns == 0
    line = session.score_check_line()
    assert line == ("judge gave 3 of 5 to every screened record (5 included / 5 excluded): its scores do not "
                    "separate includes from excludes and are left out of the order.")
    # Turned on by the user, scores shown not to separate still stay out (and the line still says why).
    session.set_scores_in_model(True)
    assert session.features.score_columns == 0 and upcoming(session) == plain
    assert "left out of the order" in session.score_check_line()
    # A second model that separates joins alone; the flat one stays out.
    score_all(session, model="reader")
    values, _label = session.score_column(session.scorers_in_order)
    assert session.scorers_in_order == {"reader"} and values[10] == 5 and values[0] == 1
    session.close()
