"""Build the top-k index from a literature database, resumable, and keep it in step incrementally.

Why read-only: the database may be a BMLibrarian installation the app does not own; the build and
the refresh only ``SELECT`` (nothing is written into it, no trigger, no column). A build reads the
documents in id order in batches and commits the index after each batch with the last id in
``state.json``: a cancelled or killed build goes on from there. The refresh finds the rows written
since the build started by their transaction (``xmin`` newer than the snapshot the build began
with: new, changed and newly withdrawn documents), re-indexes them, and when the counts still differ
(documents deleted) compares the id lists once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kmds_desktop.literature.store.topk_index import BuildState, TopKIndex
from kmds_desktop.tasks import CancelToken, ProgressFn, check, report

log = logging.getLogger(__name__)

#: Documents read and committed per batch (one commit per batch makes the build resumable).
BATCH = 20_000
_SNAPSHOT_SQL = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
_ROWS_SQL = ("SELECT id, search_vector::text, source_id, publication_date FROM document "
             "WHERE id > %s AND withdrawn_date IS NULL ORDER BY id LIMIT %s")


@dataclass
class RefreshReport:
    """What a refresh changed: documents (re)indexed, removed (withdrawn or deleted)."""

    indexed: int = 0
    removed: int = 0


def build_index(database: Any, index: TopKIndex, *, batch: int = BATCH, progress: ProgressFn | None = None,
                cancel: CancelToken | None = None) -> BuildState:
    """Index every document not withdrawn, going on from an unfinished build of the same database."""
    identity = database_identity(database)
    state = BuildState.load(index.state_path)
    if state is None or state.database != identity or state.complete:
        index.clear()
        start = int(database.run(lambda c: c.execute(_SNAPSHOT_SQL).fetchone()[0]))
        state = BuildState(database=identity, start_xid=start)
        state.save(index.state_path)
    total = int(database.run(lambda c: c.execute(
        "SELECT count(*) FROM document WHERE withdrawn_date IS NULL").fetchone()[0]))
    report(progress, state.documents, total, f"indexing {total:,} documents for fast full-text rows")
    while True:
        check(cancel)
        rows = database.run(lambda c: c.execute(_ROWS_SQL, (state.last_id, batch)).fetchall(), cancel)
        if not rows:
            break
        index.add((int(r[0]), str(r[1] or ""), int(r[2]), r[3]) for r in rows)
        index.commit()
        state.last_id = int(rows[-1][0])
        state.documents += len(rows)
        state.save(index.state_path)
        report(progress, min(state.documents, total), total,
               f"indexed {state.documents:,} of {total:,} documents")
    state.complete = True
    state.save(index.state_path)
    return state


def refresh_index(database: Any, index: TopKIndex, *, cancel: CancelToken | None = None) -> RefreshReport:
    """Bring a finished index in step with the database without a rebuild."""
    state = BuildState.load(index.state_path)
    if state is None or not state.complete:
        raise RuntimeError("the top-k index is not built yet: build it first")
    now = int(database.run(lambda c: c.execute(_SNAPSHOT_SQL).fetchone()[0]))
    changed = database.run(lambda c: c.execute(
        "SELECT id, search_vector::text, source_id, publication_date, withdrawn_date IS NOT NULL "
        "FROM document "
        "WHERE age(xmin) <= %s ORDER BY id", (max(0, now - state.start_xid) + 1,)).fetchall(), cancel)
    result = RefreshReport()
    if changed:
        check(cancel)
        index.delete(int(r[0]) for r in changed)
        live = [(int(r[0]), str(r[1] or ""), int(r[2]), r[3]) for r in changed if not r[4]]
        result.indexed = index.add(live)
        result.removed = len(changed) - len(live)
        index.commit()
    expected = int(database.run(lambda c: c.execute(
        "SELECT count(*) FROM document WHERE withdrawn_date IS NULL").fetchone()[0]))
    if index.documents() != expected:  # rows were deleted: compare the ids once
        ids = {int(r[0]) for r in database.run(lambda c: c.execute(
            "SELECT id FROM document WHERE withdrawn_date IS NULL").fetchall(), cancel)}
        gone = [i for i in index.all_ids() if i not in ids]
        index.delete(gone)
        index.commit()
        result.removed += len(gone)
    state.start_xid = now
    state.documents = index.documents()
    state.save(index.state_path)
    log.info("top-k index refreshed: %d indexed, %d removed", result.indexed, result.removed)
    return result


def database_identity(database: Any) -> str:
    """Which database an index belongs to: the server's system identifier and the database's oid."""
    row = database.run(lambda c: c.execute(
        "SELECT (SELECT system_identifier FROM pg_control_system())::text || '/' || "
        "(SELECT oid FROM pg_database WHERE datname = current_database())::text").fetchone())
    return str(row[0])
