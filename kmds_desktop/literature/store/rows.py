"""The one value of a query that always returns one row (``count(*)``, ``EXPLAIN``, a cast).

psycopg types ``fetchone()`` as ``tuple | None``: None only when a query has no rows, which these
queries cannot. Naming that here, with an error that says which query broke the promise, keeps the
callers' ``fetchone()[0]`` honest for the type checker without an ``assert`` in the product code.
"""

from __future__ import annotations

from typing import Any

import psycopg


def first_value(cursor: psycopg.Cursor[Any]) -> Any:
    """The first column of the cursor's next row; a query that returned no row is a bug in the query."""
    row = cursor.fetchone()
    if row is None:
        raise LookupError(f"a query certain to return one row returned none ({cursor.statusmessage})")
    return row[0]
