"""Cancel tokens and progress callbacks shared by every long-running core function.

Core functions are plain Python that take ``progress`` and ``cancel`` arguments (the Orange3
``TaskState`` idea), so the CLI, tests and the GUI's QThread workers drive them the same way.
A :class:`CancelToken` can also run hooks when cancelled, which is how a cancel reaches a backend
(closing an HTTP connection, ``connection.cancel()`` on PostgreSQL).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

#: ``progress(done, total, message)``; ``total`` is None when unknown.
ProgressFn = Callable[[int, int | None, str], None]


class Cancelled(Exception):  # noqa: N818 - reads as "the task was cancelled"
    """Raised inside a task when its :class:`CancelToken` was cancelled."""


class CancelToken:
    """Thread-safe cancellation flag with hooks that abort work in flight."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._hooks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        """Set the flag and run every registered hook once (hook errors are ignored)."""
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            hooks = list(self._hooks)
        for hook in hooks:
            with contextlib.suppress(Exception):  # a failing abort must not hide the cancel
                hook()

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise Cancelled("cancelled by the user")

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds; True as soon as the token is cancelled."""
        return self._event.wait(timeout)

    def add_hook(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Register ``hook`` to run on cancel (at once if already cancelled); returns a remover."""
        with self._lock:
            already = self._event.is_set()
            if not already:
                self._hooks.append(hook)
        if already:
            hook()

        def remove() -> None:
            with self._lock:
                if hook in self._hooks:
                    self._hooks.remove(hook)

        return remove


def check(cancel: CancelToken | None) -> None:
    """Raise :class:`Cancelled` if ``cancel`` is set (accepts None for "not cancellable")."""
    if cancel is not None:
        cancel.raise_if_cancelled()


def report(progress: ProgressFn | None, done: int, total: int | None, message: str = "") -> None:
    """Call ``progress`` if given."""
    if progress is not None:
        progress(done, total, message)
