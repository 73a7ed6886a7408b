"""``kmds-desktop ask KB_FILE QUESTION [--backend auto|ollama|google|openai|offline] [--json|--markdown]``.

Drives the same :class:`~kmds_desktop.app.ask.AskSession` as the window's Ask panel: the KB opens as
the window opens it (:func:`kmds_desktop.app.workspace.load_kb`: the installed demo KB is read from
the user's copy in the data folder), the options become settings
(:func:`~kmds_desktop.app.ask.settings_for_ask`) and
:meth:`~kmds_desktop.app.ask.AskSession.answer` routes, searches and answers. The index opens in
this process (the window's runs in its own). Plain output is the answer, the route and the cited
records; ``--json`` prints the whole result, ``--markdown`` the answer as the window exports it.
Nothing heavy is imported until the command runs, so ``kmds-desktop --help`` stays fast. User
errors print one line on stderr, exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from kmds_desktop.index.errors import SemanticIndexError
from kmds_desktop.kb import KnowledgeBaseError
from kmds_desktop.tasks import Cancelled


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ask`` to the main parser."""
    p = sub.add_parser(
        "ask",
        help="ask a knowledge base a question in plain language",
        description=(
            "Answer a question about a KMDS knowledge base: an LLM (or, offline, an embedding-based "
            "router) picks a search template and filters, the matching observations are ranked by "
            "meaning, and the answer cites them as [1], [2]. When the LLM fails or its route is "
            "invalid or finds nothing, the offline router's route runs; semantic search when that finds "
            "nothing too."
        ),
    )
    p.add_argument("kb_file", metavar="KB_FILE", help="KMDS knowledge base (RDF/XML)")
    p.add_argument("question", metavar="QUESTION", help="the question, in quotes")
    p.add_argument("--backend", choices=("auto", "ollama", "google", "openai", "offline"), default=None,
                   help="LLM backend (default: setting llm.backend, normally auto)")
    p.add_argument("--model", metavar="NAME",
                   help="LLM model (default: setting llm.ollama_model/google_model)")
    p.add_argument("--ollama-host", metavar="URL", help="Ollama server (default: setting llm.ollama_host)")
    p.add_argument("--openai-url", metavar="URL", dest="openai_base_url",
                   help="OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1 (default: setting "
                        "llm.openai_base_url; its key from OPENAI_API_KEY or the keyring)")
    p.add_argument("-n", "--limit", "--n-results", dest="n_results", type=int, default=None, metavar="N",
                   help="most records an answer shows (default: setting index.n_results, 50): a listing "
                        "shows every match up to N, an open question its relevant records up to N")
    p.add_argument("--persist-dir", metavar="DIR", help="index folder (default: DATA_DIR/index)")
    out_format = p.add_mutually_exclusive_group()
    out_format.add_argument("--json", action="store_true", help="print the whole result as JSON")
    out_format.add_argument("--markdown", action="store_true",
                            help="print the answer as the Markdown document the window's "
                                 "Export > Answer as Markdown writes")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    if args.n_results is not None and args.n_results < 1:
        err.write(f"error: -n/--limit must be at least 1, not {args.n_results}\n")
        return 1
    # why: start-up time: they load httpx, ollama
    from kmds_desktop.app import workspace
    from kmds_desktop.app.ask import AskSession, settings_for_ask
    from kmds_desktop.config import SettingsError, load_settings

    try:
        settings = settings_for_ask(load_settings(), backend=args.backend, model=args.model,
                                    ollama_host=args.ollama_host, n_results=args.n_results,
                                    openai_base_url=args.openai_base_url)
        kb = workspace.load_kb(args.kb_file)
        holder = workspace.IndexHolder.in_process(args.persist_dir)
        result = AskSession().answer(kb, settings, holder, args.question)
    except (KnowledgeBaseError, SemanticIndexError, SettingsError, ValueError, OSError) as exc:
        err.write(f"error: {exc}\n")
        return 1
    except (Cancelled, KeyboardInterrupt):
        err.write("cancelled\n")
        return 130
    if args.json:
        json.dump(result.to_dict(), out, indent=2, ensure_ascii=False, default=str)
        out.write("\n")
    elif args.markdown:
        from kmds_desktop.app.ask import answer_markdown  # why: start-up time: it loads httpx, ollama

        out.write(answer_markdown(result))
    else:
        out.write(format_result(result.to_dict()))
    return 0


def format_result(data: dict[str, Any]) -> str:
    """Answer, route and numbered records as plain text."""
    # why: start-up time: the window imports this module at start, that one only when needed
    from kmds_desktop.ask.relevance import workflow_label

    # the notes the window shows under the answer (a weak match, what its citations rest on), as
    # displayed_answer adds them
    notes = [n for n in (data.get("weak_match") or "", data.get("citation_note") or "") if n]
    answer = data["answer"].strip()
    lines = [answer + "".join(f"\n\n{n}" for n in notes if answer), ""]
    route = f"Route: {data['intent_class']} — {data['route_explanation']}"
    lines.append(route)
    for guard_note in data.get("route_notes") or []:
        lines.append(f"Guard: {guard_note}")
    if data.get("fallback_reason"):
        lines.append(f"Fallback: {data['fallback_reason']}")
    if data.get("speed_note"):
        lines.append(f"Speed: {data['speed_note']}")
    note = f" — {data['backend_note']}" if data.get("backend_note") else ""
    from kmds_desktop.app.ask import llm_failure_suffix  # why: start-up time: it loads httpx, ollama

    lines.append(f"Backend: {data['backend']} (answer: {data['synthesis']}){note}{llm_failure_suffix(data)}")
    if data["results"]:
        shown, total = len(data["results"]), data.get("total_matches") or len(data["results"])
        kind = "matching" if data.get("listing") else "relevant"
        more = f" (limit {data.get('limit')}: --limit N shows more)" if total > shown else ""
        lines += ["", f"Records: {shown} of {total} {kind}{more}"]
        for i, r in enumerate(data["results"], start=1):
            seq = f" #{r['finding_seq']}" if r.get("finding_seq") is not None else ""
            finding = " ".join(str(r.get("finding", "")).split())
            finding = finding if len(finding) <= 160 else finding[:159] + "…"
            lines.append(f"[{i}] {r.get('obs_type', '')}{seq} (workflow {workflow_label(r)}): {finding}")
            lines.append(f"    {r['iri']}")
            for copy in r.get("also") or []:
                lines.append(f"    also {copy['iri']} ({copy.get('workflow_name') or 'no workflow'})")
    return "\n".join(lines) + "\n"
