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

import hashlib
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kmds_desktop import paths
from kmds_desktop.crashpoints import crash_point
from kmds_desktop.literature.store.topk_index import TITLE_BOOST, BuildState, TopKIndex, document_fields
from kmds_desktop.literature.store.topk_tiers import SAMPLE_DOCUMENTS, Tiers
from kmds_desktop.tasks import CancelToken, ProgressFn, check, report

log = logging.getLogger(__name__)

#: Documents read and committed per batch (one commit per batch makes the build resumable).
BATCH = 20_000
#: The app's own database gets its top-k index built by the import itself up to this many documents
#: (seconds), and one written to by something else is refreshed on the spot; a larger one is built
#: and refreshed on request, with progress and Cancel.
AUTO_TOPK_UP_TO = 300_000
_SNAPSHOT_SQL = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
#: The documents a search can find: not withdrawn, with a source (every search filters by source, so
#: a row without one, which BMLibrarian's schema allows, is never found and is not indexed).
_LIVE = "withdrawn_date IS NULL AND source_id IS NOT NULL"
_ROWS_SQL = ("SELECT id, search_vector::text, source_id, publication_date FROM document "
             f"WHERE id > %s AND {_LIVE} ORDER BY id LIMIT %s")
_COUNT_SQL = f"SELECT count(*) FROM document WHERE {_LIVE}"
#: Ids compared per range when the refresh checks the index's ids against the database's.
ID_RANGE = 1_000_000


@dataclass
class RefreshReport:
    """What a refresh changed: documents (re)indexed, removed (withdrawn or deleted)."""

    indexed: int = 0
    removed: int = 0


def build_index(database: Any, index: TopKIndex, *, batch: int | None = None,
                progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                rebuild: bool = False) -> BuildState:
    """Index every document not withdrawn, going on from an unfinished build of the same database.

    On a finished one it adds the documents with a higher id than the last one indexed, then
    re-indexes the older ones written since the index was last in step (changed, withdrawn), so the
    next refresh reads only what was written after this build began (not everything since the first
    build). ``rebuild`` starts from nothing."""
    batch = int(batch or BATCH)
    identity, legacy = identities(database)
    state = BuildState.load(index.state_path)
    if state is not None and state.database == legacy:
        state.database = identity  # made before the identity left out the address: the same database
    # A finished index gets the documents with new ids, then the older ones written since it was last
    # brought in step; then it is in step as of this build's start (the next refresh reads from there).
    extending = state is not None and state.complete and state.database == identity and not rebuild
    extend_mark = write_mark(database) if extending else -1  # before its snapshot, as below
    extend_start = _snapshot(database) if extending else 0
    previous_last = state.last_id if extending and state is not None else 0
    if state is None or state.database != identity or rebuild:
        index.clear()
        # The write counter is read before the snapshot: a write during the build moves it past the
        # stored mark, so the index is never taken as in step with a write it may have missed.
        state = BuildState(database=identity, write_mark=write_mark(database), start_xid=_snapshot(database))
        report(progress, 0, None, "sampling documents for the fast index's impact tiers")
        index.set_tiers(sample_tiers(database, cancel=cancel))
        state.save(index.state_path)
    state.complete = False
    total = int(database.run(lambda c: c.execute(_COUNT_SQL).fetchone()[0], cancel))
    report(progress, state.documents, total, f"indexing {total:,} documents for fast full-text rows")
    # What the index holds past the last id state.json records is read again, so dropped first: a
    # kill between a batch's commit and the save of state.json left that batch in the index unrecorded
    # (going on from the recorded id added it twice: duplicates, every count too high), and a refresh
    # indexes new rows without moving the last id.
    beyond = index.max_id()
    if beyond > state.last_id:
        index.delete_ids_between(state.last_id + 1, beyond)
        index.commit(final=False)
    try:
        while True:
            check(cancel)
            rows = database.run(lambda c: c.execute(_ROWS_SQL, (state.last_id, batch)).fetchall(), cancel)
            if not rows:
                break
            index.add([(int(r[0]), str(r[1] or ""), int(r[2]), r[3]) for r in rows])
            index.commit(final=False)
            crash_point("topk.batch-committed")
            state.last_id = int(rows[-1][0])
            state.documents += len(rows)
            state.save(index.state_path)
            report(progress, min(state.documents, total), total,
                   f"indexed {state.documents:,} of {total:,} documents")
    except BaseException:
        index.rollback()  # the batch in hand half added: dropped (the committed ones stay)
        raise
    index.commit()  # background merges end here
    crash_point("topk.build-merged")
    if extending:
        _reindex_changed(database, index, state.start_xid, up_to_id=previous_last, cancel=cancel)
        index.commit()
        state.start_xid, state.write_mark = extend_start, extend_mark
    state.complete = True
    state.documents = index.documents()
    state.save(index.state_path)
    return state


#: Fewer sampled documents than this give no impact tiers (too few to place a term's top share; a
#: database this small never needs them).
MIN_TIER_SAMPLE = 1_000


def sample_tiers(database: Any, *, cancel: CancelToken | None = None) -> Tiers:
    """The impact tiers' thresholds from about :data:`SAMPLE_DOCUMENTS` documents (PostgreSQL's
    block sample, repeatable; every document of a smaller database)."""
    size = database.run(lambda c: c.execute(
        "SELECT reltuples FROM pg_class WHERE oid = 'document'::regclass").fetchone()[0], cancel)
    percent = 100.0 if not size or size <= 0 else min(100.0, 150.0 * SAMPLE_DOCUMENTS / float(size))
    rows = database.run(lambda c: c.execute(
        f"SELECT search_vector::text FROM document TABLESAMPLE SYSTEM (%s) REPEATABLE (7) "
        f"WHERE {_LIVE} LIMIT %s", (percent, SAMPLE_DOCUMENTS)).fetchall(), cancel)
    if len(rows) < MIN_TIER_SAMPLE:
        return Tiers()
    return Tiers.from_sample((document_fields(str(r[0] or "")) for r in rows), title_boost=TITLE_BOOST)


def refresh_index(database: Any, index: TopKIndex, *, cancel: CancelToken | None = None) -> RefreshReport:
    """Bring a finished index in step with the database without a rebuild.

    When the index's document count still differs from the database's after the changed rows are
    re-indexed (rows deleted, or an index damaged by a crash of an older version: a batch in it
    twice), the ids are compared range by range and the index repaired: ids gone are removed, ids
    held twice and ids missing are indexed again (once)."""
    state = BuildState.load(index.state_path)
    if state is None or not state.complete:
        raise RuntimeError("the top-k index is not built yet: build it first")
    mark = write_mark(database)  # before the snapshot (see build_index)
    now = _snapshot(database)
    result = _reindex_changed(database, index, state.start_xid, cancel=cancel)
    index.commit()
    expected = int(database.run(lambda c: c.execute(_COUNT_SQL).fetchone()[0], cancel))
    if index.documents() != expected:  # rows deleted, or documents twice or missing: compare the ids
        repaired = _reconcile_ids(database, index, cancel=cancel)
        result.removed += repaired.removed
        result.indexed += repaired.indexed
    state.start_xid = now
    state.documents = index.documents()
    state.write_mark = mark
    state.save(index.state_path)
    log.info("top-k index refreshed: %d indexed, %d removed", result.indexed, result.removed)
    return result


def _reconcile_ids(database: Any, index: TopKIndex, *, cancel: CancelToken | None = None) -> RefreshReport:
    """Make the index hold each live document exactly once, comparing :data:`ID_RANGE` ids at a time
    (bounded memory at 36 million documents; Cancel between ranges): ids the database no longer has
    (deleted, withdrawn) are removed; ids held more than once, or not at all, are indexed again from
    the database, deleted and added in one commit per range (a kill keeps the range as it was)."""
    top = database.run(lambda c: c.execute("SELECT max(id) FROM document").fetchone()[0], cancel)
    last = max(int(top or 0), index.max_id())
    result = RefreshReport()
    for first in range(0, last + 1, ID_RANGE):
        check(cancel)
        upper = first + ID_RANGE - 1
        live = {int(r[0]) for r in database.run(lambda c, first=first, upper=upper: c.execute(
            f"SELECT id FROM document WHERE id BETWEEN %s AND %s AND {_LIVE}", (first, upper)).fetchall(),
            cancel)}
        held = Counter(index.ids_between(first, upper))
        gone = [i for i in held if i not in live]
        again = sorted(i for i in live if held.get(i, 0) != 1)  # twice (a crash's duplicate) or missing
        if not gone and not again:
            continue
        rows = database.run(lambda c, again=again: c.execute(
            "SELECT id, search_vector::text, source_id, publication_date FROM document "
            f"WHERE id = ANY(%s) AND {_LIVE} ORDER BY id", (again,)).fetchall(), cancel) if again else []
        try:
            index.delete([*gone, *again])
            index.add([(int(r[0]), str(r[1] or ""), int(r[2]), r[3]) for r in rows])
            index.commit(final=False)
        except BaseException:
            index.rollback()
            raise
        result.removed += len(gone)
        result.indexed += len(rows)
        log.info("top-k index ids %d-%d repaired: %d removed, %d held twice or missing indexed again",
                 first, upper, len(gone), len(rows))
    index.commit()
    return result


def _snapshot(database: Any) -> int:
    """The oldest transaction still running: every row with a newer ``xmin`` is written after it."""
    return int(database.run(lambda c: c.execute(_SNAPSHOT_SQL).fetchone()[0]))


def _reindex_changed(database: Any, index: TopKIndex, since_xid: int, *, up_to_id: int | None = None,
                     cancel: CancelToken | None = None) -> RefreshReport:
    """Re-index the rows written since ``since_xid`` (new, changed, newly withdrawn: dropped), those
    with an id up to ``up_to_id`` when given, in id order a batch at a time (bounded memory however
    much changed); committed per batch, not at the end."""
    since = str(since_xid % 2**32)  # the 32-bit xid rows carry; age() compares it on the wrap-around
    ceiling = up_to_id if up_to_id is not None else 2**62
    result = RefreshReport()
    last = 0
    while True:
        check(cancel)
        changed = database.run(lambda c, last=last: c.execute(
            "SELECT id, search_vector::text, source_id, publication_date, "
            "withdrawn_date IS NOT NULL OR source_id IS NULL FROM document "
            "WHERE id > %s AND id <= %s AND age(xmin) <= age(%s::text::xid) "
            "ORDER BY id LIMIT %s", (last, ceiling, since, BATCH)).fetchall(), cancel)
        if not changed:
            break
        last = int(changed[-1][0])
        withdrawn = [int(r[0]) for r in changed if r[4]]
        live = [(int(r[0]), str(r[1] or ""), int(r[2]), r[3]) for r in changed if not r[4]]
        try:  # a batch is deleted and added again whole, or not at all
            if withdrawn:  # those the index holds: one withdrawn before the build never was in it
                result.removed += index.count(index._tantivy.Query.term_set_query(index.schema, "id",  # noqa: SLF001 - the index's tantivy module
                                                                                  withdrawn))
            index.delete(int(r[0]) for r in changed)
            result.indexed += index.add(live)
            index.commit(final=False)
        except BaseException:
            index.rollback()
            raise
        crash_point("topk.refresh-committed")
    return result


def write_mark(database: Any) -> int:
    """How many rows of ``document`` were ever inserted, updated or deleted (PostgreSQL's statistics,
    one row to read): when it moved since the index was brought in step, something else wrote."""
    row = database.run(lambda c: c.execute(
        "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), -1) FROM pg_stat_user_tables "
        "WHERE relid = 'document'::regclass").fetchone())
    return int(row[0]) if row else -1


def in_step(database: Any, index: TopKIndex) -> bool:
    """Whether nothing was written into ``document`` since the index's last build or refresh. Where
    something was, a small database (up to the import's own limit) is refreshed here and then is."""
    state = index.state()
    if state is None or not state.complete:
        return False
    # A count that disagrees with state.json's (a crash between a commit and its record, another
    # program's half-finished refresh) is out of step too; a small database's index is also checked
    # against the database's count once per opening (an index an older version left a batch twice in).
    agrees = index.documents() == state.documents
    small = state.documents <= AUTO_TOPK_UP_TO
    if agrees and small and not index.checked_against_database:
        live = int(database.run(lambda c: c.execute(_COUNT_SQL).fetchone()[0]))
        agrees = live == state.documents
        index.checked_against_database = agrees
    if agrees and write_mark(database) == state.write_mark:
        return True
    if not small:
        return False
    refresh_index(database, index)
    index.checked_against_database = True
    return True


def index_folder(database: Any) -> Path:
    """Where this database's index lives: the app's data folder (0700), one folder per database.

    An index made when the identity still named the server's address (see :func:`database_identity`)
    is moved to its new folder here, once, instead of looking unbuilt (hours to build again)."""
    identity, legacy = identities(database)
    folder = paths.sub_dir("topk") / _key(identity)
    if legacy != identity and not folder.exists():
        old = paths.sub_dir("topk") / _key(legacy)
        state = BuildState.load(old / "state.json")
        if state is not None and state.database == legacy:
            old.rename(folder)
            state.database = identity
            state.save(folder / "state.json")
            log.info("top-k index moved to the folder of its database's identity (%s)", folder)
    return folder


def _key(identity: str) -> str:
    return hashlib.sha256(identity.encode()).hexdigest()[:16]


def ready_index(database: Any) -> TopKIndex | None:
    """The finished index of ``database``, or None (never built, or a build still unfinished)."""
    folder = index_folder(database)
    state = BuildState.load(folder / "state.json")
    if state is None or not state.complete:
        return None
    return TopKIndex(folder)


def database_identity(database: Any) -> str:
    """Which database an index (and an import ledger) belongs to: the server's system identifier and
    the database's name and oid. Not the address it was reached by (a socket or TCP, ``localhost`` or
    ``127.0.0.1``, a container's new IP are the same database), except where the role may not read the
    system identifier: then the address and port stand in for it."""
    return identities(database)[0]


def identities(database: Any) -> tuple[str, str]:
    """``(identity, the identity before it left out the address)``: the second finds an index or a
    ledger made before, to move it to the first's place."""
    row = database.run(lambda c: c.execute(
        "SELECT current_database() || '/' || "
        "(SELECT oid FROM pg_database WHERE datname = current_database()), "
        "coalesce(host(inet_server_addr()), 'socket') || ':' || coalesce(inet_server_port()::text, '')"
    ).fetchone())
    try:
        system = database.run(lambda c: c.execute(
            "SELECT system_identifier::text FROM pg_control_system()").fetchone()[0])
    except Exception:  # noqa: BLE001 - a role without the right: the address stands in
        system = ""
    legacy = f"{system}/{row[0]}@{row[1]}"
    return (f"{system}/{row[0]}" if system else legacy), legacy
