"""What the views may use from the domain packages, named by the application layer.

Why: ``ui/`` talks to ``app/`` only (a forbidden contract in ``pyproject.toml`` checks it), so a view
never reaches into the store, the index, the KB reader or the settings file behind a session's back.
The records, constants and errors a view shows, the formatters it renders with, the settings type
it is handed and the cancel token its job runner passes to workers are re-exported here; every
operation stays in the sessions of ``app/``.
"""

from __future__ import annotations

from typing import Any

from kmds_desktop.config import Settings
from kmds_desktop.index.errors import SemanticIndexError
from kmds_desktop.kb import CATEGORIES, INTENTS, OBSERVATION_TYPES, WORKFLOW_KINDS, KnowledgeBaseError
from kmds_desktop.literature.screening.prisma import flow_svg as svg
from kmds_desktop.literature.strategy.history import SavedSet, SearchHistory
from kmds_desktop.literature.strategy.known_papers import (
    PastedIdentifiers,
    read_known_file,
    read_pasted_identifiers,
)
from kmds_desktop.literature.strategy.reference_files import (
    DOCUMENT_FORMATS,
    ExportDocument,
    export_documents,
    normalize_document,
)
from kmds_desktop.literature.strategy.workbench import KnownCheck, SearchWorkbench
from kmds_desktop.paths import data_dir, resources_dir
from kmds_desktop.tasks import Cancelled, CancelToken
from kmds_desktop.text import plural

__all__ = [
    "CATEGORIES", "CancelToken", "Cancelled", "DOCUMENT_FORMATS", "ExportDocument", "INTENTS",
    "KnowledgeBaseError", "KnownCheck", "OBSERVATION_TYPES", "PastedIdentifiers", "SavedSet",
    "SearchHistory", "SearchWorkbench", "SemanticIndexError", "Settings", "WORKFLOW_KINDS", "build_report",
    "data_dir", "export_documents", "flow_svg", "known_check_text", "normalize_document", "plural",
    "preload_question_modules", "read_known_file", "read_pasted_identifiers", "report_markdown",
    "resources_dir", "write_report",
]


# The report and the flow diagram are imported when first used, not with the window: together about
# 30 ms of module set-up that would otherwise come before the first frame.
def build_report(*args: Any, **kwargs: Any) -> Any:
    """:func:`kmds_desktop.literature.strategy.search_report.build_report`."""
    # why: start-up time: the window imports this module at start, that one only when needed
    from kmds_desktop.literature.strategy.search_report import build_report as build

    return build(*args, **kwargs)


def write_report(*args: Any, **kwargs: Any) -> Any:
    """:func:`kmds_desktop.literature.strategy.search_report.write_report`."""
    # why: start-up time: the window imports this module at start, that one only when needed
    from kmds_desktop.literature.strategy.search_report import write_report as write

    return write(*args, **kwargs)


def report_markdown(*args: Any, **kwargs: Any) -> str:
    """:func:`kmds_desktop.literature.strategy.search_report.report_markdown`."""
    # why: start-up time: the window imports this module at start, that one only when needed
    from kmds_desktop.literature.strategy.search_report import report_markdown as markdown

    return markdown(*args, **kwargs)


def known_check_text(*args: Any, **kwargs: Any) -> str:
    """:func:`kmds_desktop.literature.strategy.search_report.known_check_text`."""
    # why: start-up time: the window imports this module at start, that one only when needed
    from kmds_desktop.literature.strategy.search_report import known_check_text as text

    return text(*args, **kwargs)


def flow_svg(*args: Any, **kwargs: Any) -> str:
    """:func:`kmds_desktop.literature.screening.prisma.flow_svg`."""
    return svg(*args, **kwargs)


def preload_question_modules() -> None:
    """Import the modules the first question needs (routing, templates, the index client) now, before
    the window's first frame: their set-up holds the GIL, which froze the window when a worker did
    it at the first question (see the main window's start-up)."""
    # why: loaded ahead on purpose, off the first frame
    import kmds_desktop.ask.orchestrator  # the first question's routing and templates
    import kmds_desktop.index.embedding_service
    import kmds_desktop.index.factory  # noqa: F401
