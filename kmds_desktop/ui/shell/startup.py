"""The window's start-up: the first frame first, then the KB, then the warm-up.

:func:`settle_before_first_frame` is what ``run_app`` and the stall benchmark call before ``show()``;
:class:`FirstFrame` notices a widget's first paint and runs actions after it; :func:`start_warm_up`
submits the warm-up job. What the warm-up does is the application layer's
(:func:`kmds_desktop.app.workspace.warm_up`); the window only orders the jobs so that none competes
with the first paint.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEvent, QObject, QTimer, Signal
from PySide6.QtWidgets import QWidget

from kmds_desktop.app import workspace
from kmds_desktop.app.workspace_session import WorkspaceSession
from kmds_desktop.ui.ask import markdown_render
from kmds_desktop.ui.jobs.job import Job
from kmds_desktop.ui.jobs.runner import JobRunner
from kmds_desktop.ui.shell.message_bar import MessageBar


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


class FirstFrame(QObject):
    """Notices ``widget``'s first paint and announces it (:attr:`shown`) once the frame is flushed.

    The first frame is the widest paint of the session (every panel, first use of the style's caches);
    work started before it -- a job whose thread competes for the GIL, the slots that show its result
    -- only delays it, so start-up work waits for :meth:`after`.
    """

    shown = Signal()  # once, right after the widget's first paint

    def __init__(self, widget: QWidget) -> None:
        super().__init__(widget)
        self.widget = widget
        self.done = False
        widget.installEventFilter(self)  # until the first paint (see eventFilter)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt API
        if watched is self.widget and event.type() == QEvent.Type.Paint and not self.done:
            # Stop filtering at once: each filtered event costs a call into Python, which waits for
            # the GIL while a worker holds it.
            self.widget.removeEventFilter(self)
            # Posted: it runs once the whole window has been painted and flushed, not inside the paint.
            QTimer.singleShot(0, self, self._flushed)
        return False

    def _flushed(self) -> None:
        if not self.done:
            self.done = True
            self.shown.emit()

    def after(self, action: Callable[[], Any], *, fallback_ms: int = 1000) -> None:
        """Run ``action`` once the first frame is on screen (soon, if it already is). A widget that
        is never painted (started minimised) runs ``action`` after ``fallback_ms`` all the same."""
        if self.done:
            QTimer.singleShot(0, self, action)
            return
        pending = [True]

        def once() -> None:
            if pending:
                pending.clear()
                action()

        self.shown.connect(once)
        QTimer.singleShot(fallback_ms, self, once)


def start_warm_up(jobs: JobRunner, session: WorkspaceSession, messages: MessageBar) -> Job | None:
    """Load the embedding stack in the background right after start-up
    (:func:`kmds_desktop.app.workspace.warm_up`; the Markdown converter is built there too, so the
    first answer does not build it on the GUI thread)."""
    return jobs.submit(
        "warmup",
        workspace.warm_up,
        session.settings.index.embedding_model,
        session.index_holder,
        session.settings,
        prepare=(markdown_render.prepare,),
        label="Loading the embedding model",
        busy_cursor=False,
        on_error=lambda exc: messages.show_exception(
            exc, "The embedding model could not be loaded (semantic search will retry)"
        ),
    )


def open_then_warm_up(first_frame: FirstFrame, open_kb: Callable[[], Job | None],
                      warm_up: Callable[[], Job | None], started: list[Job]) -> None:
    """Once the first frame is on screen, open the KB (``open_kb``); once it is shown (or has failed),
    start the warm-up. Each job submitted goes into ``started``.

    One after the other: the warm-up's first steps (building the Markdown converter, starting the
    index process) ran Python beside the KB's arrival, when the GUI thread fills and first paints the
    tree, each call into Python waiting for the GIL. The warm-up takes seconds (the embedding model
    loads in the index process); the KB load before it, a fraction of one.
    """

    def warm() -> None:
        job = warm_up()
        if job is not None:
            started.append(job)

    def begin() -> None:
        job = open_kb()
        if job is None:
            warm()
            return
        started.append(job)
        # Queued: after the tree's first paint, which the KB's arrival has just requested.
        job.finished.connect(lambda: QTimer.singleShot(0, first_frame, warm))

    first_frame.after(begin)
