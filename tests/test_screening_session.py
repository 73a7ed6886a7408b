"""The screening session: decisions persist (a new session object after a 'kill'), undo and change,
progress wording, key presses, duplicates across sources, new records joining, stopping and the sample."""

from __future__ import annotations

import stat
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from kmds_desktop.app.events import Change
from kmds_desktop.app.screening import (
    DECIDED,
    RECORD_SHOWN,
    RECORDS_ADDED,
    SCORES_TRAINED,
    TRAINING_WANTED,
    ScreeningSession,
)
from kmds_desktop.literature.screening.decisions import DEFAULT_REASONS, DecisionStore
from kmds_desktop.literature.screening.ordering import OrderMode
from kmds_desktop.literature.screening.records import ScreeningRecord
from kmds_desktop.tasks import CancelToken

TOPICS = [
    "mucus calcium viscosity sputum",
    "pseudomonas infection antibiotics lung",
    "sweat chloride test diagnosis",
    "pancreatic enzyme digestion nutrition",
]


def records(n: int = 24, source: str = "cf") -> list[ScreeningRecord]:
    return [
        ScreeningRecord(
            source=source,
            external_id=f"{source}:{i}",
            title=f"Study {i} of {TOPICS[i % 4]}",
            abstract=f"We examined {TOPICS[i % 4]} in {i} patients.",
            rank=i + 1,
            authors=[f"Author {i}"],
            year=1980 + i % 10,
            journal="J CF",
        )
        for i in range(n)
    ]


@pytest.fixture()
def store(tmp_path: Path) -> DecisionStore:
    s = DecisionStore(tmp_path / "screening" / "screening.sqlite3")
    yield s
    s.close()


def open_session(store: DecisionStore, **kw) -> ScreeningSession:
    session = ScreeningSession.open(store, "review", question="calcium and mucus", **kw)
    return session


def test_store_is_private_and_wal(store: DecisionStore) -> None:
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    assert store._read("PRAGMA journal_mode")[0][0] == "wal"


def test_decisions_persist_across_a_new_session(store: DecisionStore, tmp_path: Path) -> None:
    session = open_session(store, background=False)
    session.add_records(records(), origin="#1")
    first = session.current
    assert first is not None and first.rank == 1  # rank order before any decision
    session.include(note="key paper")
    second = session.current
    session.exclude("wrong population")
    # No close(): a killed process. A new store object on the same file sees every decision.
    again = DecisionStore(store.path)
    fresh = ScreeningSession(again, "review", background=False)
    assert fresh.progress().line() == "2 of 24 screened · 1 included · 1 since the last include"
    assert fresh.decisions[first.key].note == "key paper"
    assert fresh.decisions[second.key].reason == "wrong population"
    assert fresh.current is not None and fresh.current.key not in (first.key, second.key)
    assert fresh.order is OrderMode.ACTIVE  # none chosen yet: active learning
    fresh.set_order(OrderMode.RANDOM)
    later = ScreeningSession(DecisionStore(store.path), "review", background=False)
    assert later.order is OrderMode.RANDOM  # the order chosen last is the review's, as the decisions are
    later.store.close()
    again.close()


def test_progress_line_plurals_and_thousands() -> None:
    from kmds_desktop.app.screening import Progress

    assert (
        Progress(1240, 312, 41, 19).line()
        == "312 of 1,240 screened · 41 included · 19 since the last include"
    )
    from kmds_desktop.literature.screening.stopping import plural

    assert plural(1, "record") == "1 record" and plural(2, "record") == "2 records"


def test_undo_and_change_a_decided_record(store: DecisionStore) -> None:
    session = open_session(store, background=False)
    session.add_records(records(), origin="#1")
    a = session.current
    session.include()
    b = session.current
    session.exclude("wrong outcome")
    assert session.undo().key == b.key  # back on screen, undecided
    assert b.key not in session.decisions and session.progress().screened == 1
    session.maybe()
    # Go back to the first and change it; the queue resumes after the last decided record.
    session.go_to(a.key)
    assert session.view().decision.decision == "include"
    assert session.view().position.startswith("decided record 1 of 2")
    session.exclude("duplicate")
    assert session.decisions[a.key].decision == "exclude"
    session.undo()  # the change is undone: include again
    assert session.decisions[a.key].decision == "include"
    assert session.undo().key == b.key and b.key not in session.decisions


def test_undo_restores_each_record_and_the_queue_as_it_was(store: DecisionStore) -> None:
    """Five decisions (the model trains after the first include and exclude), three undos: the records
    come back last first, and deciding them again walks the queue as it was, whatever the decisions."""
    session = open_session(store, background=False)
    session.add_records(records(), origin="#1")
    shown = []
    for decide in (session.include, session.exclude, session.include, session.maybe, session.exclude):
        shown.append(session.current.key)
        decide()
    next_before = session.current.key
    for expected in reversed(shown[2:]):
        assert session.undo().key == expected and expected not in session.decisions
        assert session.view().ordered_by == "undone"
    assert set(session.decisions) == set(shown[:2])
    assert [session.records[i].key for i, _how in session.queue(4)] == [*shown[2:], next_before]
    # Records joining meanwhile do not take the undone record off the screen.
    session.add_records(records(3, source="other"), origin="#2")
    assert session.current.key == shown[2]
    for expected in (*shown[3:], next_before):
        session.exclude("wrong outcome")  # other decisions than before: the model learns otherwise
        assert session.current.key == expected
    assert session.progress().screened == 5


def test_back_then_forward_comes_back_to_the_record_that_was_on_screen(store: DecisionStore) -> None:
    """Back left the queue without remembering its record, and Forward after the last decided record
    picked again from the newest scores: another record took its place (here after a training)."""
    session = open_session(store)  # trains when asked (the window's runner), not after each decision
    session.add_records(records(), origin="#1")
    session.include()
    session.exclude()
    on_screen = session.current.key  # shown before the model learnt from the two decisions
    assert session.train()  # the training the decisions asked for, on a worker in the window
    session.back()
    assert session.current.key != on_screen  # a decided record
    session.forward()
    assert session.current.key == on_screen


def test_key_presses(store: DecisionStore) -> None:
    session = open_session(store, background=False)
    session.add_records(records(), origin="#1")
    a = session.current
    assert session.press("i")
    b = session.current
    assert session.press("3")  # the third reason, chosen: nothing decided, the same record on screen
    assert b.key not in session.decisions and session.current.key == b.key
    assert session.chosen_reason() == DEFAULT_REASONS[2]
    assert session.press("e")
    assert session.decisions[b.key].reason == DEFAULT_REASONS[2]
    assert session.press("x") and session.last_reason == DEFAULT_REASONS[2]
    assert len(DEFAULT_REASONS) < 9 and not session.press("9")  # no ninth reason: nothing happens
    assert session.press("u") and session.press("left")
    assert session.current.key == b.key
    assert not session.press("q")
    assert session.decisions[a.key].decision == "include"


def test_reasons_are_editable(store: DecisionStore) -> None:
    session = open_session(store, background=False)
    assert session.review.reasons == list(DEFAULT_REASONS)
    assert session.set_reasons(["wrong age", " wrong age ", "", "animal study"]) == [
        "wrong age",
        "animal study",
    ]
    assert DecisionStore(store.path).review("review").reasons == ["wrong age", "animal study"]


def test_several_searches_duplicates_and_new_records(store: DecisionStore) -> None:
    session = open_session(store, background=False)
    first = records(6)
    first[0].document = replace(first[0].document, doi="10.1/abc")  # the paper changes as a new Document
    session.add_records(first, origin="#1")
    session.include()
    other = [
        ScreeningRecord(
            source="pubmed", external_id="999", title="Same paper", doi="https://doi.org/10.1/ABC"
        ),
        ScreeningRecord(source="pubmed", external_id="1000", title="New paper on mucus calcium"),
    ]
    assert session.add_records(other, origin="#2") == 1  # the DOI duplicate is the same record
    assert len(session.records) == 7
    assert session.records[0].aliases == [("pubmed", "999")]
    assert session.progress().screened == 1  # the decided paper is never asked again
    flow = session.flow()
    assert flow.identified == 8 and flow.duplicates_removed == 1


def run_training_on_threads(session: ScreeningSession) -> list[threading.Thread]:
    """What a background runner does: run the session's training job when it asks for one."""
    started: list[threading.Thread] = []

    def wanted(change: Change) -> None:
        if change.kind == TRAINING_WANTED:
            thread = threading.Thread(target=session.train, kwargs={"cancel": CancelToken()}, daemon=True)
            started.append(thread)
            thread.start()

    session.subscribe(wanted)
    if session.training_wanted:
        wanted(Change(TRAINING_WANTED))
    return started


def test_active_order_after_an_include_and_an_exclude(store: DecisionStore) -> None:
    session = open_session(store)  # trains in the background: a plain thread runs its job here
    threads = run_training_on_threads(session)
    session.add_records(records(40), origin="#1")
    while session.progress().included < 2:
        rec = session.current
        if "calcium" in rec.title:
            session.include()
        else:
            session.exclude("wrong population")
    assert session.wait_for_training(10)
    session.set_order("active")
    view = session.view()
    assert view.ordered_by == "model score"
    assert "calcium" in view.record.title
    assert any(term in ("calcium", "mucus", "viscosity", "sputum") for term, _ in view.why)
    session.set_order("random")
    assert session.view().ordered_by == "random order"
    session.close()
    for thread in threads:
        thread.join(5)
    assert threads and not any(thread.is_alive() for thread in threads)


def test_a_background_session_asks_for_its_training_and_one_job_catches_up(store: DecisionStore) -> None:
    """Nothing trains until a runner runs the job; one run trains once for every request before it, a
    cancelled one trains nothing, and the queue goes on from the last finished scores meanwhile."""
    session = open_session(store)
    seen: list[str] = []
    session.subscribe(lambda change: seen.append(change.kind))
    session.add_records(records(24), origin="#1")
    assert seen == [TRAINING_WANTED, RECORD_SHOWN, RECORDS_ADDED]
    session.include()
    session.exclude("wrong population")
    session.include()
    assert TRAINING_WANTED in seen and DECIDED in seen and SCORES_TRAINED not in seen
    assert session.training_wanted and not session.wait_for_training(0.05)  # nothing ran the job
    assert session.view().ordered_by == "search rank"  # no scores yet: the search's order goes on
    told: list[str] = []
    assert session.train(progress=lambda _done, _total, message: told.append(message), cancel=CancelToken())
    assert session.training_seconds and len(session.training_seconds) == 1  # three requests, one training
    assert told == ["Learning the screening order from 3 decisions"]
    assert seen[-1] == SCORES_TRAINED and not session.training_wanted and session.wait_for_training(0)
    session.set_order("active")
    assert session.view().ordered_by == "model score"

    session.maybe()
    cancelled = CancelToken()
    cancelled.cancel()
    assert not session.train(cancel=cancelled) and session.training_wanted
    session.close()
    assert not session.train() and len(session.training_seconds) == 1  # closed: no training starts


def test_a_second_training_job_leaves_the_work_to_the_one_running(
    store: DecisionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kmds_desktop.app import screening as app_screening

    gate, inside = threading.Event(), threading.Event()
    real_train = app_screening.train

    def held_train(*args, **kwargs):
        inside.set()
        gate.wait(20)
        return real_train(*args, **kwargs)

    session = open_session(store)
    session.add_records(records(24), origin="#1")
    session.include()
    session.exclude("wrong population")
    monkeypatch.setattr(app_screening, "train", held_train)
    running = threading.Thread(target=session.train, daemon=True)
    running.start()
    assert inside.wait(20)
    session.include()  # decided while the job trains: the next record is there at once
    assert session.current is not None
    assert session.train() is False  # the running job takes this decision too
    gate.set()
    running.join(20)
    assert not running.is_alive() and len(session.training_seconds) == 2
    assert not session.training_wanted and session.wait_for_training(0)
    session.close()


def test_a_session_without_background_trains_at_once(store: DecisionStore) -> None:
    session = open_session(store, background=False)
    seen: list[str] = []
    session.subscribe(lambda change: seen.append(change.kind))
    session.add_records(records(24), origin="#1")
    session.include()
    session.exclude("wrong population")
    assert SCORES_TRAINED in seen and TRAINING_WANTED not in seen
    assert not session.training_wanted and session.wait_for_training(0)


def test_stopping_rules_and_sample(store: DecisionStore) -> None:
    session = open_session(store, background=False, consecutive_rule=5)
    session.add_records(records(30), origin="#1")
    session.include()
    for _ in range(5):
        session.exclude("wrong population")
    report = session.stopping_report()
    assert report.rules[0].met and "5 records excluded in a row" in report.rules[0].detail
    assert "assumes" in report.rules[0].assumption.lower()
    assert not report.rules[1].met
    check = session.start_sample_check(0.5, size=10)
    assert len(check.sample) == 10
    assert session.view().ordered_by == "random sample"
    for _ in range(10):
        session.exclude("wrong population")
    rule = session.stopping_report().rules[1]
    assert "0 includes in the sample of 10" in rule.detail
    assert session.progress().screened == 16


def test_document_vectors_are_kept_in_the_store_and_join_the_features_on_reopening(
    store: DecisionStore,
) -> None:
    import numpy as np

    s = open_session(store, background=False)
    s.add_records(records(), origin="#1")
    assert s.features is not None and s.features.with_vectors == 0
    width = s.features.matrix.shape[1]
    vectors = {r.key: np.full(8, 0.25 * (1 + i % 4), dtype=np.float32) for i, r in enumerate(s.records[:10])}
    assert s.add_vectors(vectors, question_vector=np.ones(8)) == 10
    assert s.features.matrix.shape[1] == width + 8
    assert s.features.question is not None and s.features.question.shape[1] == width + 8
    s.include()
    s.exclude("wrong population")
    assert s.scores_by_key()  # trained on text and vectors
    s.close()
    again = ScreeningSession(store, "review", background=False)
    assert again.features is not None and again.features.with_vectors == 10
    dense = again.features.matrix[:, again.features.terms.shape[0]:].toarray()
    assert np.allclose(dense[1], 0.5 * 0.5)  # record 1: 0.25 * 2, times the default weight 0.5
    assert again.features.question_vector is not None and len(again.features.question_vector) == 8
    again.close()


def test_highlight_words_are_kept_with_the_review(store: DecisionStore) -> None:
    session = open_session(store, background=False)
    assert session.highlight_words() == {"include": [], "exclude": []}
    assert session.set_highlight_words(["sputum"], ["mice", "rats"])
    assert not session.set_highlight_words(["sputum"], ["mice", "rats"])  # the same words: nothing written
    again = ScreeningSession(store, "review", background=False)
    assert again.highlight_words() == {"include": ["sputum"], "exclude": ["mice", "rats"]}
    assert again.decisions == {}  # marking words decides nothing
