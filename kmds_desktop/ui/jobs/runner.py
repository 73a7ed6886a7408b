"""Background jobs for the GUI: every blocking call runs on a QThread worker, never on the GUI thread.

The rule
--------
*All* blocking work (loading or saving a KB, building the semantic index, every LLM call including
streamed answers, every database call) runs on a :class:`~kmds_desktop.ui.jobs.worker.Worker` in its
own ``QThread``, wrapping a plain core function that takes ``progress=`` and ``cancel=`` keyword arguments
(:mod:`kmds_desktop.tasks`). The app runs on a ``qasync.QEventLoop`` so that asyncio code *could*
share Qt's loop, but the app itself defines no coroutines: streaming an answer is a worker that
emits text chunks (``chunk=`` callback, see below). One rule, no exceptions, easy to test.

API
---
::

    jobs = JobRunner(parent)
    job = jobs.submit(
        "kb.load", load_kb, path,          # kind, plain function, its positional args
        label="Opening demo.xml",          # shown in the progress strip
        on_result=..., on_error=..., on_progress=..., on_chunk=..., on_finished=...,
        **kwargs,                          # more keyword args for the function
    )
    job.cancel()                           # sets the CancelToken; its hooks abort the backend call
    jobs.shutdown()                        # on close: cancel everything, join every thread

``fn`` is called on the worker thread as ``fn(*args, progress=..., cancel=..., **kwargs)``; with
``on_chunk`` it also receives ``chunk=`` (a callable taking a piece of text or any object) for
streamed output. Pass ``pass_progress=False`` for a function that takes neither ``progress`` nor
``cancel`` (cancel then only stops delivery of its result).

Callbacks always run on the GUI thread (signals from the worker are queued to a :class:`Job` living
on the GUI thread), in this order: ``on_progress``/``on_chunk`` (any number), then -- once the thread
has stopped and the kind is free again -- exactly one of ``on_result(value)``, ``on_error(exception)``
or ``on_cancelled()``, then ``on_finished()``. A function that returns normally after its token
was cancelled counts as cancelled. An exception raised by a callback goes to
``JobRunner.callback_error`` (the main window shows it) instead of being lost in Qt's event loop.

One job per kind
----------------
At most one job of each ``kind`` runs at a time. What happens to a second request is the kind's
policy (:data:`POLICIES`, overridable per call with ``policy=``):

* ``"refuse"`` (default; e.g. opening a KB, asking a question): ``submit`` returns ``None`` and
  emits ``refused(kind, message)``; the window shows the message.
* ``"latest"`` (e.g. re-indexing after edits): the request waits until the running job ends; a newer
  waiting request replaces an older one, because only the newest state matters.
* ``"queue"``: requests wait and run in order.

Feedback
--------
Following Anki's progress handling: a busy cursor after :data:`BUSY_CURSOR_MS` (300 ms) while any
job with ``busy_cursor=True`` runs, and ``job_shown(job)`` after :data:`SHOW_PROGRESS_MS` (600 ms)
so :class:`kmds_desktop.ui.jobs.progress_strip.ProgressStrip` shows a non-modal progress bar with a Cancel
button in the status bar. Quick jobs therefore never flicker anything.

Progress signals are throttled on the worker side (at most one every
:data:`~kmds_desktop.ui.jobs.worker.PROGRESS_INTERVAL_S`, plus the final one, and a new step: a new
message without a total, such as "m is writing an abstract", which no later report would bring to
the screen; a report held back goes out when the interval is over unless a newer one went first, so
the last report before a long stall is the one shown through it) and chunks are batched the same way,
so a tight core loop cannot flood the GUI thread's event queue.
"""

from __future__ import annotations

import logging
import sys
import time
import traceback
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt, QThread, QTimer, Signal
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QApplication

from kmds_desktop.ui.jobs.job import LIVE_THREADS, Job

log = logging.getLogger(__name__)

BUSY_CURSOR_MS = 300
SHOW_PROGRESS_MS = 600
#: Python's GIL switch interval while jobs can run. At the default 5 ms, the GUI thread waits up
#: to 5 ms for a busy worker each time it needs the GIL, and several waits add up within one
#: event; 1 ms keeps its turns short at a small cost in worker throughput.
GUI_SWITCH_INTERVAL_S = 0.001

#: Job kinds used by the app, with what happens to a second request while one runs.
POLICIES: dict[str, str] = {
    "kb.load": "refuse",
    "kb.save": "queue",
    "index.build": "latest",
    "ask": "refuse",
    "llm.models": "latest",
    "literature.status": "latest",
}

#: Every JobRunner alive (weakly), so the test fixture can stop the jobs of a leaking test.
LIVE_RUNNERS: weakref.WeakSet[JobRunner] = weakref.WeakSet()


class JobRunner(QObject):
    """Starts :class:`Job` s, enforces one-per-kind, drives the busy cursor and progress strip."""

    job_started = Signal(object)  # Job
    job_shown = Signal(object)  # Job running for SHOW_PROGRESS_MS: show progress + Cancel
    job_finished = Signal(object)  # Job
    job_error = Signal(object, object)  # Job, exception (only when the job had no on_error)
    refused = Signal(str, str)  # kind, message for the user
    callback_error = Signal(object)  # exception raised by a callback on the GUI thread
    busy_changed = Signal(bool)

    def __init__(self, parent: QObject | None = None, *, policies: dict[str, str] | None = None) -> None:
        super().__init__(parent)
        self.policies = dict(POLICIES)
        LIVE_RUNNERS.add(self)
        if sys.getswitchinterval() > GUI_SWITCH_INTERVAL_S:
            sys.setswitchinterval(GUI_SWITCH_INTERVAL_S)
        if policies:
            self.policies.update(policies)
        self._running: dict[str, Job] = {}
        self._waiting: dict[str, deque[Job]] = {}
        self._closed = False
        self._cursor_on = False
        self._busy_timer = QTimer(self)
        self._busy_timer.setSingleShot(True)
        self._busy_timer.timeout.connect(self._update_cursor)

    # -- public --
    def submit(
        self,
        kind: str,
        fn: Callable[..., Any],
        *args: Any,
        label: str = "",
        policy: str | None = None,
        busy_cursor: bool = True,
        pass_progress: bool = True,
        on_result: Callable[[Any], Any] | None = None,
        on_error: Callable[[BaseException], Any] | None = None,
        on_progress: Callable[[int, int | None, str], Any] | None = None,
        on_chunk: Callable[[Any], Any] | None = None,
        on_cancelled: Callable[[], Any] | None = None,
        on_finished: Callable[[], Any] | None = None,
        **kwargs: Any,
    ) -> Job | None:
        """Run ``fn`` on a worker thread; ``None`` when refused (see the module docstring)."""
        if self._closed:
            return None
        policy = policy or self.policies.get(kind, "refuse")
        if policy not in ("refuse", "queue", "latest"):
            raise ValueError(f"unknown job policy {policy!r} for kind {kind!r}")
        job = Job(
            self,
            kind,
            fn,
            args,
            kwargs,
            label=label,
            busy_cursor=busy_cursor,
            pass_progress=pass_progress,
            callbacks={
                "on_result": on_result,
                "on_error": on_error,
                "on_progress": on_progress,
                "on_chunk": on_chunk,
                "on_cancelled": on_cancelled,
                "on_finished": on_finished,
            },
        )
        current = self._running.get(kind)
        if current is None:
            self._start(job)
            return job
        if policy == "refuse":
            self.refused.emit(kind, f"{current.label} is still running; wait for it or cancel it first.")
            return None
        waiting = self._waiting.setdefault(kind, deque())
        if policy == "latest":
            while waiting:
                old = waiting.popleft()
                old.state = "cancelled"
                old._call("on_cancelled")  # noqa: SLF001 - the runner drives its jobs
                old.finished.emit()
        waiting.append(job)
        return job

    def running(self, kind: str | None = None) -> list[Job]:
        """Jobs running now (of one kind, or all)."""
        if kind is not None:
            job = self._running.get(kind)
            return [job] if job else []
        return list(self._running.values())

    def is_busy(self, kind: str | None = None) -> bool:
        return bool(self.running(kind)) or bool(kind is not None and self._waiting.get(kind))

    def cancel_all(self) -> None:
        for queue in self._waiting.values():
            for job in list(queue):
                job.token.cancel()
                job.state = "cancelled"
            queue.clear()
        for job in list(self._running.values()):
            job.cancel()

    def wait_all(self, timeout_ms: int = 30_000) -> bool:
        """Process events until every job (running and waiting) has finished; False on timeout."""
        deadline = time.monotonic() + timeout_ms / 1000
        app = QApplication.instance()
        while self._running or any(self._waiting.values()):
            if time.monotonic() > deadline:
                return False
            if app is not None:
                app.processEvents()
            time.sleep(0.005)
        return True

    def shutdown(self, timeout_ms: int = 30_000) -> None:
        """Cancel every job and join every thread (the window calls this on close)."""
        self._closed = True
        self.cancel_all()
        for job in list(self._running.values()):
            thread = job._thread  # noqa: SLF001 - the runner drives its jobs
            if thread is not None and not thread.wait(timeout_ms):
                log.warning("job %s did not stop within %d ms", job.kind, timeout_ms)
        app = QApplication.instance()
        if app is not None:
            app.processEvents()  # deliver the queued finish signals
        self._set_cursor(False)

    # -- internals --
    def _start(self, job: Job) -> None:
        self._running[job.kind] = job
        job._start()  # noqa: SLF001 - the runner drives its jobs
        self.job_started.emit(job)
        if job.busy_cursor and not self._busy_timer.isActive() and not self._cursor_on:
            self._busy_timer.start(BUSY_CURSOR_MS)
        QTimer.singleShot(SHOW_PROGRESS_MS, job, lambda: self._maybe_show(job))

    def _maybe_show(self, job: Job) -> None:
        if job.running:
            self.job_shown.emit(job)

    # -- what its jobs report (the job's JobOwner) --
    def drop_queued(self, job: Job) -> None:
        queue = self._waiting.get(job.kind)
        if queue and job in queue:
            queue.remove(job)
            job.state = "cancelled"
            job._call("on_cancelled")  # noqa: SLF001 - the runner drives its jobs
            job.finished.emit()

    def release(self, job: Job) -> None:
        if self._running.get(job.kind) is job:
            del self._running[job.kind]

    def job_ended(self, job: Job) -> None:
        self.release(job)
        self.job_finished.emit(job)
        queue = self._waiting.get(job.kind)
        if queue and not self._closed and job.kind not in self._running:
            self._start(queue.popleft())
        self._update_cursor()

    def report_callback_error(self, exc: BaseException) -> None:
        self.callback_error.emit(exc)

    def report_job_error(self, job: Job, exc: BaseException) -> None:
        self.job_error.emit(job, exc)

    # -- internals --
    def _update_cursor(self) -> None:
        """Busy cursor on while a busy-cursor job has run for BUSY_CURSOR_MS; else re-arm the timer."""
        now = time.monotonic()
        remaining = [
            BUSY_CURSOR_MS - (now - j.started_at) * 1000
            for j in self._running.values()
            if j.busy_cursor and j.started_at is not None
        ]
        if not remaining:
            self._set_cursor(False)
        elif min(remaining) <= 5:
            self._set_cursor(True)
        elif not self._cursor_on and not self._busy_timer.isActive():
            self._busy_timer.start(int(min(remaining)) + 1)

    def _set_cursor(self, on: bool) -> None:
        if on == self._cursor_on:
            return
        self._cursor_on = on
        if QApplication.instance() is not None:
            if on:
                QApplication.setOverrideCursor(QCursor(Qt.CursorShape.BusyCursor))
            else:
                QApplication.restoreOverrideCursor()
        self.busy_changed.emit(on)


def format_exception(exc: BaseException) -> tuple[str, str]:
    """(one-line summary for the message bar, full traceback for "Details")."""
    from kmds_desktop.app.messages import describe_error

    summary = describe_error(exc)
    details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return summary, details


def live_running_threads() -> list[QThread]:
    """Threads started by jobs that are still running (used by the test fixture)."""
    out = []
    for thread in list(LIVE_THREADS):
        try:
            if thread.isRunning():
                out.append(thread)
        except RuntimeError:  # C++ object already deleted
            continue
    return out


__all__ = [
    "BUSY_CURSOR_MS",
    "LIVE_RUNNERS",
    "POLICIES",
    "SHOW_PROGRESS_MS",
    "JobRunner",
    "format_exception",
    "live_running_threads",
]
