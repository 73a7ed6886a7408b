"""``kmds-desktop literature verdict CLAIM`` and ``literature choose QUESTION --option A --option B``:
claims and choices judged from the imported full texts, headless.

Both run :mod:`kmds_desktop.app.verdicts` over the data folder's full-text store, the code the
window calls. ``--backend`` / ``--model`` pick the judge as ``ask`` does (default: the settings';
``offline`` is the measured heuristic).
"""

from __future__ import annotations

import argparse

from kmds_desktop.commands.common import guarded, print_json

BACKENDS = ("auto", "offline", "ollama", "openai", "google")


def register_verdicts(lit_sub: argparse._SubParsersAction) -> None:
    """Add ``verdict`` and ``choose`` under ``literature``."""
    verdict = lit_sub.add_parser(
        "verdict",
        help="does each imported paper support CLAIM, contradict it or not address it (with quotes)",
        description="Judge CLAIM against the imported full texts: per paper supports / contradicts / not "
                    "addressed, each with a quote verified on its page, and the balance (supported, "
                    "contradicted, mixed or cannot tell). --yes-no reads CLAIM as a yes-no question and "
                    "answers yes / no / maybe.",
    )
    verdict.add_argument("claim", metavar="CLAIM")
    verdict.add_argument("--yes-no", action="store_true",
                         help="answer yes / no / maybe (CLAIM is a question)")
    _judge_options(verdict)
    verdict.set_defaults(func=_verdict)

    choose = lit_sub.add_parser(
        "choose",
        help="answer a multiple-choice QUESTION from the imported full texts, or say 'insufficient'",
        description="Pick the option of QUESTION the imported full texts bear out, with the quote it rests "
                    "on (verified on its page); 'insufficient' when no option stands out.",
    )
    choose.add_argument("question", metavar="QUESTION")
    choose.add_argument("--option", action="append", default=[], metavar="TEXT",
                        help="an answer option (give two or more)")
    _judge_options(choose)
    choose.set_defaults(func=_choose)


def _judge_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=BACKENDS, default=None,
                        help="who judges (default: the settings' backend; offline: the heuristic)")
    parser.add_argument("--model", default=None, help="the model of that backend")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")


@guarded
def _verdict(args: argparse.Namespace) -> int:
    # why: start-up time: the window imports this module at start, that one only when needed
    from kmds_desktop.app.verdicts import pick_judge, verdict, verdict_dict, yes_no

    judge = pick_judge(args.backend, args.model)
    # why: start-up time: the CLI imports this module at start, that one only when needed
    from kmds_desktop.app.evidence import EvidenceSession

    with EvidenceSession() as session:
        if args.yes_no:
            answer, result = yes_no(session.store, args.claim, judge)
        else:
            answer, result = None, verdict(session.store, args.claim, judge)
    if args.json:
        print_json(verdict_dict(result, answer))
        return 0
    if answer is not None:
        print(f"answer: {answer}")
    print(f"{result.summary} (judged {result.method})")
    for document in result.documents:
        where = f", p. {'-'.join(map(str, document.pages))}" if document.pages else ""
        print(f"  {document.stance}: {document.label}{where}")
        if document.quote:
            print(f"    \u201c{document.quote}\u201d")
    for note in result.notes:
        print(f"note: {note}")
    return 0


@guarded
def _choose(args: argparse.Namespace) -> int:
    # why: start-up time: the window imports this module at start, that one only when needed
    from kmds_desktop.app.verdicts import choose, pick_judge

    if len(args.option) < 2:
        raise ValueError("give at least two options: --option A --option B")
    judge = pick_judge(args.backend, args.model)
    # why: start-up time: the CLI imports this module at start, that one only when needed
    from kmds_desktop.app.evidence import EvidenceSession

    with EvidenceSession() as session:
        result = choose(session.store, args.question, args.option, judge)
    if args.json:
        print_json(result.as_dict())
        return 0
    print(f"answer: {result.answer} (judged {result.method})")
    if result.quote:
        print(f"  {result.label}, p. {'-'.join(map(str, result.pages))}: \u201c{result.quote}\u201d")
    for note in result.notes:
        print(f"note: {note}")
    return 0
