"""``kmds-desktop kb link-evidence KB OBSERVATION --doi DOI --page N --relation R [--quote TEXT]`` and
``kb evidence KB [OBSERVATION]``: evidence links in a knowledge base, headless.

Both run :mod:`kmds_desktop.app.evidence_links`, the code the KB browser calls; the quote is checked
on its page when the paper is in the data folder's full-text store, and refused (nothing saved) when
it is not there.
"""

from __future__ import annotations

import argparse
import sys

from kmds_desktop.commands.common import fail, print_json
from kmds_desktop.kb import KnowledgeBaseError, load_kb
from kmds_desktop.kb.evidence_links import RELATIONS, evidence_links


def register_kb_evidence(kb_sub: argparse._SubParsersAction) -> None:
    """Add ``link-evidence`` and ``evidence`` under ``kb``."""
    link = kb_sub.add_parser(
        "link-evidence",
        help="link an observation to a paper's page(s) that support or dispute it (CiTO)",
        description="Link OBSERVATION (its IRI or name) in the KB file to the paper DOI, typed with CiTO "
                    "(supports, disputes, citesAsEvidence), with the page(s) and a quote. When the paper "
                    "is in the full-text store the quote must be verbatim on the page, else nothing is "
                    "saved. The file is saved atomically; KMDS reads its observations as before.",
    )
    link.add_argument("kb_file", metavar="KB")
    link.add_argument("observation", metavar="OBSERVATION", help="the observation's IRI or name")
    link.add_argument("--doi", required=True, help="the paper's DOI (10.NNNN/..., doi: or a doi.org URL)")
    link.add_argument("--page", type=int, action="append", default=[], metavar="N",
                      help="a page the evidence is on (repeat for several)")
    link.add_argument("--relation", choices=RELATIONS, default="citesAsEvidence",
                      help="the CiTO relation (default citesAsEvidence)")
    link.add_argument("--quote", default=None, metavar="TEXT", help="the passage, verbatim")
    link.add_argument("--json", action="store_true", help="print the saved link as JSON")
    link.set_defaults(func=_link)

    show = kb_sub.add_parser("evidence", help="list the evidence links of a KB (of one observation)",
                             description="List the evidence links of the KB file, of OBSERVATION when given.")
    show.add_argument("kb_file", metavar="KB")
    show.add_argument("observation", metavar="OBSERVATION", nargs="?", default=None)
    show.add_argument("--json", action="store_true", help="print the links as JSON")
    show.set_defaults(func=_show)


def _link(args: argparse.Namespace) -> int:
    # why: start-up time: the CLI imports this module at start, that one only when needed
    from kmds_desktop.app.evidence import EvidenceSession
    from kmds_desktop.app.evidence_links import link_evidence

    try:
        with EvidenceSession() as session:
            outcome = link_evidence(args.kb_file, args.observation, args.doi, args.relation, args.page,
                                    args.quote, store=session.store)
    except (KnowledgeBaseError, ValueError) as err:
        return fail(str(err))
    if args.json:
        print_json(outcome.as_dict())
    else:
        print(f"{outcome.path}: {outcome.link.describe()}")
    for note in outcome.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _show(args: argparse.Namespace) -> int:
    try:
        kb = load_kb(args.kb_file)
        if args.observation is not None and kb.observation(args.observation) is None:
            raise KnowledgeBaseError(f"no observation {args.observation!r}; `kmds-desktop kb show FILE` "
                                     "lists them", path=kb.path)
        links = evidence_links(kb, args.observation)
    except KnowledgeBaseError as err:
        return fail(str(err))
    if args.json:
        print_json({"kb": str(kb.path), "links": [link.to_dict() for link in links]})
        return 0
    if not links:
        print("no evidence links")
    for link in links:
        print(f"{link.observation}\n  {link.describe()}")
    return 0
