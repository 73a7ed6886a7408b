"""Where the user left a review: the open review, its search, the record on screen, the recent reviews.

Why a file of its own in the data folder (``review_place.json``), not the settings: the record on screen
changes with every decision, and writing the whole settings file that often would race the Preferences
dialog's own writes. The window writes the place on each change and on close and reads it on start;
the slow part (opening the review's records and fetching its search's documents) runs on a worker
(:func:`open_review`). A place file that cannot be read is treated as no place at all: the window starts
as on a first run, and the next change writes a good file.

What a review's "search" is: the newest search-history set its records came from (a source named
``#N``, as ``literature screen add --set N`` and the window's "Screen these results" name it), unless the
user ran and screened another one since (then the place names that set).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kmds_desktop import paths
from kmds_desktop.app.reviews import NewRecordsNotice, ReviewBook
from kmds_desktop.app.screening import ScreeningSession
from kmds_desktop.app.strategy import SavedSearch, saved_search
from kmds_desktop.literature.reviews.store import ReviewStore
from kmds_desktop.literature.screening.decisions import ScreeningError
from kmds_desktop.literature.strategy.history import HistoryError, SearchHistory
from kmds_desktop.literature.strategy.workbench import SearchWorkbench
from kmds_desktop.user_files import write_user_text

log = logging.getLogger(__name__)

PLACE_FILE = "review_place.json"
#: How many reviews File → Recent reviews lists.
MAX_RECENT_REVIEWS = 8

Key = tuple[str, str]


@dataclass(frozen=True)
class DatabaseFingerprint:
    """What the literature database looked like when the reviews were last checked: its document count,
    how many are withdrawn and the newest withdrawal date. Why more than the count: a withdrawal changes
    no count of documents, yet the reviews holding the record must say so (the next update flags it)."""

    documents: int
    withdrawn: int | None = None  #: None: not known (a place file written before withdrawals were kept)
    last_withdrawn: str = ""

    def differs(self, other: DatabaseFingerprint | None) -> bool:
        """True when ``other`` (the one seen before) is another state of the database; None (never
        checked) is not a change: there is nothing to compare with."""
        if other is None:
            return False
        if other.withdrawn is None:  # an older place file: the count is all that was kept
            return other.documents != self.documents
        return (other.documents, other.withdrawn, other.last_withdrawn) != (
            self.documents, self.withdrawn, self.last_withdrawn)

    @classmethod
    def from_dict(cls, data: Any) -> DatabaseFingerprint | None:
        """The fingerprint from the place file's JSON (None for anything misshapen)."""
        if not isinstance(data, dict):
            return None
        documents, withdrawn, last = data.get("documents"), data.get("withdrawn"), data.get("last_withdrawn")
        if not isinstance(documents, int) or isinstance(documents, bool) or documents < 0:
            return None
        return cls(documents, withdrawn if isinstance(withdrawn, int) and withdrawn >= 0 else None,
                   last if isinstance(last, str) else "")


def database_fingerprint(database: Any) -> DatabaseFingerprint:
    """The database's :class:`DatabaseFingerprint`: one scan of the document table, on a worker."""
    rows = database.fetch_all(
        "SELECT count(*), count(withdrawn_date), coalesce(max(withdrawn_date)::text, '') FROM document")
    documents, withdrawn, last = rows[0] if rows else (0, 0, "")
    return DatabaseFingerprint(int(documents), int(withdrawn), str(last))


@dataclass
class ReviewPlace:
    """The window's review state that outlives a restart (see the module docstring)."""

    review: str = ""  #: the open review's id ("" when none is open)
    search_set: int | None = None  #: the search-history set shown in the literature panel
    record: Key | None = None  #: the record on the screening window's screen
    #: The update round whose new records the screening shows alone (None: the whole queue).
    only_round: int | None = None
    recent: list[str] = field(default_factory=list)  #: newest first, at most MAX_RECENT_REVIEWS
    #: The literature database when the reviews were last checked for new records and withdrawals.
    database_seen: DatabaseFingerprint | None = None

    # -- changes ---------------------------------------------------------------------------------------
    def opened(self, review: str, search_set: int | None = None) -> None:
        """``review`` is open now (first in the recent list); the place of another review is dropped."""
        if review != self.review:
            self.record, self.only_round = None, None
        self.review = review
        self.search_set = search_set
        self.recent = [review, *[r for r in self.recent if r != review]][:MAX_RECENT_REVIEWS]

    def renamed(self, old: str, new: str) -> None:
        self.recent = [new if r == old else r for r in self.recent]
        if self.review == old:
            self.review = new

    def deleted(self, review: str) -> None:
        self.recent = [r for r in self.recent if r != review]
        if self.review == review:
            self.closed()

    def closed(self) -> None:
        """No review is open any more (its screening window was closed by the user)."""
        self.review, self.search_set, self.record, self.only_round = "", None, None, None

    def keep_only(self, existing: Iterable[str]) -> None:
        """Drop recent entries of reviews deleted elsewhere (the CLI, another window)."""
        alive = set(existing)
        self.recent = [r for r in self.recent if r in alive]
        if self.review and self.review not in alive:
            self.closed()

    # -- the file --------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["record"] = list(self.record) if self.record else None
        return data

    @classmethod
    def from_dict(cls, data: Any) -> ReviewPlace:
        """A place from the file's JSON; a value of the wrong type is dropped, never trusted."""
        if not isinstance(data, dict):
            return cls()
        record = data.get("record")
        recent = data.get("recent")
        number = data.get("search_set")
        only = data.get("only_round")
        seen = DatabaseFingerprint.from_dict(data.get("database_seen"))
        counted = data.get("documents_seen")  # a place file of an older version kept the count alone
        if seen is None and isinstance(counted, int) and not isinstance(counted, bool) and counted >= 0:
            seen = DatabaseFingerprint(counted)
        return cls(
            review=data["review"] if isinstance(data.get("review"), str) else "",
            search_set=number if isinstance(number, int) and number > 0 else None,
            record=(str(record[0]), str(record[1]))
            if isinstance(record, list) and len(record) == 2 and all(isinstance(x, str) for x in record)
            else None,
            only_round=only if isinstance(only, int) and only > 0 else None,
            recent=[r for r in recent if isinstance(r, str)][:MAX_RECENT_REVIEWS] if isinstance(recent, list)
            else [],
            database_seen=seen,
        )


def place_path() -> Path:
    return paths.data_dir() / PLACE_FILE


def read_place(path: str | Path | None = None) -> ReviewPlace:
    """The saved place (an empty one when there is none or the file is unreadable: see the module
    docstring)."""
    path = Path(path) if path is not None else place_path()
    try:
        return ReviewPlace.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return ReviewPlace()
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        log.warning("ignoring the review place file %s: %s", path, err)
        return ReviewPlace()


def write_place(place: ReviewPlace, path: str | Path | None = None) -> str | None:
    """Write the place (to a temporary file first, so a crash mid-write leaves the old one); returns
    the problem as a sentence for the message bar, or None."""
    path = Path(path) if path is not None else place_path()
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(place.to_dict(), indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as err:
        return (f"Where you are in the review could not be saved to {path} ({err.strerror or err}); "
                "free some disk space or check the data folder's permissions")
    return None


# -- opening a review (on a worker) -------------------------------------------------------------------

@dataclass
class OpenedReview:
    """What the window shows for an opened review: its screening session, its search (with the
    documents it found) for the literature panel, and a note when the search could not be shown."""

    session: ScreeningSession
    search: SavedSearch | None = None
    documents: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""
    only_round: int | None = None
    only_keys: frozenset[Key] | None = None

    @property
    def review(self) -> str:
        return self.session.review.id


def search_set_of(store: ReviewStore, review_id: str) -> int | None:
    """The newest search-history set the review's records came from (``#N`` sources), or None."""
    numbers = [int(s.origin.split()[0][1:]) for s in store.sources(review_id)
               if s.origin.startswith("#") and s.origin.split()[0][1:].isdigit()]
    return numbers[-1] if numbers else None


def open_review(name: str, *, database: Any = None, search_set: int | None = None,
                record: Key | None = None, only_round: int | None = None,
                store_path: str | Path | None = None, history_path: str | Path | None = None) -> OpenedReview:
    """Open review ``name`` for screening, back at ``record`` when it is still in the review, showing
    only the records of update ``only_round`` when given; with ``database``, its search's rows and
    documents for the literature panel. Slow (features of every record): call it on a worker."""
    store = ReviewStore(store_path)
    try:
        review = store.find(name)
        session = ScreeningSession(store, review.id)
    except BaseException:
        store.close()
        raise
    opened = OpenedReview(session)
    if only_round is not None:
        keys = frozenset(k for k, n in store.rounds(review.id).items() if n == only_round)
        if keys:
            opened.only_round, opened.only_keys = only_round, keys
            session.show_only(keys)
    if record is not None:
        # the record left the review (merged, deleted): the queue goes on
        with contextlib.suppress(ScreeningError):
            session.go_to(record)
    number = search_set or search_set_of(store, review.id)
    if number is None:
        opened.note = "its records came from files, not from a search"
    elif database is None:
        opened.note = "the literature database is not available"
    else:
        try:
            with SearchHistory(history_path) as history:
                opened.search = saved_search(history, number)
                opened.documents = SearchWorkbench(history, database).documents(number)
        except HistoryError as err:
            opened.search, opened.documents = None, []
            opened.note = f"search #{number} is no longer in the search history ({err})"
    return opened


def update_review(name: str, *, database: Any, store_path: str | Path | None = None,
                  history_path: str | Path | None = None, progress: Any = None,
                  cancel: Any = None) -> Any:
    """Run the review's update (:meth:`ReviewBook.update`) on a worker; the window then opens the
    review showing only the update's new records."""
    if progress:
        progress(0, None, f"re-running the strategy of {name}")
    with ReviewBook(store_path) as book, SearchHistory(history_path) as history:
        return book.update(name, history=history, database=database)


def new_records_line(notice: NewRecordsNotice) -> str:
    """The window's "2 reviews have 14 new records (…)" and "1 review has 2 records withdrawn since
    (…)" ("" when nothing changed)."""
    return notice.new_line()


def check_new_records(database: Any, *, store_path: str | Path | None = None,
                      history_path: str | Path | None = None) -> NewRecordsNotice:
    """How many new records each review's strategy finds today, and how many of its records were
    withdrawn since (nothing is added or flagged): the check after an import and on start when the
    database changed."""
    with ReviewBook(store_path) as book:
        if not book.store.reviews():
            return NewRecordsNotice()
        with SearchHistory(history_path) as history:
            notice = book.new_records(database, history=history)
    for review, problem in notice.problems.items():
        log.warning("review %s: its strategy could not run: %s", review, problem)
    return notice


@dataclass
class DatabaseCheck:
    """What :func:`check_if_changed` found: the database now, and the reviews' news when it changed."""

    fingerprint: DatabaseFingerprint
    notice: NewRecordsNotice | None = None  #: None when the database is as it was (or never checked)


def check_if_changed(database: Any, seen: DatabaseFingerprint | None, *,
                     store_path: str | Path | None = None,
                     history_path: str | Path | None = None) -> DatabaseCheck:
    """The start-up / after-import check: the database's fingerprint, and when it differs from
    ``seen`` the reviews' new and withdrawn records (:func:`check_new_records`). On a worker."""
    now = database_fingerprint(database)
    if not now.differs(seen):
        return DatabaseCheck(now)
    return DatabaseCheck(now, check_new_records(database, store_path=store_path, history_path=history_path))


def review_names(store_path: str | Path | None = None) -> list[str]:
    """The ids of the data folder's reviews (Recent reviews drops the ones deleted elsewhere)."""
    with ReviewBook(store_path) as book:
        return [r.id for r in book.store.reviews()]


# -- the menu's other commands (each on a worker; the window shows the returned line) -----------------

@dataclass(frozen=True)
class ReviewChoice:
    """One review in the Open review list."""

    id: str
    line: str


def review_choices(store_path: str | Path | None = None) -> list[ReviewChoice]:
    with ReviewBook(store_path) as book:
        return [ReviewChoice(s.id, s.line()) for s in book.summaries()]


def new_review(name: str, question: str = "", *, search_set: int | None = None, database: Any = None,
               store_path: str | Path | None = None, history_path: str | Path | None = None) -> str:
    """Make a review; with ``search_set`` (the search the literature panel shows) its strategy and first
    records come from that search, as ``literature review new --from-set N`` makes them."""
    with ReviewBook(store_path) as book:
        if search_set is None or database is None:
            return book.new(name, [question] if question.strip() else [])
        with SearchHistory(history_path) as history:
            return book.new(name, [question] if question.strip() else [], history=history, database=database,
                            from_sets=[search_set])


def use_search_as_strategy(name: str, search_set: int, *, store_path: str | Path | None = None,
                           history_path: str | Path | None = None) -> str:
    """History set ``search_set`` (the search the literature panel shows, perhaps edited since the last
    update) becomes review ``name``'s strategy, as ``literature review strategy NAME --from-set N`` makes it:
    a new version logged with its time when it differs, so the report says what was searched when and the
    next Update runs it. Returns the line the window shows."""
    with ReviewBook(store_path) as book, SearchHistory(history_path) as history:
        before = book.strategy(name, history)
        saved = book.set_strategy(name, history, [search_set],
                                  note=f"edited: search #{search_set} in the window")
        review = book.store.find(name).id
    if before is not None and before.version == saved.version:
        return f"Search #{search_set} is already the strategy of review {review} (version {saved.version})."
    return (f"Review {review} now updates with search #{search_set} (strategy version {saved.version}): "
            f"{' '.join(saved.text.split())[:160]}")


def rename_review(name: str, new_name: str, store_path: str | Path | None = None) -> str:
    with ReviewBook(store_path) as book:
        return book.rename(name, new_name)


def delete_review(name: str, store_path: str | Path | None = None) -> int:
    with ReviewBook(store_path) as book:
        return book.delete(name)


def export_review(name: str, path: str | Path, store_path: str | Path | None = None) -> Path:
    with ReviewBook(store_path) as book:
        return book.export(name, path)


def import_review(path: str | Path, store_path: str | Path | None = None) -> tuple[str, str]:
    """Import a review file (a name in use gets a new name); returns the review's id and what was
    imported, as one line."""
    with ReviewBook(store_path) as book:
        imported = book.import_file(path)
    return imported.review_id, imported.line()


def review_report(name: str, store_path: str | Path | None = None,
                  history_path: str | Path | None = None) -> str:
    """The review's report as ``literature review show`` prints it: questions, strategy versions, the log
    of each round (date, counts, the strategy it ran) and the PRISMA 2020 flow per round."""
    with ReviewBook(store_path) as book, SearchHistory(history_path) as history:
        return "\n".join(book.report_lines(name, history)) + "\n"


def review_report_and_flow(name: str, store_path: str | Path | None = None,
                           history_path: str | Path | None = None) -> tuple[str, str]:
    """:func:`review_report` and the review's PRISMA 2020 diagram for updated reviews (SVG), read together
    for the window's Review report…"""
    with ReviewBook(store_path) as book, SearchHistory(history_path) as history:
        return "\n".join(book.report_lines(name, history)) + "\n", book.flow_svg(name)


def write_review_flow(name: str, path: str | Path, store_path: str | Path | None = None) -> Path:
    """Write the review's PRISMA 2020 diagram for updated reviews to ``path`` (SVG)."""
    with ReviewBook(store_path) as book:
        svg = book.flow_svg(name)
    return write_user_text(Path(path), svg)


def write_review_report(name: str, path: str | Path, store_path: str | Path | None = None,
                        history_path: str | Path | None = None) -> Path:
    """Write :func:`review_report` to ``path`` (a text file: to attach to the review's write-up)."""
    text = review_report(name, store_path, history_path)
    return write_user_text(Path(path), text)


def merge_review(name: str, path: str | Path, store_path: str | Path | None = None) -> str:
    """Merge a second screener's returned review file; returns the report as one line."""
    with ReviewBook(store_path) as book:
        report = book.merge(name, path)
    return report.line()
