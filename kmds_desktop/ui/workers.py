"""Background jobs for the GUI: every blocking call runs on a QThread worker, never on the GUI thread.

The rule
--------
*All* blocking work (loading or saving a KB, building the semantic index, every LLM call including
streamed answers, every database call) runs on a :class:`Worker` in its own ``QThread``, wrapping a
plain core function that takes ``progress=`` and ``cancel=`` keyword arguments
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
so :class:`kmds_desktop.ui.progress.ProgressStrip` shows a non-modal progress bar with a Cancel
button in the status bar. Quick jobs therefore never flicker anything.

Progress signals are throttled on the worker side (at most one every :data:`PROGRESS_INTERVAL_S`,
plus the final one, and a new step: a new message without a total, such as "m is writing an
abstract", which no later report would bring to the screen) and chunks are batched the same way, so a
tight core loop cannot flood the GUI thread's event queue.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt, QThread, QTimer, Signal, Slot
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QApplication

from kmds_desktop.tasks import Cancelled, CancelToken

log = logging.getLogger(__name__)

BUSY_CURSOR_MS = 300
SHOW_PROGRESS_MS = 600
PROGRESS_INTERVAL_S = 0.05
CHUNK_INTERVAL_S = 0.03
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

#: Every QThread this module ever started (weakly): the test fixture fails a test that leaks one.
LIVE_THREADS: weakref.WeakSet[QThread] = weakref.WeakSet()
#: Every JobRunner alive (weakly), so the test fixture can stop the jobs of a leaking test.
LIVE_RUNNERS: weakref.WeakSet[JobRunner] = weakref.WeakSet()


def _flush_later(ref: weakref.ref[Worker]) -> None:
    """Timer callback: flush a worker's held-back pieces if the worker still exists."""
    worker = ref()
    if worker is not None:
        worker._flush_chunks()


class Worker(QObject):
    """Runs one plain function on a QThread and reports through signals (superqt's idea).

    Lives on the worker thread; ``run`` is connected to ``QThread.started``.
    """

    started = Signal()
    progress = Signal(int, object, str)  # done, total (int | None), message
    chunk = Signal(object)
    result = Signal(object)
    error = Signal(object)  # the exception, with __traceback__ intact
    cancelled = Signal()
    finished = Signal()

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        token: CancelToken,
        *,
        pass_progress: bool = True,
        wants_chunks: bool = False,
    ) -> None:
        super().__init__()
        self._fn = fn
        self._args = args
        self._kwargs = kwargs
        self.token = token
        self._pass_progress = pass_progress
        self._wants_chunks = wants_chunks
        self._last_progress = 0.0
        self._last_message = ""
        self._chunks: list[Any] = []
        self._last_chunk = 0.0
        self._lock = threading.Lock()
        self._emit_lock = threading.Lock()
        self._flush_timer: threading.Timer | None = None
        self._home_thread = self.thread()  # the GUI thread, which creates workers

    # -- callbacks handed to the core function (called on the worker thread) --
    def _progress(self, done: int, total: int | None, message: str = "") -> None:
        now = time.monotonic()
        final = total is not None and done >= total
        step = total is None and message != self._last_message
        if final or step or now - self._last_progress >= PROGRESS_INTERVAL_S:
            self._last_progress = now
            self._last_message = message
            self.progress.emit(int(done), total, str(message))

    def _chunk(self, piece: Any) -> None:
        with self._lock:
            self._chunks.append(piece)
            now = time.monotonic()
            if now - self._last_chunk < CHUNK_INTERVAL_S:
                # Held back to batch a burst; a timer sends it if nothing follows soon (the next
                # piece may be minutes away: a model that hangs must not hold the rows before it).
                if self._flush_timer is None:
                    # The timer holds only a weak reference: a timer thread holding the last
                    # reference would destroy the worker off the GUI thread (see _home_thread).
                    self._flush_timer = threading.Timer(CHUNK_INTERVAL_S, _flush_later,
                                                        (weakref.ref(self),))
                    self._flush_timer.daemon = True
                    self._flush_timer.start()
                return
            self._last_chunk = now
        self._flush_chunks()

    def _flush_chunks(self) -> None:
        with self._emit_lock:  # one flusher at a time, so pieces go out in order
            with self._lock:
                pieces, self._chunks = self._chunks, []
                if self._flush_timer is not None:
                    self._flush_timer.cancel()
                    self._flush_timer = None
                self._last_chunk = time.monotonic()
            self._emit_pieces(pieces)

    def _emit_pieces(self, pieces: list[Any]) -> None:
        # Runs of text go as one signal each (one GUI update instead of hundreds); other pieces
        # go as they are, in order.
        text: list[str] = []
        for piece in pieces:
            if isinstance(piece, str):
                text.append(piece)
                continue
            if text:
                self.chunk.emit("".join(text))
                text = []
            self.chunk.emit(piece)
        if text:
            self.chunk.emit("".join(text))

    @Slot()
    def run(self) -> None:
        self.started.emit()
        kwargs = dict(self._kwargs)
        if self._pass_progress:
            kwargs["progress"] = self._progress
            kwargs["cancel"] = self.token
        if self._wants_chunks:
            kwargs["chunk"] = self._chunk
        try:
            self.token.raise_if_cancelled()
            value = self._fn(*self._args, **kwargs)
            self._flush_chunks()
            if self.token.cancelled:
                self.cancelled.emit()
            else:
                self.result.emit(value)
        except Cancelled:
            self._flush_chunks()
            self.cancelled.emit()
        except BaseException as exc:  # noqa: BLE001 - every failure is reported to the GUI
            self._flush_chunks()
            if self.token.cancelled:
                # The cancel hook aborted the call (closed socket, cancelled statement): not an error.
                self.cancelled.emit()
            else:
                log.debug("job failed", exc_info=True)
                self.error.emit(exc)
        finally:
            # Back to the GUI thread before the thread ends, so the worker is destroyed there. Destroyed
            # on its own thread (deleteLater), PySide takes the GIL inside QObject's destructor while
            # Qt's connection lock is held; a GUI thread holding the GIL and emitting a signal waits
            # for that lock: the app hung (seen once in ~40 runs of bench/ui_stall.py).
            self.moveToThread(self._home_thread)
            self.finished.emit()


class Job(QObject):
    """One submitted piece of work; lives on the GUI thread and relays the worker's signals."""

    progress = Signal(int, object, str)
    chunk = Signal(object)
    result = Signal(object)
    error = Signal(object)
    cancelled = Signal()
    finished = Signal()

    def __init__(
        self,
        runner: JobRunner,
        kind: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        label: str,
        busy_cursor: bool,
        pass_progress: bool,
        callbacks: dict[str, Callable[..., Any] | None],
    ) -> None:
        super().__init__()  # owned by Python: the runner keeps it while queued or running
        self.runner = runner
        self.kind = kind
        self.label = label or kind
        self.busy_cursor = busy_cursor
        self.token = CancelToken()
        self.state = "queued"  # queued | running | done | failed | cancelled
        self.value: Any = None
        self.exception: BaseException | None = None
        self.last_progress: tuple[int, int | None, str] = (0, None, "")
        self.started_at: float | None = None
        self._fn = fn
        self._args = args
        self._kwargs = kwargs
        self._pass_progress = pass_progress
        self._callbacks = callbacks
        self._thread: QThread | None = None
        self._worker: Worker | None = None
        self._outcome: tuple[str, Any] | None = None

    # -- public --
    def cancel(self) -> None:
        """Ask the job to stop: the token's hooks abort the backend call; a queued job never starts."""
        self.token.cancel()
        if self.state == "queued":
            self.runner._drop_queued(self)

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def done(self) -> bool:
        return self.state in ("done", "failed", "cancelled")

    def wait(self, timeout_ms: int = 30_000) -> bool:
        """Block until the thread ends (tests and shutdown only; never from normal GUI code)."""
        if self._thread is None:
            return self.state != "running"
        return self._thread.wait(timeout_ms)

    # -- driven by the runner --
    def _start(self) -> None:
        self.state = "running"
        self.started_at = time.monotonic()
        thread = QThread()
        thread.setObjectName(f"job:{self.kind}")
        worker = Worker(
            self._fn,
            self._args,
            self._kwargs,
            self.token,
            pass_progress=self._pass_progress,
            wants_chunks=self._callbacks.get("on_chunk") is not None,
        )
        worker.moveToThread(thread)
        queued = Qt.ConnectionType.QueuedConnection
        thread.started.connect(worker.run)
        worker.progress.connect(self._on_progress, queued)
        worker.chunk.connect(self._on_chunk, queued)
        worker.result.connect(self._on_result, queued)
        worker.error.connect(self._on_error, queued)
        worker.cancelled.connect(self._on_cancelled, queued)
        direct = Qt.ConnectionType.DirectConnection  # on the worker thread: no GUI round trip needed
        worker.finished.connect(thread.quit, direct)  # so shutdown() can join without the GUI loop
        thread.finished.connect(self._on_thread_finished, queued)
        self._thread, self._worker = thread, worker
        LIVE_THREADS.add(thread)
        thread.start()

    def _call(self, name: str, *args: Any) -> None:
        fn = self._callbacks.get(name)
        if fn is None:
            return
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - a broken callback must not kill the event loop
            self.runner.callback_error.emit(exc)

    @Slot(int, object, str)
    def _on_progress(self, done: int, total: object, message: str) -> None:
        self.last_progress = (done, total if isinstance(total, int) else None, message)
        self.progress.emit(done, total, message)
        self._call("on_progress", done, total, message)

    @Slot(object)
    def _on_chunk(self, piece: object) -> None:
        self.chunk.emit(piece)
        self._call("on_chunk", piece)

    # The outcome is held until the thread has ended, so a callback always sees the job's kind free
    # (it may submit the same kind again) and no test or shutdown can observe a half-finished thread.
    @Slot(object)
    def _on_result(self, value: object) -> None:
        self._outcome = ("done", value)

    @Slot(object)
    def _on_error(self, exc: object) -> None:
        self._outcome = ("failed", exc if isinstance(exc, BaseException) else RuntimeError(str(exc)))

    @Slot()
    def _on_cancelled(self) -> None:
        self._outcome = ("cancelled", None)

    @Slot()
    def _on_thread_finished(self) -> None:
        thread = self._thread
        if thread is not None:
            thread.wait()  # returns at once: the thread has finished
        self._worker = None  # back on the GUI thread since its run ended: deleted here, by Python
        self.runner._release(self)
        state, payload = self._outcome or ("failed", RuntimeError("the job ended without a result"))
        self.state = state
        if state == "done":
            self.value = payload
            self.result.emit(payload)
            self._call("on_result", payload)
        elif state == "failed":
            self.exception = payload
            self.error.emit(payload)
            if self._callbacks.get("on_error") is not None:
                self._call("on_error", payload)
            else:
                self.runner.job_error.emit(self, payload)
        else:
            self.cancelled.emit()
            self._call("on_cancelled")
        self._call("on_finished")
        self.finished.emit()
        self.runner._job_ended(self)
        self._thread = None  # Python owns the QThread: dropping the last reference deletes it


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
                old._call("on_cancelled")
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
            thread = job._thread
            if thread is not None and not thread.wait(timeout_ms):
                log.warning("job %s did not stop within %d ms", job.kind, timeout_ms)
        app = QApplication.instance()
        if app is not None:
            app.processEvents()  # deliver the queued finish signals
        self._set_cursor(False)

    # -- internals --
    def _start(self, job: Job) -> None:
        self._running[job.kind] = job
        job._start()
        self.job_started.emit(job)
        if job.busy_cursor and not self._busy_timer.isActive() and not self._cursor_on:
            self._busy_timer.start(BUSY_CURSOR_MS)
        QTimer.singleShot(SHOW_PROGRESS_MS, job, lambda: self._maybe_show(job))

    def _maybe_show(self, job: Job) -> None:
        if job.running:
            self.job_shown.emit(job)

    def _drop_queued(self, job: Job) -> None:
        queue = self._waiting.get(job.kind)
        if queue and job in queue:
            queue.remove(job)
            job.state = "cancelled"
            job._call("on_cancelled")
            job.finished.emit()

    def _release(self, job: Job) -> None:
        if self._running.get(job.kind) is job:
            del self._running[job.kind]

    def _job_ended(self, job: Job) -> None:
        self._release(job)
        self.job_finished.emit(job)
        queue = self._waiting.get(job.kind)
        if queue and not self._closed and job.kind not in self._running:
            self._start(queue.popleft())
        self._update_cursor()

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
    "SHOW_PROGRESS_MS",
    "POLICIES",
    "Job",
    "JobRunner",
    "Worker",
    "format_exception",
    "live_running_threads",
]
