"""The embedding call the index build and the literature vectors use: distinct texts once, batches
by token count, results in the caller's order and equal to the model's own ``encode``."""

from __future__ import annotations

import numpy as np

from kmds_desktop.index import embeddings


def _texts() -> list[str]:
    base = [
        "sex is missing for 11 penguins",
        "The penguins table has 344 rows",
        "flipper length correlates with body mass across all three species of penguin",
        "a",
        "Some Prices are not numbers",
    ]
    # more than one batch, with repeats far apart and lengths mixed
    return [f"{t} ({i % 7})" if i % 3 else t for i, t in enumerate(base * 30)]


def test_rows_follow_the_callers_order_and_match_the_models_own_encode():
    texts = _texts()
    got = embeddings.encode(texts, batch_size=8)
    model = embeddings.get_model(embeddings.DEFAULT_MODEL)
    want = model.encode(texts, batch_size=8, normalize_embeddings=True, convert_to_numpy=True,
                        show_progress_bar=False)
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.allclose(got, want, atol=1e-5)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_equal_texts_get_one_vector_and_distinct_ones_differ():
    texts = _texts()
    got = embeddings.encode(texts, batch_size=8)
    first = {}
    for row, text in zip(got, texts, strict=True):
        if text in first:
            assert np.array_equal(row, first[text])  # embedded once, copied
        first[text] = row
    assert not np.allclose(first["a"], first["Some Prices are not numbers"])


def test_batches_hold_texts_of_equal_token_count_in_a_reproducible_order():
    model = embeddings.get_model(embeddings.DEFAULT_MODEL)
    texts = list(dict.fromkeys(_texts()))
    batches = embeddings._token_ordered_batches(model, texts, 4)
    assert sorted(i for b in batches for i in b) == list(range(len(texts)))
    lengths = [len(model.tokenizer(texts[i])["input_ids"]) for b in batches for i in b]
    assert lengths == sorted(lengths)  # shortest first, across batches
    assert batches == embeddings._token_ordered_batches(model, texts, 4)
    assert embeddings._token_ordered_batches(model, texts[:3], 4) == [[0, 1, 2]]


def test_build_steps_count_distinct_texts_and_keep_equal_ones_together(monkeypatch):
    from kmds_desktop.index import entries
    from kmds_desktop.index import semantic_index as semantic_index_module

    monkeypatch.setattr(semantic_index_module, "BUILD_CHUNK", 3)
    texts = sorted(["a", "a", "a", "b", "c", "c", "d", "e", "e", "e", "e", "f", "g"])
    pending = [entries.Entry(f"id{i}", t, {}) for i, t in enumerate(texts)]
    steps = list(semantic_index_module._steps(pending))
    assert [e for step in steps for e in step] == pending  # nothing lost, order kept
    assert [len({e.text for e in step}) for step in steps] == [3, 3, 1]
    seen: set[str] = set()
    for step in steps:
        here = {e.text for e in step}
        assert not here & seen  # a text never spans two steps
        seen |= here
