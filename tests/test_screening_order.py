"""The active-learning order finds relevant records sooner than random order on a small fixture; the
simulation figures; the CLI's simulate, state, export and flow subcommands."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import numpy as np

from kmds_desktop.cli import main
from kmds_desktop.literature.screening.ordering import DEFAULT_MODEL, TextFeatures, top_terms, train
from kmds_desktop.literature.screening.simulation import SimulationResult, model_scorer, pick_priors, simulate

RELEVANT_WORDS = ["calcium", "mucus", "viscosity", "sputum", "rheology", "glycoprotein"]
OTHER_WORDS = [
    "insulin",
    "liver",
    "bone",
    "growth",
    "sweat",
    "chloride",
    "enzyme",
    "lung",
    "bacteria",
    "pancreas",
    "diet",
    "fertility",
    "genetics",
    "survival",
    "imaging",
    "hearing",
]


def fixture(n: int = 200, n_relevant: int = 20, seed: int = 7) -> tuple[list[str], np.ndarray]:
    rng = random.Random(seed)
    texts, truth = [], []
    for i in range(n):
        relevant = i < n_relevant
        words = rng.sample(OTHER_WORDS, 5) + (rng.sample(RELEVANT_WORDS, 3) if relevant else [])
        rng.shuffle(words)
        texts.append(" ".join(words) + f" study {i}")
        truth.append(relevant)
    order = list(range(n))
    rng.shuffle(order)
    return [texts[i] for i in order], np.array([truth[i] for i in order])


def test_figures_of_a_known_order() -> None:
    r = SimulationResult(order=list(range(100)), relevant_total=4, pool_size=100, found_at=[1, 5, 20, 60])
    assert r.records_to_recall(0.95) == 60  # ceil(.95 * 4) = 4th relevant
    assert abs(r.wss(0.95) - (40 / 100 - 0.05)) < 1e-9
    assert r.recall_after(0.10) == 0.5 and r.recall_after(0.25) == 0.75


def test_active_order_puts_a_relevant_record_first_more_often_than_random() -> None:
    wins_active = wins_random = 0
    wss_active, wss_random = [], []
    for seed in range(10):
        texts, truth = fixture(seed=seed)
        feats = TextFeatures.build(texts, "calcium and mucus viscosity")
        priors = pick_priors(truth, seed)
        rand = [int(i) for i in np.random.default_rng(seed).permutation(len(texts))]
        active = simulate(truth, scorer=model_scorer(feats, DEFAULT_MODEL), priors=priors, fallback=rand)
        random_run = simulate(truth, scorer=None, priors=priors, fallback=rand)
        # the first record the order chose itself (after the two priors)
        wins_active += bool(truth[active.order[2]])
        wins_random += bool(truth[random_run.order[2]])
        wss_active.append(active.wss())
        wss_random.append(random_run.wss())
    assert wins_active > wins_random
    assert wins_active >= 8
    assert np.mean(wss_active) > np.mean(wss_random) + 0.3


def test_why_ranked_high_names_the_relevant_words() -> None:
    texts, truth = fixture()
    feats = TextFeatures.build(texts)
    labels = {i: bool(truth[i]) for i in range(40)}
    scores = train(feats, labels)
    best = int(np.argmax(np.where(np.isin(np.arange(len(texts)), list(labels)), -np.inf, scores.values)))
    terms = [t for t, _ in top_terms(feats, scores, best)]
    assert truth[best] and set(terms[:3]) & set(RELEVANT_WORDS)


def _labelled_csv(path: Path) -> Path:
    texts, truth = fixture()
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["title", "abstract", "label_included"])
        for i, (t, y) in enumerate(zip(texts, truth, strict=True)):
            w.writerow([f"Record {i}", t, int(y)])
    return path


def test_cli_simulate_state_export_flow(tmp_path: Path, data_home: Path, capsys) -> None:
    labelled = _labelled_csv(tmp_path / "labelled.csv")
    assert main(["literature", "screen", "simulate", "--csv", str(labelled)]) == 0
    out = capsys.readouterr().out
    assert "WSS@95" in out and "records to 95% recall" in out and "recall curve" in out
    assert main(["literature", "screen", "add", "rev", "--file", str(labelled), "--question", "calcium"]) == 0
    assert "200 new records" in capsys.readouterr().out
    assert main(["literature", "screen", "state", "rev"]) == 0
    out = capsys.readouterr().out
    assert "0 of 200 screened · 0 included · 0 since the last include" in out
    assert "50 consecutive excluded" in out
    assert (data_home / "screening" / "screening.sqlite3").exists()
    assert (
        main(
            [
                "literature",
                "screen",
                "flow",
                "rev",
                "--svg",
                str(tmp_path / "flow.svg"),
                "--enter",
                "studies_included=0",
            ]
        )
        == 0
    )
    assert "Records identified (n = 200)" in capsys.readouterr().out
    assert (tmp_path / "flow.svg").read_text(encoding="utf-8").startswith("<?xml")
    assert main(["literature", "screen", "export", "rev", str(tmp_path / "all.csv"), "--which", "all"]) == 0
    assert len(list(csv.DictReader((tmp_path / "all.csv").open(encoding="utf-8")))) == 200
    assert main(["literature", "screen", "state", "nope"]) == 1


def test_document_vectors_find_relevant_records_that_share_no_word() -> None:
    """Relevant records written in other words (no relevant word at all) are found sooner with the
    document vectors than with TF-IDF alone: their vectors point the same way as the includes'."""
    texts, truth = fixture(n=200, n_relevant=20)
    rng = np.random.default_rng(3)
    direction = rng.normal(size=32)
    direction /= np.linalg.norm(direction)
    vectors = []
    for i, relevant in enumerate(truth):
        noise = rng.normal(size=32)
        v = noise / np.linalg.norm(noise) + (2.5 * direction if relevant else 0)
        vectors.append(v / np.linalg.norm(v))
        if relevant and i % 2:  # half the relevant records lose their telling words
            texts[i] = " ".join(w for w in texts[i].split() if w not in RELEVANT_WORDS)
    priors = pick_priors(truth, 1)
    with_vectors = TextFeatures.build(texts, vectors=vectors)
    assert with_vectors.with_vectors == 200
    assert with_vectors.matrix.shape[1] == with_vectors.terms.shape[0] + 32
    text_only = TextFeatures.build(texts)
    wss_vec = simulate(truth, scorer=model_scorer(with_vectors), priors=priors).wss()
    wss_text = simulate(truth, scorer=model_scorer(text_only), priors=priors).wss()
    assert wss_vec > wss_text + 0.05, (wss_vec, wss_text)
    scores = train(with_vectors, {priors[0]: True, priors[1]: False})
    assert scores is not None
    best = int(np.argmax(np.where(truth, scores.values, -np.inf)))
    assert any(term == "meaning (document vector)" for term, _ in top_terms(with_vectors, scores, best, n=50))


def test_records_without_a_vector_get_zeros_and_mismatched_vectors_are_refused() -> None:
    texts, _ = fixture(n=20, n_relevant=5)
    some = [np.ones(4) / 2 if i % 2 else None for i in range(20)]
    feats = TextFeatures.build(texts, vectors=some)
    assert feats.with_vectors == 10
    dense = feats.matrix[:, feats.terms.shape[0]:].toarray()
    assert np.allclose(dense[0], 0) and np.allclose(dense[1], 0.5 * DEFAULT_MODEL.vector_weight)
    try:
        TextFeatures.build(texts, vectors=some[:5])
    except ValueError as err:
        assert "5 vectors for 20 records" in str(err)
    else:  # pragma: no cover - must not pass
        raise AssertionError("a vector count unlike the record count was accepted")


def test_cli_simulate_orders_by_the_features_the_window_screening_uses(
    tmp_path: Path, data_home: Path, capsys
) -> None:
    """`screen simulate` measures the window's order: TF-IDF plus the records' vectors of the database's
    embedding model and the question's vector, built by the same function a session's features equal."""
    import json

    from kmds_desktop.app.screening import VECTOR_MODEL, ScreeningSession
    from kmds_desktop.literature.screening.decisions import DecisionStore
    from kmds_desktop.literature.screening.records import read_csv_records
    from kmds_desktop.literature.screening.simulation import pool_features
    from kmds_desktop.literature.store.vectors import encoder_for

    labelled = _labelled_csv(tmp_path / "labelled.csv")
    assert main(["literature", "screen", "simulate", "--csv", str(labelled), "--json"]) == 0
    with_vectors = json.loads(capsys.readouterr().out)
    assert main(["literature", "screen", "simulate", "--csv", str(labelled), "--json", "--no-vectors"]) == 0
    text_only = json.loads(capsys.readouterr().out)
    assert with_vectors["vectors"] == VECTOR_MODEL and text_only["vectors"] is None

    records = [r for r in read_csv_records(labelled) if r.label is not None]
    encode = encoder_for(VECTOR_MODEL)
    embedded = [f"{r.title}. {r.abstract}" for r in records]
    question = "calcium and mucus viscosity"
    cli_features = pool_features(
        [r.text for r in records], question, DEFAULT_MODEL, encoder=encode, embedded_texts=embedded
    )
    assert cli_features.with_vectors == len(records)

    store = DecisionStore(tmp_path / "screening.sqlite3")
    store.create_review("rev", question=question)
    session = ScreeningSession(store, "rev", background=False)
    try:
        session.add_records(records, origin="file labelled.csv")
        vectors = dict(zip((r.key for r in records), encode(embedded), strict=True))
        session.add_vectors(vectors, encode([question])[0])
        assert session.features is not None
        row_of = {rec.key: i for i, rec in enumerate(session.records)}
        rows = [row_of[r.key] for r in records]
        window = session.features.matrix[rows].toarray()
        assert window.shape == cli_features.matrix.shape
        assert np.allclose(window, cli_features.matrix.toarray(), atol=1e-5)
    finally:
        store.close()


def test_earlier_rounds_fade_as_the_updates_own_decisions_grow() -> None:
    """An updated review's model: round one's decisions count fully at the update's start and fade as the
    update's own decisions grow (half after 30), so the update's words take over; a first screening
    (no earlier round) is not touched by the fade."""
    from dataclasses import replace

    from kmds_desktop.literature.screening.ordering import earlier_weight

    assert earlier_weight(DEFAULT_MODEL, 0) == 1.0
    assert earlier_weight(DEFAULT_MODEL, 30) == 0.5
    weights = [earlier_weight(DEFAULT_MODEL, n) for n in (10, 40, 90)]
    assert weights == sorted(weights, reverse=True) and len(set(weights)) == 3
    never = replace(DEFAULT_MODEL, earlier_round_fade=0.0)
    assert earlier_weight(never, 500) == 1.0

    # Round one (records 0-39) taught "calcium" is relevant; the update (40-79) says "sweat" is, many times.
    texts = [f"calcium study {i}" if i % 4 == 0 else f"bone study {i}" for i in range(40)]
    texts += [f"sweat chloride {i}" if i % 4 == 0 else f"calcium growth {i}" for i in range(40)]
    feats = TextFeatures.build(texts, "")
    earlier = frozenset(range(40))
    labels = {i: i % 4 == 0 for i in range(40)}
    labels.update({40 + i: i % 4 == 0 for i in range(36)})  # 36 decisions of the update; 76-79 undecided
    faded = train(feats, labels, DEFAULT_MODEL, earlier=earlier)
    alike = train(feats, labels, never, earlier=earlier)
    first = train(feats, labels, DEFAULT_MODEL)  # no earlier round: the fade does not apply
    assert faded is not None and alike is not None and first is not None
    assert np.allclose(first.values, alike.values, atol=1e-3)
    sweat, calcium = 76, 77  # an undecided update record of each kind
    # the fade lets the update's decisions outweigh round one's on the update's records
    gap_faded = faded.values[sweat] - faded.values[calcium]
    assert gap_faded > alike.values[sweat] - alike.values[calcium] + 0.03  # 0.44 vs 0.37
