"""Crash tests, short form: each job killed (SIGKILL) at a few named crash points, then started again.

The next start must go on and repair: every count (documents, distinct keys, ledger entries, index
documents and distinct ids, vectors, KB observations and edits, decisions and their log) equals a
clean run's, with no duplicate and no loss. The points are spread over every point the job passes,
first pass and last (deterministic, so a failure reproduces); ``bench/crash_test.py`` is the long
form, with random points and random moments. The harness is ``tests/support/crash.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.crash import JOBS, CrashHarness, Databases

#: (job, kills, the crash points its clean run must pass: the hooks are really reached)
SHORT_FORM = [
    ("import", 4, {"import.file-committed", "topk.batch-committed", "topk.build-merged"}),
    ("topk", 3, {"topk.batch-committed", "topk.build-merged"}),
    ("embed", 1, {"embed.batch-committed"}),
    ("kb-save", 2, {"kb.save.temp-written"}),
    ("screening", 2, {"sqlite.committed"}),
]


def test_every_job_is_in_the_short_form() -> None:
    assert {name for name, _, _ in SHORT_FORM} == set(JOBS)


@pytest.mark.parametrize(("name", "kills", "points"), SHORT_FORM, ids=[s[0] for s in SHORT_FORM])
def test_a_job_killed_at_its_crash_points_is_repaired_by_the_next_start(
        name: str, kills: int, points: set[str], pg_server: Any, tmp_path: Path) -> None:
    job = JOBS[name]
    harness = CrashHarness(tmp_path, Databases(pg_server.conninfo) if job.needs_database else None)
    try:
        expected, passes, _ = harness.clean_run(job)
        assert points <= set(passes), f"{name} never passed {points - set(passes)}: {dict(passes)}"
        chosen = harness.spread(job, kills)
        assert len(chosen) == kills
        for point in chosen:
            trial = harness.trial(job, point=point)
            assert trial.killed, trial.describe()
            assert trial.survived, trial.describe()
    finally:
        harness.close()
