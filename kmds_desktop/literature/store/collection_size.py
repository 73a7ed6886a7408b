"""How many documents a literature database holds, cached: the query writers ask it per question.

It lives with the store because an import is what changes it: the database forgets the cached size
after each import, and the query writers (``queries``) read it without the store depending on them.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from typing import Any

#: How long a collection size is reused (an import changes it; the search's own ranking recounts).
SIZE_TTL_S = 300.0
#: Keyed by the database object itself (weakly), so a new object never inherits a dead one's size.
_sizes: weakref.WeakKeyDictionary[Any, tuple[float, int | None]] = weakref.WeakKeyDictionary()


def collection_size(database: Any) -> int | None:
    """Documents in ``database`` (cached for :data:`SIZE_TTL_S`); None when it cannot say.

    ``status()`` counts per source with a join; one plain count is several times cheaper on a large
    database, and every question's strategy needs it.
    """
    if database is None:
        return None
    now = time.monotonic()
    try:
        cached = _sizes.get(database)
    except TypeError:  # not weakly referable: no cache
        cached = None
    if cached is not None and now - cached[0] < SIZE_TTL_S:
        return cached[1]
    size: int | None
    try:
        if callable(getattr(database, "run", None)):
            row = database.run(lambda c: c.execute("SELECT count(*) FROM document").fetchone())
            size = int(row[0]) if row else 0
        else:
            size = int(database.status()["documents"])
    except Exception:  # noqa: BLE001 - unknown size: the strategy is written without counts
        size = None
    with contextlib.suppress(TypeError):
        _sizes[database] = (now, size)
    return size


def forget_collection_size(database: Any) -> None:
    """Drop the cached size (after an import into ``database``)."""
    with contextlib.suppress(TypeError):
        _sizes.pop(database, None)
