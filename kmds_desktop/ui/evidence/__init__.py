"""The Evidence view: a question, the passages that answer it, the offline answer with its citations,
and the cited page with the passage marked (:class:`~kmds_desktop.ui.evidence.view.EvidenceView`)."""

from kmds_desktop.ui.evidence.view import EvidenceView

__all__ = ["EvidenceView"]
