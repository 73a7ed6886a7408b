"""Dates as the literature filters take them: a date, a datetime, a year, or ISO text.

Why a module of its own: the full-text rows (:mod:`~kmds_desktop.literature.store.database`) and the
semantic rows (:mod:`~kmds_desktop.literature.store.vectors`) apply the same date filters, and vectors
reaching into the database module for it made ``database -> schema -> vectors -> database`` a cycle.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from kmds_desktop.literature.errors import LiteratureError


def coerce_date(value: Any, *, end: bool, name: str) -> dt.date | None:
    """Accept a date, datetime, year (int) or ISO text ``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD``.

    A partial date means its whole span: ``from_date="2019"`` starts on 1 January, ``to_date="2019"``
    ends on 31 December.
    """
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    text = str(value).strip()
    try:
        parts = [int(p) for p in text.split("-")]
        if len(parts) == 1:
            return dt.date(parts[0], 12, 31) if end else dt.date(parts[0], 1, 1)
        if len(parts) == 2:
            year, month = parts
            if end:
                nxt = dt.date(year + (month == 12), month % 12 + 1, 1)
                return nxt - dt.timedelta(days=1)
            return dt.date(year, month, 1)
        if len(parts) == 3:
            return dt.date(*parts)
    except (ValueError, OverflowError):
        pass
    raise LiteratureError(f"{name} {value!r} is not a date: use YYYY, YYYY-MM or YYYY-MM-DD")
