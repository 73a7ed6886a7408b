"""The semantic index of KMDS knowledge bases: embeddings of findings in ChromaDB.

It answers what the structured templates cannot and is the orchestrator's fallback, so it must
work offline, keep many KBs in one store without mixing them, and never embed a text twice:
entries are keyed by KB identity and observation IRI and carry a content hash, so a build embeds
only what is new or changed and removes what was deleted.

The interface follows the KMDS search module's ``SemanticIndex`` (``build``, ``build_from_onto``,
``search``, ``count``, ``clear``), with progress callbacks and cancel tokens for the GUI.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, overload

from kmds_desktop.index import (
    embedding_service,
    embeddings,
    entries,
    hash_manifest,
    index_process,
    kb_source,
    store,
)
from kmds_desktop.index.embeddings import DEFAULT_MODEL
from kmds_desktop.index.errors import (
    IndexProcessStopped,
    InvalidQueryError,
    KnowledgeBaseReadError,
    ModelLoadError,
    SemanticIndexError,
)
from kmds_desktop.kb import load_kb
from kmds_desktop.tasks import Cancelled, CancelToken, ProgressFn, check, report

log = logging.getLogger(__name__)

#: Distinct texts embedded per step (entries repeating a text ride along); progress and cancel act
#: between steps. Large, so the model runs full batches (see
#: :meth:`SemanticIndex._embed_and_store` for how steps are written).
BUILD_CHUNK = 512
#: Entries per ChromaDB write when nothing else shares the store's process (the CLI): each call
#: has a fixed cost, and ChromaDB accepts at most about 5,400 per call.
STORE_BATCH = 2048
#: Longest a single ChromaDB write call should take, in seconds. ChromaDB's Rust bindings hold
#: Python's GIL for the whole call while their own threads write, so one 512-entry upsert froze
#: the GUI thread for ~200 ms; slices sized to this budget, with the GIL handed back between them,
#: keep the window responsive while indexing. A call costs a fixed part (10-20 ms on a 2-core
#: machine, growing with the collection, sometimes 50-100 ms) plus ~1 ms per entry, so slices
#: smaller than :data:`WRITE_SLICE_MIN` would only multiply the calls, and with them the spikes.
WRITE_BUDGET_S = 0.02
#: Entries in the first write slice; later slices adapt to :data:`WRITE_BUDGET_S`.
WRITE_SLICE_START = 16
#: Bounds of the adaptive write slice.
WRITE_SLICE_MIN = 8
WRITE_SLICE_MAX = 256
#: Pause after each write slice, without the GIL: time for a waiting GUI thread to take it.
WRITE_PAUSE_S = 0.001
#: Stored entries read per ``get`` call when comparing with the KB (same reason as the budget).
_HASH_PAGE = 250
#: ``kb_id`` value that searches every KB in the store.
ALL_KBS = "*"
#: ChromaDB's limit on ids per call is about 5k; stay well below.
_GET_CHUNK = 2000


@dataclass(frozen=True)
class BuildReport:
    """What a build did: how many entries it embedded, only re-described, deleted or left alone."""

    kb_id: str
    total: int
    embedded: int
    metadata_updated: int
    deleted: int
    unchanged: int
    seconds: float

    def summary(self) -> str:
        return (
            f"{self.total} entries: {self.embedded} embedded, {self.metadata_updated} updated, "
            f"{self.deleted} removed, {self.unchanged} unchanged ({self.seconds:.1f} s)"
        )


class SemanticIndex:
    """Embeddings of KMDS findings and workflow descriptions, searchable by meaning.

    ``persist_dir=None`` keeps the index in memory (gone when the process ends); a folder keeps it
    on disk; ``chroma_host``/``chroma_port`` use a Chroma server instead (``persist_dir`` is then
    ignored). ``own_process=True`` serves the folder from the app's index process (see
    :mod:`~kmds_desktop.index.index_process`): the desktop app's choice, so no ChromaDB call runs
    in the process that draws the window. After :meth:`build` or :meth:`attach`, searches, counts
    and :meth:`clear` default to that KB, so a caller never sees another KB's entries by accident.

    ``responsive=True`` is for a store in a process whose GUI thread must keep drawing while a
    build runs: each embedded step is then written in short slices with Python's GIL handed back
    between them (:class:`_SlicedWriter`), which costs about three times the store's CPU time. The
    app does not need it (its store lives in the index process, which embeds and writes each step
    in one call) and neither does the CLI, so by default embedded steps are written in turn, in
    large calls, and a full build costs little more than the embedding.
    """

    #: The embedding model used when none is named (KMDS's ``SemanticIndex.DEFAULT_MODEL``).
    DEFAULT_MODEL: ClassVar[str] = DEFAULT_MODEL

    def __init__(
        self,
        persist_dir: str | Path | None = None,
        model_name: str = DEFAULT_MODEL,
        *,
        chroma_host: str | None = None,
        chroma_port: int | None = None,
        own_process: bool = False,
        responsive: bool = False,
    ) -> None:
        self.model_name = (model_name or DEFAULT_MODEL).strip()
        self.responsive = bool(responsive)
        self.chroma_host = chroma_host
        self.chroma_port = chroma_port
        self.own_process = bool(own_process and not chroma_host and persist_dir is not None)
        self.persist_dir: Path | None = None
        if self.own_process and persist_dir is not None:
            self.persist_dir = Path(persist_dir).expanduser().resolve()
            self.location = str(self.persist_dir)
            self._fixed_client = None
            self._client  # noqa: B018 - starts (or finds) the index process now, failing clearly
            self._prefix = store.collection_prefix(self.model_name)
        elif chroma_host:
            self.location = f"http://{chroma_host}:{chroma_port or 8000}"
            self._fixed_client = store.server_client(chroma_host, int(chroma_port or 8000))
            self._prefix = store.collection_prefix(self.model_name)
        elif persist_dir is None:
            self.location = "memory"
            self._fixed_client = store.memory_client()
            # The in-process client is shared: private collection names keep instances apart.
            self._prefix = f"kmds-mem-{uuid.uuid4().hex[:16]}-"
        else:
            self.persist_dir = Path(persist_dir).expanduser().resolve()
            self.location = str(self.persist_dir)
            self._fixed_client = store.local_client(self.persist_dir)
            self._prefix = store.collection_prefix(self.model_name)
        self.kb_id: str | None = None
        self._obs_types: dict[str, list[str]] = {}
        self._write_lock = threading.Lock()
        # An in-memory index lives in the shared in-process client: drop it with this object.
        self._finalizer = (
            weakref.finalize(self, _drop_collections, self._client, self._prefix)
            if self.location == "memory"
            else None
        )
        self._list_collections()  # fails now, with a clear message, if the store is unusable

    @property
    def _client(self) -> Any:
        """The ChromaDB client; in own-process mode looked up each time, so a stopped process restarts."""
        if self.own_process:
            return store.process_client(self.persist_dir)  # type: ignore[arg-type]
        return self._fixed_client

    @property
    def in_process(self) -> bool:
        """Whether ChromaDB's calls run in this process (and so hold its GIL)."""
        return not self.own_process and self.chroma_host is None and not _is_http(self._fixed_client)

    def close(self) -> None:
        """Release an in-memory index now (a folder or server index stays where it is)."""
        if self._finalizer is not None:
            self._finalizer()

    # ------------------------------------------------------------------ collections
    # One ChromaDB collection per KB (and model): searching one KB needs no metadata filter,
    # which at 10k entries is the difference between ~2 ms and ~60 ms per query, and clearing or
    # rebuilding one KB can never touch another.

    @overload
    def _collection(self, kb_id: str, create: Literal[True] = True) -> Any: ...

    @overload
    def _collection(self, kb_id: str, create: bool) -> Any | None: ...

    def _collection(self, kb_id: str, create: bool = True) -> Any | None:
        """The KB's collection, fetched afresh (another instance may have cleared it since)."""
        name = store.collection_name(self._prefix, kb_id)

        def fetch(client: Any) -> Any:
            if create:
                return store.get_collection(client, name, self.model_name, self.location, kb_id)
            return client.get_collection(name, embedding_function=None)

        try:
            col = self._on_client(fetch)
        except SemanticIndexError:
            raise
        except Exception as err:  # noqa: BLE001
            if not create and _is_not_found(err):
                return None
            raise store.store_error(err, self.location) from None
        return col

    def _on_client(self, call: Callable[[Any], Any]) -> Any:
        """``call(client)``; in own-process mode once more, on a new index process, if the first
        one stopped answering (crashed or killed): every operation starts with such a call."""
        try:
            return call(self._client)
        except Exception as err:  # only a lost index process is retried
            if not self.own_process or not store.lost_index_process(err):
                raise
        index_process.recover(self.persist_dir)  # type: ignore[arg-type]
        return call(self._client)

    def encode(self, texts: Sequence[str], model_name: str | None = None) -> Any:
        """Unit-length embeddings of ``texts`` (this index's model unless ``model_name`` is given).

        In own-process mode the index process computes them (see
        :mod:`~kmds_desktop.index.embedding_service`), so torch and sentence-transformers never load
        in the desktop app's process; otherwise this process's model does (the CLI, tests).
        """
        model = (model_name or self.model_name).strip()
        if not self.own_process:
            return embeddings.encode(texts, model)
        folder: Path = self.persist_dir  # type: ignore[assignment]
        for attempt in (1, 2):
            address = index_process.ensure_server(folder)
            try:
                return embedding_service.encode_remote(
                    address.host, address.embed_port, address.token, texts, model,
                    batch_size=embeddings.ENCODE_BATCH_SIZE,
                )
            except IndexProcessStopped:
                if attempt == 2:
                    raise
                index_process.recover(folder)  # replaced on the next ensure_server
        raise AssertionError("unreachable")  # pragma: no cover

    def _list_collections(self) -> dict[str, str]:
        """``{kb_id: collection name}`` of every KB this index's model has in the store."""
        try:
            found = self._on_client(lambda client: client.list_collections())
        except Exception as err:  # noqa: BLE001
            raise store.store_error(err, self.location) from None
        out: dict[str, str] = {}
        for col in found:
            name = col if isinstance(col, str) else col.name
            if not name.startswith(self._prefix):
                continue
            meta = {} if isinstance(col, str) else (col.metadata or {})
            out[str(meta.get("kb_id") or name[len(self._prefix) :])] = name
        return out

    def _scoped_collections(self, kb_id: str | None) -> list[Any]:
        scope = self._scope(kb_id)
        kb_ids = [scope] if scope is not None else list(self._list_collections())
        cols = [self._collection(k, create=False) for k in kb_ids]
        return [c for c in cols if c is not None]

    # ------------------------------------------------------------------ building

    def build(
        self,
        kb_path: str | Path,
        progress: ProgressFn | None = None,
        cancel: CancelToken | None = None,
    ) -> BuildReport:
        """Load the KB and bring its entries up to date (see :meth:`build_from_onto`).

        ``kb_path`` is a file path or, as in KMDS, a URL: an http(s) URL is fetched with bounded
        size and time (:mod:`~kmds_desktop.index.kb_source`) and indexed under a ``kb_id`` derived
        from the URL, so building it again updates the same entries.
        """
        if kb_source.is_url(kb_path):
            url = str(kb_path).strip()
            kb = kb_source.load_kb_url(url, cancel=cancel)
            return self.build_from_onto(kb, progress=progress, cancel=cancel,
                                        kb_id=kb_source.kb_id_for_url(url))
        return self.build_from_onto(load_kb_file(kb_path), progress=progress, cancel=cancel)

    def build_from_onto(
        self,
        kb: Any,
        progress: ProgressFn | None = None,
        cancel: CancelToken | None = None,
        *,
        kb_id: str | None = None,
    ) -> BuildReport:
        """Index a loaded ``KnowledgeBase`` (or an owlready2 ontology of a KMDS file).

        Only new or changed texts are embedded; entries whose metadata alone changed are updated
        in place and entries of deleted observations are removed. Cancelling stops between
        embedding steps; what was written so far is consistent and the next build continues.
        Afterwards this instance's searches default to this KB.
        """
        started = time.perf_counter()
        source = _read_source(kb, kb_id)
        wanted = entries.make_entries(source, self.model_name)
        report(progress, 0, None, "comparing with the stored index")
        check(cancel)
        manifest = self._hash_manifest(source.kb_id)
        with self._write_lock, (manifest.locked(cancel) if manifest else contextlib.nullcontext()):
            collection = self._collection(source.kb_id)
            recorded = manifest.read() if manifest else None
            from_manifest = recorded is not None and hash_manifest.matches_store(recorded, collection)
            stored = recorded if from_manifest else self._stored_hashes(collection)
            assert stored is not None  # noqa: S101 - narrows: one of the two is read
            to_embed = [
                _dropping_old_keys(e, stored) for e in wanted
                if e.id not in stored or stored[e.id][0] != e.content_hash
            ]
            to_describe = [
                _dropping_old_keys(e, stored) for e in wanted
                if e.id in stored and stored[e.id][0] == e.content_hash and stored[e.id][1] != e.meta_hash
            ]
            wanted_ids = {e.id for e in wanted}
            to_delete = [eid for eid in stored if eid not in wanted_ids]
            changes = bool(to_delete or to_describe or to_embed)
            self.kb_id = source.kb_id
            self._obs_types.pop(source.kb_id, None)
            try:
                if manifest and changes:
                    manifest.discard()  # a build stopped half-way leaves no manifest behind
                if to_delete:
                    for i in range(0, len(to_delete), _GET_CHUNK):
                        collection.delete(ids=to_delete[i : i + _GET_CHUNK])
                if to_describe:
                    for i in range(0, len(to_describe), _GET_CHUNK):
                        part = to_describe[i : i + _GET_CHUNK]
                        collection.update(
                            ids=[e.id for e in part], metadatas=[e.metadata for e in part]
                        )
                self._embed_and_store(collection, to_embed, progress, cancel)
                if manifest and (changes or not from_manifest):
                    written = {e.id for e in to_embed} | {e.id for e in to_describe}
                    manifest.write({
                        e.id: (e.content_hash, e.meta_hash, frozenset(e.metadata)) if e.id in written
                        else stored[e.id]
                        for e in wanted
                    })
            except (SemanticIndexError, Cancelled):
                raise
            except Exception as err:  # noqa: BLE001 - ChromaDB raises many kinds
                raise store.store_error(err, self.location) from None
        result = BuildReport(
            kb_id=source.kb_id,
            total=len(wanted),
            embedded=len(to_embed),
            metadata_updated=len(to_describe),
            deleted=len(to_delete),
            unchanged=len(wanted) - len(to_embed) - len(to_describe),
            seconds=time.perf_counter() - started,
        )
        report(progress, len(to_embed), len(to_embed), f"index up to date: {result.summary()}")
        log.info("index %s for KB %s: %s", self.location, source.kb_id, result.summary())
        return result

    def _hash_manifest(self, kb_id: str) -> hash_manifest.HashManifest | None:
        """The stored hashes' manifest of ``kb_id``'s collection; None for an index kept in memory
        or on a Chroma server (nothing beside the store is ours to write)."""
        if self.persist_dir is None:
            return None
        return hash_manifest.HashManifest(self.persist_dir, store.collection_name(self._prefix, kb_id))

    def _embed_and_store(
        self,
        collection: Any,
        pending: list[entries.Entry],
        progress: ProgressFn | None,
        cancel: CancelToken | None,
    ) -> None:
        """Embed ``pending`` step by step (progress and cancel between steps) and store it.

        Three ways, by where the store is:

        * the app's index process: each step is one call there that embeds and writes
          (:meth:`_store_steps_remotely`), so no vector crosses the socket;
        * this process, no window to keep drawing (the CLI, tests): embed, then write in calls of
          :data:`STORE_BATCH` entries, one after the other (:meth:`_store_steps_in_turn`);
        * a window in this process (``responsive``) or another store (a Chroma server, the app's
          process seen from the CLI): writes overlap the next step's embedding on one writer thread,
          in slices (:meth:`_store_steps_overlapped`).

        Whatever was written before a cancel or an error matches its content hash.
        """
        total = len(pending)
        if total == 0:
            return
        # Similar lengths in one step waste less padding (encode sorts only within its call), and
        # equal texts side by side land in one step, where encode embeds each distinct text once.
        pending = sorted(pending, key=lambda e: (len(e.text), e.text))
        report(progress, 0, total, f"embedding {total} texts")
        if self.own_process:
            self._store_steps_remotely(collection, pending, progress, cancel)
        elif self.in_process and not self.responsive:
            self._store_steps_in_turn(collection, pending, progress, cancel)
        else:
            self._store_steps_overlapped(collection, pending, progress, cancel)

    def _store_steps_in_turn(
        self,
        collection: Any,
        pending: list[entries.Entry],
        progress: ProgressFn | None,
        cancel: CancelToken | None,
    ) -> None:
        """Embed a step, then write; no writer thread beside the model.

        On a 2-core machine torch's threads already use both cores, so a write overlapping the
        next step only competes with them (a thread of the forward pass waits at every barrier for
        the one that lost its core), and costs more CPU and wall-clock than writing in turn.
        Embedded steps are written :data:`STORE_BATCH` at a time: each ChromaDB call has a fixed
        cost. A cancel writes what was embedded first.
        """
        total = len(pending)
        done = 0
        embedded = 0
        batch: list[tuple[list[entries.Entry], Any]] = []

        def flush() -> None:
            nonlocal done
            if not batch:
                return
            import numpy as np  # why: numpy loads on first use, not at start-up

            part = [e for step, _ in batch for e in step]
            vectors = batch[0][1] if len(batch) == 1 else np.concatenate([v for _, v in batch])
            collection.upsert(ids=[e.id for e in part], embeddings=vectors,
                              metadatas=[e.metadata for e in part])
            batch.clear()
            done += len(part)

        try:
            for part in _steps(pending):
                check(cancel)
                batch.append((part, self.encode([e.text for e in part])))
                embedded += len(part)
                if embedded - done >= STORE_BATCH or embedded == total:
                    flush()
                report(progress, embedded, total, f"embedded {embedded} of {total}")
        except Cancelled:
            flush()  # what was embedded is kept: the next build continues from there
            raise

    def _store_steps_remotely(
        self,
        collection: Any,
        pending: list[entries.Entry],
        progress: ProgressFn | None,
        cancel: CancelToken | None,
    ) -> None:
        """The app's way: the index process embeds each step and writes it, in one call.

        The window's process only sends the texts and metadata of a step and waits on the socket;
        the vectors never travel (before, they came back from the embedding service and went out
        again in an upsert, and the write overlapped the next step's embedding on the same cores).
        """
        total = len(pending)
        done = 0
        for part in _steps(pending):
            check(cancel)
            try:
                collection.embed_upsert([e.id for e in part], [e.text for e in part],
                                        [e.metadata for e in part], self.model_name,
                                        embeddings.ENCODE_BATCH_SIZE)
            except Exception as err:  # a model that cannot load is not a store fault
                if type(err).__name__ == "ModelLoadError":
                    raise ModelLoadError(str(err)) from None
                raise
            done += len(part)
            report(progress, done, total, f"embedded {done} of {total}")

    def _store_steps_overlapped(
        self,
        collection: Any,
        pending: list[entries.Entry],
        progress: ProgressFn | None,
        cancel: CancelToken | None,
    ) -> None:
        """Each step is written while the next one is embedded, on one writer thread.

        For a window in this process, writes go in short adaptive slices (:class:`_SlicedWriter`);
        to another store (a Chroma server, the app's process used from the CLI) they go in
        :data:`WRITE_SLICE_MAX` slices and the write's cost is that store's. On cancel or error
        the write in flight finishes first.
        """
        total = len(pending)
        done = 0
        in_flight: Future[None] | None = None
        write = _SlicedWriter(collection, adaptive=self.responsive and self.in_process,
                              size=BUILD_CHUNK if self.in_process else WRITE_SLICE_MAX)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kmds-index-writer") as writer:
            try:
                previous = 0
                for part in _steps(pending):
                    check(cancel)
                    vectors = self.encode([e.text for e in part])
                    if in_flight is not None:
                        in_flight.result()
                        done += previous
                        report(progress, done, total, f"embedded {done} of {total}")
                    in_flight = writer.submit(write, part, vectors)
                    previous = len(part)
                if in_flight is not None:
                    in_flight.result()
                    in_flight = None
                    done = total
                    report(progress, done, total, f"embedded {done} of {total}")
            finally:
                if in_flight is not None and not in_flight.done():
                    concurrent.futures.wait([in_flight])

    def _stored_hashes(self, collection: Any) -> dict[str, tuple[str, str, frozenset[str]]]:
        """``{id: (content_hash, meta_hash, metadata keys)}`` of every stored entry of a KB.

        Read page by page, handing the GIL back between pages: one ``get`` of a large KB builds
        every metadata dict inside ChromaDB's bindings with the GIL held, freezing the GUI thread.
        Builds hold the write lock, so the pages see one consistent state.
        """
        out: dict[str, tuple[str, str, frozenset[str]]] = {}
        try:
            total = int(collection.count())
            for offset in range(0, total, _HASH_PAGE):
                got = collection.get(include=["metadatas"], limit=_HASH_PAGE, offset=offset)
                for eid, meta in zip(got["ids"], got["metadatas"] or [], strict=False):
                    if meta is not None:
                        out[eid] = (*entries.stored_hashes(meta), frozenset(meta))
                time.sleep(0)
        except Exception as err:  # noqa: BLE001
            raise store.store_error(err, self.location) from None
        return out

    def attach(self, kb: Any) -> str:
        """Make later searches default to ``kb`` (a ``KnowledgeBase``, a KB file or a ``kb_id``)."""
        if kb_source.is_url(kb):
            self.kb_id = kb_source.kb_id_for_url(str(kb))
        elif isinstance(kb, str) and not Path(kb).exists():
            self.kb_id = kb
        elif isinstance(kb, (str, Path)):
            self.kb_id = str(load_kb_file(kb).kb_id)
        else:
            self.kb_id = _read_source(kb, None).kb_id if entries.is_owlready_ontology(kb) else str(kb.kb_id)
        return self.kb_id

    # ------------------------------------------------------------------ reading

    def count(self, kb_id: str | None = None) -> int:
        """Entries of the attached KB (or ``kb_id``; ``"*"`` or no KB attached: the whole store)."""
        try:
            return sum(int(c.count()) for c in self._scoped_collections(kb_id))
        except SemanticIndexError:
            raise
        except Exception as err:  # noqa: BLE001
            raise store.store_error(err, self.location) from None

    def kb_ids(self) -> list[str]:
        """Every KB that has entries in this store."""
        return sorted(self._list_collections())

    def clear(self, kb_id: str | None = None) -> None:
        """Remove the attached KB's entries (or ``kb_id``'s); with no KB attached or ``"*"``, all."""
        scope = self._scope(kb_id)
        with self._write_lock:
            try:
                names = self._list_collections()
                for kb in [scope] if scope is not None else list(names):
                    if kb in names:
                        self._client.delete_collection(names[kb])
                        if self.persist_dir is not None:
                            hash_manifest.HashManifest(self.persist_dir, names[kb]).discard()
            except SemanticIndexError:
                raise
            except Exception as err:  # noqa: BLE001
                raise store.store_error(err, self.location) from None
            self._obs_types.clear()

    def search(
        self,
        query: str,
        n_results: int = 5,
        *,
        category: str | None = None,
        obs_type: str | None = None,
        workflow: str | None = None,
        kb_id: str | None = None,
        progress: ProgressFn | None = None,
        cancel: CancelToken | None = None,
        query_vector: Any | None = None,
    ) -> list[dict[str, Any]]:
        """The ``n_results`` entries closest in meaning to ``query``, closest first.

        Filters: ``category`` (exact, e.g. ``"exploratory"`` or ``"workflow"``), ``obs_type``
        (case-insensitive substring), ``workflow`` (name), ``kb_id`` (default: the attached KB;
        ``"*"`` for every KB). Each result has ``finding``, ``obs_type``, ``workflow_name``,
        ``finding_seq`` (-1 for a workflow description, None when the observation has none),
        ``distance`` (cosine, lower is closer), ``iri``, ``category``, ``kb_id``, and ``intent``
        only when the observation has one. ``query_vector`` (the question already embedded with
        this index's model, e.g. by :func:`embeddings.encode`) saves embedding it again.
        """
        query = _check_query(query)
        if isinstance(n_results, bool) or not isinstance(n_results, int) or n_results < 1:
            raise InvalidQueryError(f"n_results must be a whole number of at least 1, not {n_results!r}")
        check(cancel)
        report(progress, 0, 3, "preparing the search")
        where = self._where(category, obs_type, workflow, kb_id)
        if where is False:
            report(progress, 3, 3, "no entries match the filters")
            return []
        report(progress, 1, 3, "embedding the question")
        vector = self.encode([query])[0] if query_vector is None else _as_vector(query_vector)
        check(cancel)
        report(progress, 2, 3, "searching the index")
        results: list[dict[str, Any]] = []
        try:
            for collection in self._scoped_collections(kb_id):
                if collection.count() == 0:
                    continue
                got = collection.query(
                    query_embeddings=[vector],
                    n_results=n_results,
                    where=where,
                    include=["documents", "metadatas", "distances"],
                )
                results.extend(
                    _result(doc, meta or {}, float(dist))
                    for doc, meta, dist in zip(
                        got["documents"][0], got["metadatas"][0], got["distances"][0], strict=False
                    )
                )
        except SemanticIndexError:
            raise
        except Exception as err:  # noqa: BLE001
            raise store.store_error(err, self.location) from None
        results.sort(key=lambda r: r["distance"])
        results = results[:n_results]
        report(progress, 3, 3, f"{len(results)} results")
        return results

    def rank(
        self,
        query: str,
        iris: Sequence[str],
        *,
        kb_id: str | None = None,
        texts: Mapping[str, str] | None = None,
        query_vector: Any | None = None,
    ) -> list[tuple[str, float]]:
        """Order observations (by IRI) by similarity to ``query``: ``[(iri, distance)]``, closest first.

        Stored vectors are reused, so ranking template results costs one query embedding. An IRI
        not in the index is embedded from ``texts[iri]`` when given, else left out.
        ``query_vector`` (the question already embedded with this model) saves embedding it again.
        """
        import numpy as np  # why: numpy loads on first use, not at start-up

        query = _check_query(query)
        if not iris:
            return []
        scope = self._scope(kb_id)
        if scope is None:
            raise InvalidQueryError("rank needs a KB: build or attach one, or pass kb_id")
        ids = [entries.entry_id(scope, "obs", iri) for iri in iris]
        vectors: dict[str, Any] = {}
        collection = self._collection(scope, create=False)
        try:
            for i in range(0, len(ids), _GET_CHUNK):
                if collection is None:  # no index built for the KB yet: every vector is computed below
                    break
                got = collection.get(ids=ids[i : i + _GET_CHUNK], include=["embeddings", "metadatas"])
                for meta, emb in zip(got["metadatas"] or [], got["embeddings"], strict=False):
                    if meta is not None:
                        vectors[entries.result_fields(meta)["iri"]] = emb
        except Exception as err:  # noqa: BLE001
            raise store.store_error(err, self.location) from None
        missing = [iri for iri in dict.fromkeys(iris) if iri not in vectors and texts and texts.get(iri)]
        to_encode = ([query] if query_vector is None else []) + [texts[iri] for iri in missing]  # type: ignore[index]
        encoded = self.encode(to_encode) if to_encode else []
        qvec = encoded[0] if query_vector is None else _as_vector(query_vector)
        for iri, vec in zip(missing, encoded[1:] if query_vector is None else encoded, strict=True):
            vectors[iri] = vec
        order = [iri for iri in dict.fromkeys(iris) if iri in vectors]
        if not order:
            return []
        distances = embeddings.cosine_distances(qvec, np.stack([vectors[i] for i in order]))
        ranked = sorted(zip(order, (float(d) for d in distances), strict=True), key=lambda p: p[1])
        return ranked

    # ------------------------------------------------------------------ helpers

    def _scope(self, kb_id: str | None) -> str | None:
        scope = kb_id if kb_id is not None else self.kb_id
        return None if scope in (None, ALL_KBS) else scope

    def _where(
        self, category: str | None, obs_type: str | None, workflow: str | None, kb_id: str | None
    ) -> dict[str, Any] | None | bool:
        """ChromaDB ``where`` for the filters; ``False`` when no entry can match."""
        clauses: list[dict[str, Any]] = []
        scope = self._scope(kb_id)
        if category:
            clauses.append({"category": category.strip()})
        if workflow:
            clauses.append({entries.WORKFLOW_FLAG_PREFIX + workflow.strip(): True})
        if obs_type and obs_type.strip():
            needle = obs_type.strip().lower()
            matching = [t for t in self._known_obs_types(scope) if needle in t.lower()]
            if not matching:
                return False
            clauses.append({"obs_type": {"$in": matching}})
        if not clauses:
            return None
        return clauses[0] if len(clauses) == 1 else {"$and": clauses}

    def _known_obs_types(self, scope: str | None) -> list[str]:
        """Distinct ``obs_type`` values in scope (ChromaDB has no substring filter on metadata)."""
        key = scope or ALL_KBS
        cached = self._obs_types.get(key)
        if cached is None:
            found: set[str] = set()
            try:
                for collection in self._scoped_collections(scope):
                    got = collection.get(include=["metadatas"])
                    found.update(str(m.get("obs_type", "")) for m in got["metadatas"] or [] if m)
            except SemanticIndexError:
                raise
            except Exception as err:  # noqa: BLE001
                raise store.store_error(err, self.location) from None
            cached = sorted(found)
            self._obs_types[key] = cached
        return cached


def _steps(pending: Sequence[entries.Entry]) -> Iterator[list[entries.Entry]]:
    """``pending`` (ordered so equal texts sit together) in steps of :data:`BUILD_CHUNK` distinct
    texts: entries repeating a text are embedded once (by :func:`embeddings.encode`), so a step
    counted in entries would leave the model's last batch of each step part empty."""
    step: list[entries.Entry] = []
    distinct = 0
    last: str | None = None
    for entry in pending:
        if entry.text != last:
            if distinct >= BUILD_CHUNK:
                yield step
                step, distinct = [], 0
            distinct += 1
            last = entry.text
        step.append(entry)
    if step:
        yield step


def _dropping_old_keys(
    entry: entries.Entry, stored: Mapping[str, tuple[str, str, frozenset[str]]]
) -> entries.Entry:
    """ChromaDB merges metadata on update: keys the entry no longer has must be sent as None."""
    old = stored.get(entry.id)
    gone = old[2] - entry.metadata.keys() if old else frozenset()
    if not gone:
        return entry
    return entries.Entry(entry.id, entry.text, {**entry.metadata, **dict.fromkeys(gone)})


class _SlicedWriter:
    """Upserts one embedded step in slices that each take about :data:`WRITE_BUDGET_S`.

    ChromaDB's bindings keep the GIL while their own threads do the write, and the cost of a call
    is a fixed part that grows with the collection plus a part per entry: a fixed slice size is
    either slow for a small KB or a long freeze for a large one. So the slice halves while a call
    takes longer than the budget and doubles while it takes under half of it; when halving no
    longer shortens a call (the fixed part dominates), smaller slices would only multiply calls,
    so the size goes back up and stays at least there. After each slice the writer pauses for
    :data:`WRITE_PAUSE_S` without the GIL, so a waiting GUI thread gets its turn.

    Not adaptive (no GUI thread shares the store's process), slices are ``size`` entries (a whole
    step in this process): every call has a fixed cost (and the store's HNSW and SQLite work
    amortises over larger calls), so 16-entry slices cost about three times the CPU time of one
    512-entry call.
    """

    def __init__(self, collection: Any, *, adaptive: bool = True, size: int | None = None) -> None:
        self.collection = collection
        self.adaptive = adaptive
        self.size = WRITE_SLICE_START if adaptive else (size or BUILD_CHUNK)
        self.floor = WRITE_SLICE_MIN
        self._last: tuple[int, float] | None = None

    def __call__(self, part: list[entries.Entry], vectors: Any) -> None:
        start = 0
        while start < len(part):
            piece = part[start : start + self.size]
            began = time.perf_counter()
            self.collection.upsert(
                ids=[e.id for e in piece],
                embeddings=vectors[start : start + len(piece)],
                metadatas=[e.metadata for e in piece],
            )
            took = time.perf_counter() - began
            start += len(piece)
            if not self.adaptive:  # over a socket: the GIL is free while the server writes
                continue
            time.sleep(WRITE_PAUSE_S)
            if len(piece) == self.size:
                self._adapt(took)

    def _adapt(self, took: float) -> None:
        last, self._last = self._last, (self.size, took)
        if took > WRITE_BUDGET_S:
            if last is not None and last[0] == self.size * 2 and took > 0.75 * last[1]:
                self.floor = min(WRITE_SLICE_MAX, self.size * 2)  # halving did not help
                self.size = self.floor
            else:
                self.size = max(self.floor, self.size // 2)
        elif took < WRITE_BUDGET_S / 2:
            self.size = min(WRITE_SLICE_MAX, self.size * 2)


def _is_http(client: Any) -> bool:
    """Whether ``client`` talks to another process: a Chroma server, or the app's index process
    (which a CLI command uses while the app is open)."""
    if getattr(client, "remote", False):
        return True
    server = getattr(client, "_server", None)
    return type(server).__name__ == "FastAPI"


def _as_vector(value: Any) -> Any:
    import numpy as np  # why: numpy loads on first use, not at start-up

    vec = np.asarray(value, dtype=np.float32).reshape(-1)
    if vec.size == 0 or not np.all(np.isfinite(vec)):
        raise InvalidQueryError("query_vector must be a non-empty vector of finite numbers")
    return vec


def _is_not_found(err: BaseException) -> bool:
    names = {"NotFoundError", "InvalidCollectionException"}
    return type(err).__name__ in names or "does not exist" in str(err)


def _drop_collections(client: Any, prefix: str) -> None:
    try:
        for col in client.list_collections():
            name = col if isinstance(col, str) else col.name
            if name.startswith(prefix):
                client.delete_collection(name)
    except Exception:  # noqa: BLE001, S110 - at interpreter exit ChromaDB (and logging) may already be gone
        pass


def _check_query(query: Any) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InvalidQueryError("the question is empty: type a few words to search for")
    return query.strip()


def _result(document: str | None, meta: Mapping[str, Any], distance: float) -> dict[str, Any]:
    fields = entries.result_fields(meta, document)
    out = {key: fields[key] for key in ("finding", "obs_type", "workflow_name", "finding_seq")}
    out["distance"] = distance
    out.update((key, fields[key]) for key in ("iri", "category", "kb_id"))
    if fields["intent"] is not None:  # documented: present only when the observation has one
        out["intent"] = fields["intent"]
    return out


def _read_source(kb: Any, kb_id: str | None) -> entries.SourceKB:
    if entries.is_owlready_ontology(kb):
        return entries.from_ontology(kb, kb_id)
    if not hasattr(kb, "observations") or not hasattr(kb, "kb_id"):
        raise SemanticIndexError(
            f"cannot index {type(kb).__name__}: expected a KnowledgeBase (load_kb) or an owlready2 ontology"
        )
    source = entries.from_knowledge_base(kb)
    if kb_id:
        source = entries.SourceKB(kb_id, source.observations, source.workflows)
    return source


def load_kb_file(kb_path: str | Path) -> Any:
    """``load_kb`` with its failures turned into one clear index error naming the file."""
    if kb_source.is_url(kb_path):
        return kb_source.load_kb_url(str(kb_path))
    path = kb_source.local_path(kb_path)
    if not path.is_file():
        raise KnowledgeBaseReadError(f"knowledge base file {path} does not exist")

    try:
        return load_kb(path)
    except Exception as err:  # noqa: BLE001 - the KB core's error already names the problem
        raise KnowledgeBaseReadError(f"cannot read knowledge base {path}: {err}") from None
