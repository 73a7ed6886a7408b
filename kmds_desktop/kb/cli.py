"""``kmds-desktop kb ...``: look at a KMDS knowledge base from the command line.

Imports of the KB core happen inside the handlers so ``kmds-desktop --help`` stays fast.
Errors print one line to stderr and exit 1; a researcher never sees a traceback for a bad file.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

from kmds_desktop.kb import KnowledgeBaseError, load_kb
from kmds_desktop.kb.evidence_links import evidence_links


def register(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """Add this area's subcommands to the main parser; return the ``kb`` subparsers (others add theirs)."""
    kb = sub.add_parser(
        "kb", help="inspect KMDS knowledge-base files", description="Inspect KMDS knowledge-base files."
    )
    kb_sub = kb.add_subparsers(dest="kb_command", metavar="KB_COMMAND")
    kb_sub.required = True

    show = kb_sub.add_parser(
        "show",
        help="print the workflows and observations of a KB file",
        description="Print the workflows and observations of a KMDS RDF/XML file, in display order.",
    )
    show.add_argument("file", metavar="FILE", help="KMDS knowledge base (RDF/XML)")
    show.add_argument(
        "--json", action="store_true", help="print JSON (path, kb_id, notes, workflows, observations)"
    )
    show.set_defaults(func=_show)

    synth = kb_sub.add_parser(
        "synth",
        help="write a synthetic KB (for benchmarks and scale tests)",
        description="Write a synthetic KMDS knowledge base with N observations in the real file format.",
    )
    synth.add_argument("file", metavar="FILE", help="where to write the KB")
    synth.add_argument("n", metavar="N", type=int, help="number of observations")
    synth.add_argument("--workflows", type=int, default=2, help="number of workflows (default 2)")
    synth.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    synth.set_defaults(func=_synth)
    return kb_sub


def _fail(message: str) -> int:
    print(f"kmds-desktop kb: error: {message}", file=sys.stderr)
    return 1


def _show(args: argparse.Namespace) -> int:
    try:
        kb = load_kb(args.file)
    except KnowledgeBaseError as exc:
        return _fail(str(exc))
    except Exception as exc:  # noqa: BLE001 - the CLI promises a one-line message, never a traceback
        return _fail(f"{args.file}: unexpected error: {type(exc).__name__}: {exc}")
    if args.json:
        data = kb.to_dict()
        data["evidence_links"] = [link.to_dict() for link in evidence_links(kb)]
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    else:
        text = format_kb(kb)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into `head`: not an error worth a traceback
        sys.stderr.close()
    return 0


def _synth(args: argparse.Namespace) -> int:
    # why: start-up time: the window imports this module at start, that one only when needed
    from kmds_desktop.kb.synthetic import write_synthetic_kb

    if args.n < 0 or args.workflows < 1:
        return _fail("N must be >= 0 and --workflows >= 1")
    try:
        path = write_synthetic_kb(args.file, args.n, n_workflows=args.workflows, seed=args.seed)
    except KnowledgeBaseError as exc:
        return _fail(str(exc))
    print(f"wrote {path} ({args.n} observations, {args.workflows} workflows)")
    return 0


def format_kb(kb: Any) -> str:
    """Human-readable listing: workflows with their observations, then unlinked ones."""
    counts = kb.counts()
    lines = [
        f"{kb.path}",
        f"  kb_id {kb.kb_id}: {counts['workflows']} workflow(s), {counts['observations']} observation(s)",
    ]
    lines += [f"  note: {note}" for note in kb.notes]
    by_workflow: dict[str, list[Any]] = {}
    for obs in kb.observations:
        by_workflow.setdefault(obs.workflows[0] if obs.workflows else "", []).append(obs)
    for wf in kb.workflows:
        lines.append("")
        lines.append(f"Workflow: {wf.name} [{wf.kind}]")
        if wf.description:
            lines += textwrap.wrap(wf.description, 100, initial_indent="  ", subsequent_indent="  ")
        if wf.depends_on:
            lines.append(f"  depends on: {', '.join(wf.depends_on)}")
        lines += [_format_obs(o) for o in by_workflow.get(wf.name, [])]
    if by_workflow.get(""):
        lines.append("")
        lines.append("Unlinked observations (no workflow lists them):")
        lines += [_format_obs(o) for o in by_workflow[""]]
    return "\n".join(lines) + "\n"


def _format_obs(obs: Any) -> str:
    seq = "-" if obs.finding_seq is None else str(obs.finding_seq)
    head = f"  [{obs.category} #{seq}] {obs.obs_type or '(no type)'}"
    if obs.intent:
        head += f" ({obs.intent})"
    if len(obs.workflows) > 1:
        head += f" also in: {', '.join(obs.workflows[1:])}"
    body = "\n".join("      " + line for line in obs.finding.splitlines() or [""])
    return f"{head}\n{body}"
