"""Evidence into the knowledge base: link an observation to a paper's page(s) with a CiTO relation,
the quote checked on its page when the paper's full text is in the store; and verdicts, filed.

Qt-free, so ``kmds-desktop kb link-evidence`` and the KB browser use the same functions. The rules:
a quote is verified through the one verifier
(:func:`~kmds_desktop.literature.evidence.quotes.verify_quote`) whenever the paper (found by its DOI)
is in the full-text store, and a quote that is not on the page it cites is refused with nothing
saved; when the paper is not in the store the link is kept with its quote marked "not checked". The
KB is saved atomically (:func:`~kmds_desktop.kb.save_kb`), so a failed save leaves the file as it was.
A multiple-choice answer is filed as the one ``citesAsEvidence`` link to the sentence it rests on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kmds_desktop.kb import KnowledgeBase, load_kb, save_kb
from kmds_desktop.kb.evidence_links import (
    NOT_CHECKED,
    RELATIONS,
    VERIFIED,
    EvidenceLink,
    add_evidence_link,
    evidence_links,
    normalise_doi,
)
from kmds_desktop.literature.evidence.quotes import verify_quote
from kmds_desktop.literature.evidence.verdict import CONTRADICTS, SUPPORTS, ChoiceVerdict, ClaimVerdict

if TYPE_CHECKING:  # pragma: no cover
    from kmds_desktop.literature.fulltext.store import FulltextStore, PaperRow

#: A verdict's stance -> the CiTO relation of its link.
STANCE_RELATION = {SUPPORTS: "supports", CONTRADICTS: "disputes"}


@dataclass
class LinkOutcome:
    """What linking did: the link as saved, and notes (e.g. the quote could not be checked)."""

    link: EvidenceLink
    path: Path
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"kb": str(self.path), "link": self.link.to_dict(), "notes": self.notes}


def _paper_by_doi(store: FulltextStore | None, doi: str) -> PaperRow | None:
    if store is None:
        return None
    return next((p for p in store.papers() if p.status == "ok" and p.doi and p.doi.lower() == doi), None)


def check_quote(store: FulltextStore | None, doi: str, pages: tuple[int, ...], quote: str | None
                ) -> tuple[str | None, tuple[int, ...], str | None, list[str]]:
    """``(quote_status, pages, title, notes)`` for a quote on ``pages`` of the paper ``doi``.

    Raises ValueError (nothing is saved) when the paper is in the store and the quote is not verbatim
    on the page(s) given, or a page is beyond the paper's last.
    """
    paper = _paper_by_doi(store, doi)
    notes: list[str] = []
    if paper is None:
        if quote:
            notes.append(f"{doi} is not in the full-text store: the quote is kept unchecked "
                         "(import the PDF to have quotes checked)")
        return (NOT_CHECKED if quote else None), pages, None, notes
    assert store is not None  # noqa: S101 - narrows: a paper was found in it
    too_far = [p for p in pages if p > paper.page_count]
    if too_far:
        raise ValueError(f"{doi} has {paper.page_count} pages; page {too_far[0]} does not exist")
    if not quote:
        return None, pages, paper.title, notes
    if not pages:
        raise ValueError("give the page the quote is on (--page N)")
    for page in pages:
        check = verify_quote(quote, lambda n: store.page_text(paper.id, n), page)
        if check.verified:
            return VERIFIED, tuple(sorted(set(pages) | set(check.pages))), paper.title, notes
    raise ValueError(f"the quote is not on page {', '.join(map(str, pages))} of {doi}; copy it exactly "
                     "from the page (or leave --quote out)")


def link_evidence(
    kb: KnowledgeBase | str | Path,
    observation: str,
    doi: str,
    relation: str,
    pages: list[int] | tuple[int, ...] = (),
    quote: str | None = None,
    *,
    store: FulltextStore | None = None,
    save: bool = True,
) -> LinkOutcome:
    """Link ``observation`` in ``kb`` (a loaded KB or a file) to ``doi``'s ``pages`` with ``relation``
    (``supports`` / ``disputes`` / ``citesAsEvidence``), the quote verified when the paper is in
    ``store``; saved unless ``save`` is False (the window saves with its own Save)."""
    if relation not in RELATIONS:
        raise ValueError(f"unknown relation {relation!r}; use one of {', '.join(RELATIONS)}")
    doi = normalise_doi(doi)
    page_tuple = tuple(sorted({int(p) for p in pages}))
    if any(p < 1 for p in page_tuple):
        raise ValueError("page numbers start at 1")
    quote = " ".join(quote.split()) if quote and quote.strip() else None
    status, page_tuple, title, notes = check_quote(store, doi, page_tuple, quote)
    loaded = kb if isinstance(kb, KnowledgeBase) else load_kb(kb)
    link = add_evidence_link(loaded, observation, doi, relation, page_tuple, quote,
                             quote_status=status, title=title)
    path = save_kb(loaded) if save else loaded.path
    return LinkOutcome(link, path, notes)


def link_verdict(
    kb: KnowledgeBase | str | Path,
    observation: str,
    verdict: ClaimVerdict,
    *,
    store: FulltextStore | None = None,
    save: bool = True,
) -> tuple[list[LinkOutcome], list[str]]:
    """File a claim verdict under ``observation``: each document that supports or contradicts the claim
    becomes a ``supports`` / ``disputes`` link with its (already verified) quote and page(s). Documents
    without a DOI cannot be linked and are named in the notes."""
    loaded = kb if isinstance(kb, KnowledgeBase) else load_kb(kb)
    outcomes: list[LinkOutcome] = []
    notes: list[str] = []
    for document in verdict.documents:
        relation = STANCE_RELATION.get(document.stance)
        if relation is None:
            continue
        if not document.doi:
            notes.append(f"{document.label}: no DOI found in the PDF, not linked")
            continue
        outcomes.append(link_evidence(loaded, observation, document.doi, relation, document.pages,
                                      document.quote, store=store, save=False))
    if save and outcomes:
        path = save_kb(loaded)
        for outcome in outcomes:
            outcome.path = path
    return outcomes, notes


def link_choice(
    kb: KnowledgeBase | str | Path,
    observation: str,
    choice: ChoiceVerdict,
    paper_id: int | None,
    *,
    store: FulltextStore,
    save: bool = True,
) -> LinkOutcome:
    """File a multiple-choice answer under ``observation``: the paper ``paper_id`` (the one the
    choice's quote is on, :func:`~kmds_desktop.app.verdicts.quoted_paper`) cited as evidence
    (``citesAsEvidence``) with the quote on its page(s), checked again on the way in.

    Why ``citesAsEvidence`` and not ``supports``: the observation is the researcher's, the option is an
    answer to a question about it; the sentence is what the answer rests on, not a claim the paper
    makes about the observation. Raises ValueError, nothing filed, when no option was chosen, the
    paper left the store, or it has no DOI to link to."""
    if choice.choice is None or not choice.quote or not choice.pages:
        raise ValueError("no option was chosen, so there is no quote to file")
    paper = store.paper(paper_id) if paper_id is not None else None
    if paper is None:
        raise ValueError(f"the quoted paper ({choice.label}) is no longer in the full-text store; "
                         "click Choose again")
    if not paper.doi:
        raise ValueError(f"{paper.label}: no DOI found in the PDF, so it cannot be linked; cite it by hand "
                         "with `kmds-desktop kb link-evidence` once its DOI is known")
    return link_evidence(kb, observation, paper.doi, "citesAsEvidence", choice.pages, choice.quote,
                         store=store, save=save)


def observation_evidence(kb: KnowledgeBase, observation: str) -> list[EvidenceLink]:
    """The evidence links of one observation (the KB browser's detail shows them)."""
    return evidence_links(kb, observation)


def evidence_lines(kb: KnowledgeBase, observation: str) -> list[str]:
    """The observation's evidence as display lines, one per link (empty when it has none)."""
    return [link.describe() for link in evidence_links(kb, observation)]
