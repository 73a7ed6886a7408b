"""The worker side of a job: one plain function on a QThread, reporting through signals.

Progress reports are throttled here, on the worker (at most one every :data:`PROGRESS_INTERVAL_S`,
plus the final one and each new step) and chunks batched (:data:`CHUNK_INTERVAL_S`), so a tight core
loop cannot flood the GUI thread's event queue. A report held back is sent when the interval is over
if none came after it, or before the job's outcome: the report before a long stall is the one the user
reads through it (the fast search index's first batch, then minutes on the next, showed "indexing 300
documents" all along), and nothing comes after the outcome.
See :mod:`kmds_desktop.ui.jobs.runner` for the rule.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from kmds_desktop.app.presentation import Cancelled, CancelToken

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 0.05
CHUNK_INTERVAL_S = 0.03


def _call_later(ref: weakref.ref[Worker], method: Callable[[Worker], None]) -> None:
    """Timer callback: call one of a worker's own flushes if the worker still exists."""
    worker = ref()
    if worker is not None:
        method(worker)


def _weak_timer(worker: Worker, interval: float, method: Callable[[Worker], None]) -> threading.Timer:
    """A started daemon timer that calls ``method(worker)`` after ``interval`` seconds. It holds only a
    weak reference: a timer thread holding the last reference would destroy the worker off the GUI
    thread (see ``Worker._home_thread``)."""
    timer = threading.Timer(interval, _call_later, (weakref.ref(worker), method))
    timer.daemon = True
    timer.start()
    return timer


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
        self._held_progress: tuple[int, int | None, str] | None = None
        self._progress_timer: threading.Timer | None = None
        self._ended = False
        self._home_thread = self.thread()  # the GUI thread, which creates workers

    # -- callbacks handed to the core function (called on the worker thread) --
    def _progress(self, done: int, total: int | None, message: str = "") -> None:
        report = (int(done), total, str(message))
        with self._emit_lock:  # one sender at a time, so a held report never follows a newer one
            with self._lock:
                now = time.monotonic()
                final = total is not None and done >= total
                step = total is None and message != self._last_message
                due = now - self._last_progress >= PROGRESS_INTERVAL_S
                send = not self._ended and (final or step or due)
                if send:
                    self._last_progress = now
                    self._last_message = message
                    self._held_progress = None
                elif not self._ended:
                    self._held_progress = report
                    if self._progress_timer is None:
                        self._progress_timer = _weak_timer(self, PROGRESS_INTERVAL_S,
                                                           Worker._send_held_progress)
            if send:
                self.progress.emit(*report)

    def _send_held_progress(self) -> None:
        with self._emit_lock:
            with self._lock:
                held, self._held_progress = self._held_progress, None
                self._progress_timer = None
                if held is None or self._ended:
                    return
                self._last_progress = time.monotonic()
                self._last_message = held[2]
            self.progress.emit(*held)

    def _end_progress(self) -> None:
        """Before the outcome: a held report goes out (the function's last word on its progress: a
        report the timer's send made too early to go out at once is not lost), and none after it."""
        with self._emit_lock:
            with self._lock:
                held, self._held_progress = self._held_progress, None
                self._ended = True
                if self._progress_timer is not None:
                    self._progress_timer.cancel()
                    self._progress_timer = None
            if held is not None:
                self.progress.emit(*held)

    def _chunk(self, piece: Any) -> None:
        with self._lock:
            self._chunks.append(piece)
            now = time.monotonic()
            if now - self._last_chunk < CHUNK_INTERVAL_S:
                # Held back to batch a burst; a timer sends it if nothing follows soon (the next
                # piece may be minutes away: a model that hangs must not hold the rows before it).
                if self._flush_timer is None:
                    self._flush_timer = _weak_timer(self, CHUNK_INTERVAL_S, Worker._flush_chunks)
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
            self._end_progress()
            self._flush_chunks()
            if self.token.cancelled:
                self.cancelled.emit()
            else:
                self.result.emit(value)
        except Cancelled:
            self._end_progress()
            self._flush_chunks()
            self.cancelled.emit()
        except BaseException as exc:  # every failure is reported to the GUI
            self._end_progress()
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
