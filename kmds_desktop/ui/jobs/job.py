"""One submitted job on the GUI thread: it starts the worker's thread and relays its signals.

The outcome is held until the thread has ended, so a callback always sees the job's kind free and
no test or shutdown observes a half-finished thread. See :mod:`kmds_desktop.ui.jobs.runner`.

A job knows its runner only as a :class:`JobOwner` (what it reports to), so this module does not
import the runner's: the runner imports the job, never the other way round.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot

from kmds_desktop.app.presentation import CancelToken
from kmds_desktop.ui.jobs.worker import Worker


class JobOwner(Protocol):
    """What a job reports to (the :class:`~kmds_desktop.ui.jobs.runner.JobRunner` that started it)."""

    def drop_queued(self, job: Job) -> None:
        """A waiting job was cancelled: forget it (it never starts)."""

    def release(self, job: Job) -> None:
        """The job's thread has ended: its kind is free for the next request."""

    def job_ended(self, job: Job) -> None:
        """The job's callbacks have run: start the next waiting job of its kind."""

    def report_callback_error(self, exc: BaseException) -> None:
        """A callback raised on the GUI thread (shown instead of being lost in Qt's event loop)."""

    def report_job_error(self, job: Job, exc: BaseException) -> None:
        """The job failed and had no ``on_error`` of its own."""

#: Every QThread this module ever started (weakly): the test fixture fails a test that leaks one.
LIVE_THREADS: weakref.WeakSet[QThread] = weakref.WeakSet()


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
        runner: JobOwner,
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
            self.runner.drop_queued(self)

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
            self.runner.report_callback_error(exc)

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
        self.runner.release(self)
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
                self.runner.report_job_error(self, payload)
        else:
            self.cancelled.emit()
            self._call("on_cancelled")
        self._call("on_finished")
        self.finished.emit()
        self.runner.job_ended(self)
        self._thread = None  # Python owns the QThread: dropping the last reference deletes it
