"""Crash test, long form: kill every job at many points and check that each restart repairs it.

For each job of ``tests/support/crash.py`` (import, embed, top-k build, KB save, screening
decisions) a clean run gives the counts and the crash points it passes; then ``--kills`` trials per
job (default 50: half at named crash points drawn from every pass, half at random moments of the
job's working time) kill a child process with SIGKILL, start the job again, and compare every count
with the clean run's. A private PostgreSQL server (the app's embedded one) is started for the run and
removed after it.

    .venv/bin/python bench/crash_test.py --kills 50
    .venv/bin/python bench/crash_test.py --kills 10 --jobs topk,import

The last line: ``kills survived / kills tried: X/Y`` (a trial whose job finished before the kill
is not a kill). The exit status is 1 when any kill was not survived.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.crash import JOBS, CrashHarness, Databases, Trial, summary  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=50, help="kills per job (default 50)")
    parser.add_argument("--jobs", default=",".join(JOBS), help=f"comma-separated, of {', '.join(JOBS)}")
    parser.add_argument("--seed", type=int, default=36, help="random seed (a failure reproduces)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.jobs.split(",") if n.strip()]
    unknown = [n for n in names if n not in JOBS]
    if unknown or args.kills < 1:
        parser.error(f"unknown job(s) {unknown}: choose from {', '.join(JOBS)}" if unknown
                     else "--kills must be at least 1")

    from kmds_desktop.literature.store.server import EmbeddedServer

    rng = random.Random(args.seed)
    trials: list[Trial] = []
    with tempfile.TemporaryDirectory(prefix="kmds-crash-pg-") as pg_root, \
            tempfile.TemporaryDirectory(prefix="kmds-crash-") as root:
        server = EmbeddedServer(Path(pg_root) / "postgres", durable=False)
        server.start()
        harness = CrashHarness(Path(root), Databases(server.conninfo))
        try:
            for name in names:
                job = JOBS[name]
                started = time.perf_counter()
                counts, passes, seconds = harness.clean_run(job)
                print(f"== {name}: clean run {seconds:.1f} s of work, counts {counts}; crash points "
                      f"{dict(passes)}", flush=True)
                for trial in harness.random_trials(job, args.kills, rng):
                    trials.append(trial)
                    print(f"   {trial.describe()}", flush=True)
                survived, tried = summary([t for t in trials if t.job == name])
                took = time.perf_counter() - started
                print(f"   {name}: {survived}/{tried} kills survived in {took:.0f} s", flush=True)
        finally:
            harness.close()
            server.destroy()
    survived, tried = summary(trials)
    print(f"kills survived / kills tried: {survived}/{tried}")
    return 0 if survived == tried else 1


if __name__ == "__main__":
    sys.exit(main())
