"""The main window's start-up: the first frame first, then the KB, then the warm-up.

A mixin of :class:`~kmds_desktop.ui.shell.main_window.MainWindow`, and :func:`settle_before_first_frame`,
which ``run_app`` and the stall benchmark call before ``show()``. What the warm-up does is the
application layer's (:func:`kmds_desktop.app.workspace.warm_up`); the window only orders the jobs so
that none competes with the first paint.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QTimer

from kmds_desktop.app import workspace
from kmds_desktop.ui.ask import markdown_render
from kmds_desktop.ui.jobs.runner import Job

if TYPE_CHECKING:
    from kmds_desktop.ui.shell.main_window import MainWindow


def settle_before_first_frame() -> None:
    """Move every object loaded so far to the permanent generation, before the window is shown.

    A full garbage collection walks every tracked object while holding the GIL (on whichever thread
    happens to trigger it); after start-up's imports that is hundreds of thousands of long-lived
    objects, tens of ms of frozen window each time. Frozen ones are never walked again. Nothing
    heavy is imported here: torch and sentence-transformers load only in the index process, and the
    index is reached over its private channel, so ChromaDB is not imported in this process at all.

    What the first jobs import is imported here instead, before the first frame: numpy's C
    extensions (the embedding client's arrays) and the KB reader initialise holding the GIL for up
    to about 100 ms, which froze the window when the warm-up or the KB load imported them on a
    worker (measured on a quiet machine with py-spy --gil). The question-answering modules (about
    30 ms of module set-up, compiled patterns included) were the first question's imports, on its
    worker, at the moment the window starts showing the answer's progress.
    """
    import numpy  # noqa: F401
    import owlready2  # noqa: F401

    import kmds_desktop.app.workspace  # noqa: F401
    from kmds_desktop.app.presentation import preload_question_modules

    preload_question_modules()

    gc.freeze()


class WindowStartup:
    """First frame, start-up jobs and the warm-up of :class:`MainWindow` (see the module docstring)."""

    def _first_paint(self: MainWindow) -> None:
        """The window's first paint happened: stop filtering its events (each filtered event costs a
        call into Python, which waits for the GIL while a worker holds it) and announce the frame
        once it is flushed."""
        self.removeEventFilter(self)
        # Posted: it runs once the whole window has been painted and flushed, not inside the paint.
        QTimer.singleShot(0, self, self._first_frame)

    def _first_frame(self: MainWindow) -> None:
        if not self.first_frame_done:
            self.first_frame_done = True
            self.first_frame_shown.emit()

    def after_first_frame(self: MainWindow, action: Any, *, fallback_ms: int = 1000) -> None:
        """Run ``action`` once the window's first frame is on screen (soon, if it already is).

        The first frame is the widest paint of the session (every panel, first use of the style's
        caches); work started before it -- a job whose thread competes for the GIL, the slots that
        show its result -- only delays it. A window that is never painted (started minimised) runs
        ``action`` after ``fallback_ms`` all the same.
        """
        if self.first_frame_done:
            QTimer.singleShot(0, self, action)
            return
        pending = [True]

        def once() -> None:
            if pending:
                pending.clear()
                action()

        self.first_frame_shown.connect(once)
        QTimer.singleShot(fallback_ms, self, once)

    def start_up(self: MainWindow, kb_path: str | Path, *, note: str | None = None) -> None:
        """What follows ``show()`` at start-up (``run_app`` and the stall benchmark): once the first frame
        is on screen, open ``kb_path``; once the KB is shown (or has failed), start the warm-up job.
        Both jobs are in :attr:`startup_jobs`.

        One after the other: the warm-up's first steps (building the Markdown converter, starting
        the index process) ran Python beside the KB's arrival, when the GUI thread fills and first
        paints the tree, each call into Python waiting for the GIL. The warm-up takes seconds (the
        embedding model loads in the index process); the KB load before it, a fraction of one.
        """

        def warm_up() -> None:
            job = self.warm_up()
            if job is not None:
                self.startup_jobs.append(job)

        def begin() -> None:
            job = self.open_kb(kb_path, note=note)
            if job is None:
                warm_up()
                return
            self.startup_jobs.append(job)
            # Queued: after the tree's first paint, which the KB's arrival has just requested.
            job.finished.connect(lambda: QTimer.singleShot(0, self, warm_up))

        self.after_first_frame(begin)
        self.offer_recoveries()

    def warm_up(self: MainWindow) -> Job | None:
        """Load the embedding stack in the background right after start-up
        (:func:`kmds_desktop.app.workspace.warm_up`; the Markdown converter is built there too, so
        the first answer does not build it on the GUI thread)."""
        return self.jobs.submit(
            "warmup",
            workspace.warm_up,
            self.settings.index.embedding_model,
            self.index_holder,
            self.settings,
            prepare=(markdown_render.prepare,),
            label="Loading the embedding model",
            busy_cursor=False,
            on_error=lambda exc: self.messages.show_exception(
                exc, "The embedding model could not be loaded (semantic search will retry)"
            ),
        )
