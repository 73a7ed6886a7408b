"""Open the index the way the user's settings say, and rebuild a damaged one.

The CLI, the GUI and the orchestrator all open the index through :func:`open_index` so the index
mode (local folder or Chroma server) and the embedding model come from one place: the settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kmds_desktop import paths
from kmds_desktop.config import load_settings
from kmds_desktop.index import kb_source, store
from kmds_desktop.index.errors import IndexCorruptedError, IndexStoreError
from kmds_desktop.index.semantic_index import BuildReport, SemanticIndex, load_kb_file
from kmds_desktop.tasks import CancelToken, ProgressFn, report


def open_index(
    settings: Any | None = None,
    *,
    persist_dir: str | Path | None = None,
    model_name: str | None = None,
    own_process: bool = False,
) -> SemanticIndex:
    """A :class:`SemanticIndex` for ``settings.index`` (loaded from disk when not given).

    Server mode uses ``chroma_host``/``chroma_port``; local mode uses ``persist_dir`` or the data
    folder's ``index/``, served by the app's index process when ``own_process`` (the desktop app).
    """
    if settings is None:
        settings = load_settings()
    idx = settings.index
    model = model_name or idx.embedding_model
    if idx.mode == "server":
        return SemanticIndex(None, model, chroma_host=idx.chroma_host, chroma_port=idx.chroma_port)
    if persist_dir is None:
        persist_dir = _default_index_dir()
    return SemanticIndex(persist_dir, model, own_process=own_process)


def _default_index_dir() -> Path:
    """The data folder's ``index/``, created if missing; a file in its place is a clear error."""
    try:
        return paths.index_dir()
    except OSError as err:
        path = paths.data_dir(create=False) / "index"
        if path.exists() and not path.is_dir():
            raise store.not_a_folder(path) from None
        raise IndexStoreError(
            f"cannot use index folder {path}: {err.strerror or err}. Choose a writable folder "
            "(--data-dir or KMDS_DESKTOP_HOME) or fix its permissions") from None


def rebuild_index(
    kb_path: str | Path,
    settings: Any | None = None,
    *,
    persist_dir: str | Path | None = None,
    model_name: str | None = None,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> tuple[BuildReport, Path | None]:
    """Embed the KB again from scratch; returns the build report and where a damaged store went.

    A store that cannot be opened or read (its database, a collection's vector files, or a file in
    the folder's place) is moved aside (``<dir>.broken-<time>``, never deleted) and a fresh one is
    created; other KBs it held are re-indexed the next time they are opened. A healthy
    store keeps other KBs' entries and only this KB's entries are dropped. The KB file is only read.
    """
    moved: Path | None = None
    try:
        index = open_index(settings, persist_dir=persist_dir, model_name=model_name)
        if index.persist_dir is not None:
            index._on_client(lambda client: store.verify_store(client, index.location))  # noqa: SLF001
    except IndexCorruptedError as err:
        if not err.persist_dir:
            raise
        moved = store.move_aside(err.persist_dir)
        report(progress, 0, None, f"moved the damaged index to {moved}")
        index = open_index(settings, persist_dir=persist_dir, model_name=model_name)

    kb = load_kb_file(kb_path)
    # a KB read from a URL is filed under the URL's identity (build()), not under its temporary
    # file's: clearing that one cleared nothing, and every rebuild added an orphan collection
    kb_id = kb_source.kb_id_for_url(str(kb_path)) if kb_source.is_url(kb_path) else str(kb.kb_id)
    try:
        index.clear(kb_id=kb_id)
    except IndexCorruptedError as err:
        if not err.persist_dir or index.persist_dir is None:
            raise
        moved = store.move_aside(err.persist_dir)
        index = open_index(settings, persist_dir=persist_dir, model_name=model_name)
    return index.build_from_onto(kb, progress=progress, cancel=cancel, kb_id=kb_id), moved
