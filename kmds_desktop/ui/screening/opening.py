"""Screening a finished search's documents: the window at once, the review opened behind it on a worker.

Why apart from the window: opening is one use of the window among others (the reviews menu opens a
review's session itself); the window only renders a session it is given, whoever opened it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QWidget

from kmds_desktop.app.screening_start import open_for_documents
from kmds_desktop.ui.screening.window import ScreeningWindow


def open_screening(parent: QWidget | None, jobs: Any, documents: Sequence[Mapping[str, Any]], *,
                   question: str, origin: str, store_path: str | Path | None = None,
                   database: Any = None, encoder: Any = None) -> ScreeningWindow:
    """Show a screening window at once and open the run's review on a worker (features for thousands of
    records take seconds). ``database`` and ``encoder``: the documents' stored vectors and the question's
    join the order's features."""
    window = ScreeningWindow(jobs=jobs, parent=parent, encoder=encoder)
    window.show()
    job = jobs.submit(
        "screening.open", open_for_documents, list(documents), question=question, origin=origin,
        store_path=store_path, database=database, encoder=encoder, pass_progress=False,
        label=f"Opening {len(documents):,} records for screening",
        policy="queue", busy_cursor=False, on_result=window.set_session, on_error=window.show_error,
    )
    window.open_job = job
    return window
