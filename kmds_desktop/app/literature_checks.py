"""Checking review rows: which query is valid and how many documents it matches, before anything runs.

Why its own module: a check is a small protocol of its own (an item carries the row's uid and
revision, so an answer for text edited since is dropped), shared by the window's debounced checks
and the CLI; :func:`check_queries` is the slow step a worker runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kmds_desktop.literature.queries.agent import QueryAgent
from kmds_desktop.tasks import Cancelled, CancelToken, ProgressFn, check, report

#: Quiet time after the last keystroke before an edited query is checked: a check per keystroke
#: would keep the database busy with queries the user is still writing (the window's timer waits it).
CHECK_DELAY_S = 0.4


@dataclass
class CheckItem:
    """One query to validate and count: the row's uid and revision travel with the answer."""

    uid: int
    revision: int
    text: str


@dataclass
class CheckResult:
    uid: int
    revision: int
    ok: bool | None  # None: the check itself failed (database down)
    message: str  # normalized query when ok, else the error
    matches: int | None = None
    exact: bool = True
    #: The query's terms no document has (see :attr:`QueryRow.weakness`).
    absent: list[str] = field(default_factory=list)


def check_queries(agent: QueryAgent, items: Sequence[CheckItem], *, chunk: Callable[[CheckResult], None],
                  progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> int:
    """Validate and count each query (the agent's check); each answer goes out through ``chunk``.

    A database failure is reported for every remaining row (``ok=None``) and then raised, so rows
    show why they could not be checked.
    """
    for i, item in enumerate(items):
        check(cancel)
        report(progress, i, len(items), "checking queries")
        try:
            stat = agent.check_query(item.text, cancel=cancel)
        except Cancelled:
            raise
        except Exception as err:
            if cancel is not None and cancel.cancelled:
                raise Cancelled("cancelled by the user") from None
            for result in not_checked(items[i:], err):
                chunk(result)
            raise
        if stat.valid:
            chunk(CheckResult(item.uid, item.revision, True, stat.normalized or "", stat.matches,
                              not stat.estimated, list(getattr(stat, "absent_terms", []) or [])))
        else:
            chunk(CheckResult(item.uid, item.revision, False, stat.invalid_reason or ""))
    report(progress, len(items), len(items), "queries checked")
    return len(items)


def not_checked(items: Sequence[CheckItem], err: BaseException) -> list[CheckResult]:
    """The answers for ``items`` when they could not be checked (the database is down or could not
    be opened): each row says why, and is checked again once the database answers."""
    from kmds_desktop.app.messages import describe_error  # why: start-up time: it loads httpx, ollama

    return [CheckResult(i.uid, i.revision, None, f"not checked: {describe_error(err)}") for i in items]


