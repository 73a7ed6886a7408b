"""Benchmark: set algebra over the history in Python vs the history database computing it in SQL.

Four sets of 100,000 documents each (random ids out of 250,000, seed 0) are stored in a fresh search
history (SQLite, WAL, as the app writes it). The expression ``#1 AND (#2 OR #3) NOT #4`` is counted
two ways, each from the stored sets, with nothing cached between repeats:

- Python: read each operand's ids from the history into Python sets, then ``&``, ``|``, ``-``
  (:func:`set_algebra.evaluate`);
- SQL: what :meth:`SearchWorkbench.count` does: the reverse-Polish expression compiled to one SQLite
  compound ``SELECT`` (``INTERSECT``, ``UNION``, ``EXCEPT`` over the ``set_member`` primary key,
  :func:`set_algebra.to_sql`) and ``count(*)`` in the database.

Both must give the same count. Best of 7 each, the two alternating; the faster is the
implementation (measured: SQL, so the workbench counts and combines in SQL and keeps Python only for
expressions nested deeper than SQLite's parser takes).
Run: ``.venv/bin/python bench/set_algebra.py``. The last line is the ratio SQL / Python.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SET_SIZE = 100_000
UNIVERSE = 250_000
EXPRESSION = "#1 AND (#2 OR #3) NOT #4"
REPEATS = 7

def best_of_interleaved(first, second) -> tuple[float, int, float, int]:
    """Best time of each over REPEATS rounds, alternating the two so a load change on a shared machine
    hits both alike."""
    best = [float("inf"), float("inf")]
    values = [-1, -1]
    for _ in range(REPEATS):
        for i, fn in enumerate((first, second)):
            start = time.perf_counter()
            values[i] = fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best[0], values[0], best[1], values[1]


def main() -> int:
    from kmds_desktop.literature.strategy import set_algebra
    from kmds_desktop.literature.strategy.history import Member, SearchHistory
    from kmds_desktop.literature.strategy.workbench import SearchWorkbench

    rng = random.Random(0)
    with tempfile.TemporaryDirectory(prefix="kmds-bench-history-") as folder:
        history = SearchHistory(Path(folder) / "history.sqlite3")
        start = time.perf_counter()
        for n in range(1, 5):
            ids = rng.sample(range(1, UNIVERSE + 1), SET_SIZE)
            number = history.begin_search(f"set {n}", "bench")
            history.complete_search(number, [], [Member(d, r, "bench", str(d)) for r, d in enumerate(ids, 1)])
        print(f"stored 4 sets of {SET_SIZE:,} documents in {time.perf_counter() - start:.2f} s")
        workbench = SearchWorkbench(history)
        rpn = set_algebra.parse(EXPRESSION)

        def in_python() -> int:
            return len(set_algebra.evaluate(rpn, lambda tok: history.member_ids(tok.set_number)))

        def in_sql() -> int:
            return workbench.count(EXPRESSION).count

        t_py, n_py, t_sql, n_sql = best_of_interleaved(in_python, in_sql)
        history.close()
    assert n_py == n_sql, (n_py, n_sql)
    print(f"{EXPRESSION} = {n_py:,} documents")
    print(f"Python sets (read from the history + set operations): {t_py * 1000:.1f} ms")
    print(f"SQLite compound SELECT (count in the database):        {t_sql * 1000:.1f} ms")
    faster = "Python" if t_py <= t_sql else "SQL"
    print(f"ratio SQL/Python = {t_sql / t_py:.2f} ({faster} is faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
