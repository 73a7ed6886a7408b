"""Named crash points: the places between two writes where the crash tests kill the app.

Why: a kill at a random moment rarely lands in the few microseconds between, say, a batch's commit
and the file that records it, which is exactly where a resumable job goes wrong (a batch added
twice, a count too high). SQLite's crash tests therefore stop the program at chosen points; so do
``tests/test_crash_points.py`` and ``bench/crash_test.py`` through this hook.

``crash_point(name)`` is called at such a place. With ``KMDS_CRASH_AT=<name>:<n>`` in the
environment the process kills itself (SIGKILL: no ``finally``, no flush, no atexit, as ``kill -9``)
the n-th time it passes ``name``; with ``KMDS_CRASH_TRACE=<file>`` each pass appends the name to that
file (a clean run tells the harness which points a job passes, and how often). Neither set: one
global test, nothing else.
"""

from __future__ import annotations

import os
import signal

_TARGET: tuple[str, int] | None = None
_TRACE = os.environ.get("KMDS_CRASH_TRACE") or None
_passes: dict[str, int] = {}


def _parse(value: str) -> tuple[str, int] | None:
    name, _, count = value.rpartition(":")
    if not name or not count.isdigit() or int(count) < 1:
        return None
    return name, int(count)


_TARGET = _parse(os.environ.get("KMDS_CRASH_AT", ""))


def crash_point(name: str) -> None:
    """Die here, as ``kill -9`` would, when this is the pass ``KMDS_CRASH_AT`` names."""
    if _TARGET is None and _TRACE is None:
        return
    seen = _passes[name] = _passes.get(name, 0) + 1
    if _TRACE is not None:
        with open(_TRACE, "a", encoding="utf-8") as trace:
            trace.write(name + "\n")
    if _TARGET is not None and (name, seen) == _TARGET:
        kill = getattr(signal, "SIGKILL", None)
        if kill is not None:
            os.kill(os.getpid(), kill)
        os._exit(137)  # no SIGKILL on this platform: the nearest thing
