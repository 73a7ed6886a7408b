"""What each stored entry of a KB was built from, kept beside the store so an update need not read
every entry's metadata back.

A build compares each entry's content and metadata hashes with the stored ones. Reading them from
ChromaDB means fetching every entry's metadata (each key a row of its SQLite store): about 0.5 s for
10,000 observations, a third of an update that re-embeds 1 % of them. The manifest is one JSON file
per collection, written after every build that completed and removed before a build changes
anything, so a cancelled or failed build leaves none and the next one reads the store as before.
Before it is trusted, its entry count must equal the collection's and a sample of entries must carry
the hashes and keys it records; builds of one collection from several processes take turns on a
file lock, so none writes a manifest over another's changes.

The file lives in the index's 0700 folder (0600 itself) and is read with a size bound.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kmds_desktop.index import entries
from kmds_desktop.tasks import CancelToken, check

#: ``{entry id: (content_hash, meta_hash, metadata keys)}``, as the build compares them.
Hashes = dict[str, tuple[str, str, frozenset[str]]]

FORMAT = 2
#: Entries per line of the file (each line is parsed in one call).
LINE_ENTRIES = 500
FOLDER = "hash-manifests"
#: A manifest larger than this is not read (the store is read instead): about 100 bytes an entry.
MAX_BYTES = 256 * 1024 * 1024
#: Entries fetched from the store to check a manifest against it.
SAMPLE = 32


class HashManifest:
    """The manifest of one collection in one index folder."""

    def __init__(self, index_folder: Path, collection_name: str) -> None:
        self.folder = Path(index_folder) / FOLDER
        self.path = self.folder / f"{collection_name}.json"
        self._lock_path = self.folder / f"{collection_name}.lock"

    @contextlib.contextmanager
    def locked(self, cancel: CancelToken | None = None) -> Iterator[None]:
        """Hold the collection's build lock (another process's build finishes first); a cancel
        while waiting raises :class:`~kmds_desktop.tasks.Cancelled`."""
        import fasteners  # why: fasteners loads on first use, not at start-up

        self._ensure_folder()
        lock = fasteners.InterProcessLock(str(self._lock_path))
        while not lock.acquire(blocking=True, timeout=0.2):
            check(cancel)
        try:
            yield
        finally:
            lock.release()

    def read(self) -> Hashes | None:
        """The recorded hashes, or None when there is no usable manifest."""
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read(MAX_BYTES + 1)
        except OSError:
            return None
        if len(raw) > MAX_BYTES:
            return None
        lines = raw.split(b"\n")
        try:
            header = json.loads(lines[0])
            if not isinstance(header, dict) or header.get("format") != FORMAT:
                return None
            key_sets = [frozenset(str(k) for k in keys) for keys in header["key_sets"]]
            out: Hashes = {}
            for line in lines[1:]:
                if not line:
                    continue
                for eid, (both, key_set) in json.loads(line).items():
                    half = len(both) // 2
                    out[str(eid)] = (both[:half], both[half:], key_sets[int(key_set)])
                time.sleep(0)  # see write(): a window's GUI thread gets its turn between lines
            if len(out) != header.get("count"):
                return None  # cut short
            return out
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, RecursionError):
            return None  # damaged (1e400 as an index, nesting the decoder cannot take): no manifest

    def write(self, hashes: Mapping[str, tuple[str, str, frozenset[str]]]) -> None:
        """Record ``hashes`` (atomically: a reader sees the old file or the new one).

        A header line, then :data:`LINE_ENTRIES` entries a line: one ``json.dumps`` of 10,000
        entries holds the GIL for tens of milliseconds, and in the app the build's bookkeeping runs
        in the window's process."""
        key_sets: dict[frozenset[str], int] = {}
        rows: list[tuple[str, list[Any]]] = []
        for eid, (content, meta, keys) in hashes.items():
            if len(content) != len(meta):
                return  # hashes of another format: no manifest rather than a wrong one
            rows.append((eid, [content + meta, key_sets.setdefault(keys, len(key_sets))]))
        header = {"format": FORMAT, "count": len(rows), "key_sets": [sorted(k) for k in key_sets]}
        parts = [json.dumps(header, separators=(",", ":"))]
        for start in range(0, len(rows), LINE_ENTRIES):
            parts.append(json.dumps(dict(rows[start : start + LINE_ENTRIES]), separators=(",", ":")))
            time.sleep(0)
        text = "\n".join(parts) + "\n"
        self._ensure_folder()
        fd, tmp = tempfile.mkstemp(prefix=".manifest-", dir=self.folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def discard(self) -> None:
        """Remove the manifest before the store changes (a build that stops half-way leaves none)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _ensure_folder(self) -> None:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)


def matches_store(hashes: Hashes, collection: Any) -> bool:
    """True when ``collection`` holds as many entries as ``hashes`` and a sample of them carries
    the recorded hashes and keys (a store changed behind the manifest's back fails this)."""
    try:
        if int(collection.count()) != len(hashes):
            return False
        if not hashes:
            return True
        ids = sorted(hashes)
        step = max(1, len(ids) // SAMPLE)
        sample = ids[::step][:SAMPLE]
        got = collection.get(ids=sample, include=["metadatas"])
    except Exception:  # noqa: BLE001 - the caller reads the store itself, which reports errors
        return False
    found = dict(zip(got["ids"], got["metadatas"] or [], strict=False))
    if len(found) != len(sample):
        return False
    for eid in sample:
        meta = found.get(eid)
        if meta is None or (*entries.stored_hashes(meta), frozenset(meta)) != hashes[eid]:
            return False
    return True

