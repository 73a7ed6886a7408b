"""The PRISMA 2020 flow of a review, counted from its records and decisions, and drawn as SVG.

Why counted, not typed: the numbers in a flow diagram are the ones most often wrong in a published review;
here each one comes from the records (identified per search row and per source, duplicates removed by
DOI/PMID, screened, excluded with per-reason counts, included). What the records cannot know (records
removed by automation tools, reports not retrieved, full-text exclusions) is entered by hand and marked
"entered" in the numbers and in the drawing.

Runs of a search count each record once: a record that a second run of the literature database's
searches finds again (the same record, by its identity in the database) was identified by the first,
so the flow neither counts it again nor calls it a duplicate removed; a second record of the same
paper (another identity with the same DOI or PMID) is a duplicate, as PRISMA counts one. Files are
sources of their own, each counted whole. A source is labelled by its name and a date a person reads
("Search #12 · 3 Dec 2026 14:05"), never by a raw time stamp.

The SVG is a plain string (no Qt, no library): the window can show it or render it to PNG with Qt.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

from kmds_desktop.literature.screening.decisions import EXCLUDE, INCLUDE, MAYBE, Decision, Key, SourceCount
from kmds_desktop.text import human_datetime

#: Numbers a user may enter (name -> label in the flow).
ENTERED_NUMBERS = {
    "removed_automation": "Records marked as ineligible by automation tools",
    "removed_other": "Records removed for other reasons",
    "reports_not_retrieved": "Reports not retrieved",
    "reports_excluded": "Reports excluded (full text)",
    "studies_included": "Studies included in review",
}
NO_REASON = "no reason given"
#: How a search's origin begins: ``#12`` (a set of the search history), ``search <time stamp>`` (a run
#: that was not kept in the history). Every other origin (``file refs.ris``) is a source of its own.
_SEARCH_PREFIXES = ("#", "search ")


def is_search_run(origin: str) -> bool:
    """Whether ``origin`` is a run of a search on the literature database (not a file)."""
    return origin.startswith(_SEARCH_PREFIXES)


def source_name(origin: str) -> str:
    """The source's name without its date: ``Search #12``, ``Search``, ``File refs.ris``."""
    if origin.startswith("#"):
        return f"Search {origin.split()[0]}"
    if origin.startswith("search "):
        rest = origin[len("search "):].strip()
        return "Search" if human_datetime(rest) != rest else f"Search {rest}"
    if origin.startswith("file "):
        return f"File {origin[len('file '):]}"
    return origin


def source_label(source: SourceCount) -> str:
    """``Search #12 · 3 Dec 2026 14:05``: the name, then when the run ran (a run that names its time
    stamp) or else when it joined the review, in local time."""
    stamp = source.added_at
    if source.origin.startswith("search "):
        rest = source.origin[len("search "):].strip()
        if human_datetime(rest) != rest:
            stamp = rest
    when = human_datetime(stamp) if stamp else ""
    return f"{source_name(source.origin)} · {when}" if when else source_name(source.origin)


@dataclass(frozen=True)
class FlowNumber:
    label: str
    value: int
    entered: bool = False
    note: str = ""

    def text(self) -> str:
        return (f"{self.label} (n = {self.value:,})" + (f"; {self.note}" if self.note else "")
                + (" [entered]" if self.entered else ""))


@dataclass
class PrismaFlow:
    identified_per_source: list[FlowNumber] = field(default_factory=list)
    identified_per_row: list[FlowNumber] = field(default_factory=list)
    identified: int = 0
    duplicates_removed: int = 0
    screened: int = 0
    not_yet_screened: int = 0
    maybe: int = 0
    excluded: int = 0
    excluded_per_reason: list[FlowNumber] = field(default_factory=list)
    included: int = 0
    entered: dict[str, FlowNumber] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        def nums(items: Sequence[FlowNumber]) -> list[dict[str, object]]:
            return [{"label": n.label, "value": n.value, "entered": n.entered,
                     **({"note": n.note} if n.note else {})} for n in items]

        return {
            "identified": self.identified,
            "identified_per_source": nums(self.identified_per_source),
            "identified_per_row": nums(self.identified_per_row),
            "duplicates_removed": self.duplicates_removed,
            "screened": self.screened,
            "not_yet_screened": self.not_yet_screened,
            "maybe": self.maybe,
            "excluded": self.excluded,
            "excluded_per_reason": nums(self.excluded_per_reason),
            "included": self.included,
            "entered": {
                k: {"label": v.label, "value": v.value, "note": v.note, "entered": True}
                for k, v in self.entered.items()
            },
        }

    def lines(self) -> list[str]:
        """The flow as text (the CLI's ``flow`` prints it)."""
        out = [f"Records identified (n = {self.identified:,})"]
        out += [f"  {n.text()}" for n in self.identified_per_source]
        if len(self.identified_per_row) > 1:
            out += [f"    {n.text()}" for n in self.identified_per_row]
        out.append(f"Duplicate records removed (n = {self.duplicates_removed:,})")
        for key in ("removed_automation", "removed_other"):
            if key in self.entered:
                out.append(self.entered[key].text())
        out.append(f"Records screened (n = {self.screened:,})")
        out.append(f"Records excluded (n = {self.excluded:,})")
        out += [f"  {n.text()}" for n in self.excluded_per_reason]
        if self.maybe:
            out.append(f"Records marked maybe (n = {self.maybe:,})")
        if self.not_yet_screened:
            out.append(f"Records not yet screened (n = {self.not_yet_screened:,})")
        out.append(f"Records included (n = {self.included:,})")
        for key in ("reports_not_retrieved", "reports_excluded", "studies_included"):
            if key in self.entered:
                out.append(self.entered[key].text())
        return out


def identified_once(
    sources: Sequence[SourceCount], identities: Mapping[str, set[Key]]
) -> list[tuple[SourceCount, int, int]]:
    """(source, records it identified first, records an earlier run of a search had identified) per
    source, in the order they joined the review (see the module docstring). A source whose identities
    were not kept (added before they were) counts what it brought."""
    seen: set[Key] = set()
    out = []
    for s in sorted(sources, key=lambda s: (s.added_at, s.origin)):
        keys = identities.get(s.origin)
        if not is_search_run(s.origin) or keys is None:
            out.append((s, s.identified, 0))
            continue
        again = len(keys & seen)
        out.append((s, max(0, s.identified - again), again))
        seen |= keys
    return out


def build_flow(
    *,
    sources: Sequence[SourceCount],
    unique_records: int,
    decisions: Mapping[tuple[str, str], Decision],
    reasons: Sequence[str] = (),
    entered: Mapping[str, tuple[int, str]] | None = None,
    identities: Mapping[str, set[Key]] | None = None,
) -> PrismaFlow:
    """Count the flow. ``unique_records``: records in the review after duplicates were merged;
    ``decisions``: those of the review's records; ``identities``: what each origin brought (see
    :func:`identified_once`), so a record that several runs found counts once."""
    flow = PrismaFlow()
    for s, new, again in identified_once(sources, identities or {}):
        label = source_label(s)
        note = f"{s.identified:,} found, {again:,} of them by an earlier run" if again else ""
        flow.identified_per_source.append(FlowNumber(label, new, note=note))
        flow.identified += new
        for row, n in s.per_row.items():
            flow.identified_per_row.append(FlowNumber(f"{source_name(s.origin)}, {row}", int(n)))
    flow.duplicates_removed = max(0, flow.identified - unique_records)
    counts = Counter(d.decision for d in decisions.values())
    flow.included, flow.excluded, flow.maybe = counts[INCLUDE], counts[EXCLUDE], counts[MAYBE]
    flow.screened = len(decisions)
    flow.not_yet_screened = max(0, unique_records - flow.screened)
    per_reason = Counter((d.reason or NO_REASON) for d in decisions.values() if d.decision == EXCLUDE)
    order = [r for r in reasons if r in per_reason] + sorted(r for r in per_reason if r not in reasons)
    flow.excluded_per_reason = [FlowNumber(r, per_reason[r]) for r in order]
    for key, (value, note) in (entered or {}).items():
        flow.entered[key] = FlowNumber(ENTERED_NUMBERS.get(key, key), value, entered=True, note=note)
    return flow


# -- SVG ------------------------------------------------------------------------------------------------

_W, _BOX_W, _GAP = 860, 360, 40
_LINE = 18
#: Characters that fit in a box's line at 13 px Helvetica/Arial (about 7.2 px a character, bold 7.9,
#: with room to spare): longer lines wrap, so no text runs out of its box into another.
_CHARS = 42
_SIDE_GAP = 14


def _wrap(lines: Sequence[str], width: int = _CHARS) -> list[tuple[str, bool]]:
    """(text, bold) lines of at most ``width`` characters; a wrapped line keeps its indent + 2."""
    out: list[tuple[str, bool]] = []
    for i, line in enumerate(lines):
        indent = line[: len(line) - len(line.lstrip(" "))]
        parts = textwrap.wrap(
            line.strip(), width=width - len(indent), break_long_words=True, break_on_hyphens=False
        ) or [""]
        out.append((indent + parts[0], i == 0))
        out.extend((indent + "  " + p, i == 0) for p in textwrap.wrap(
            " ".join(parts[1:]), width=width - len(indent) - 2, break_long_words=True
        ))
    return out


def svg_box(
    x: int, y: int, w: int, lines: Sequence[str], *, fill: str = "#ffffff", chars: int = _CHARS
) -> tuple[str, int]:
    """A box of ``lines`` (the first bold, wrapped at ``chars``) at ``(x, y)``: its SVG and its height."""
    wrapped = _wrap(lines, chars)
    h = 16 + _LINE * len(wrapped)
    parts = [
        f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="4" fill="{fill}" stroke="#333" '
        f'stroke-width="1.2"/>'
    ]
    for i, (text, bold) in enumerate(wrapped):
        weight = ' font-weight="bold"' if bold else ""
        parts.append(
            f'<text x="{x + 10}" y="{y + 22 + _LINE * i}"{weight} xml:space="preserve">{escape(text)}</text>'
        )
    return "\n".join(parts), h


def svg_arrow(x1: int, y1: int, x2: int, y2: int, *, head: bool = True) -> str:
    """A line from ``(x1, y1)`` to ``(x2, y2)``, with an arrow head unless ``head`` is False."""
    end = ' marker-end="url(#arrow)"' if head else ""
    return f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#333" stroke-width="1.2"{end}/>'


def svg_stage(body: list[str], y: int, main: Sequence[str], sides: Sequence[tuple[Sequence[str], str]] = (),
              *, left: int, right: int, width: int, gap: int, fill: str = "#ffffff") -> int:
    """One stage of a PRISMA flow from ``y``: its main box at ``left``, the boxes of what left it
    stacked at ``right`` (each ``(lines, fill)``, each with its own arrow from one junction), and the
    arrow down to the next stage; returns where the next stage starts.

    Why shared: the screening's flow and an updated review's flow draw their stages alike, and two
    copies of the arithmetic drift (an arrow that starts at a side box's bottom, a junction off centre).
    """
    junction = left + width + (right - left - width) // 2
    svg, main_h = svg_box(left, y, width, main, fill=fill)
    body.append(svg)
    mid = y + min(main_h, 34) // 2
    side_y, mids = y, []
    for lines, side_fill in sides:
        svg, side_h = svg_box(right, side_y, width, lines, fill=side_fill)
        body.append(svg)
        mids.append(side_y + min(side_h, 34) // 2)
        side_y += side_h + _SIDE_GAP
    height = main_h
    if mids:
        body.append(svg_arrow(left + width, mid, junction, mid, head=False))
        if mids[-1] != mid:
            body.append(svg_arrow(junction, mid, junction, mids[-1], head=False))
        body.extend(svg_arrow(junction, m, right, m) for m in mids)
        height = max(main_h, side_y - _SIDE_GAP - y)
    # From the main box's own bottom (side boxes may reach lower) to the next stage.
    body.append(svg_arrow(left + width // 2, y + main_h, left + width // 2, y + height + gap))
    return y + height + gap


def flow_svg(flow: PrismaFlow, title: str = "") -> str:
    """The flow as a standalone SVG document (PRISMA 2020 layout: main boxes left, removals right;
    a stage may have several boxes on the right, stacked, each with its own arrow)."""
    left, right = 30, 30 + _BOX_W + _GAP + 40
    y = 30
    body: list[str] = []
    for line in textwrap.wrap(title, width=100)[:3] if title else []:
        body.append(f'<text x="30" y="{y + 4}" font-size="16" font-weight="bold">{escape(line)}</text>')
        y += 22
    if title:
        y += 8

    def stage(main: list[str], sides: Sequence[tuple[list[str], str]] = ()) -> None:
        nonlocal y
        y = svg_stage(body, y, main, sides, left=left, right=right, width=_BOX_W, gap=_GAP)

    identified = [f"Records identified (n = {flow.identified:,})"]
    for n in flow.identified_per_source:
        identified.append(f"  {n.label} (n = {n.value:,})")
        if n.note:
            identified.append(f"    {n.note}")
    removed = ["Records removed before screening:", f"  Duplicate records (n = {flow.duplicates_removed:,})"]
    for key in ("removed_automation", "removed_other"):
        if key in flow.entered:
            removed.append("  " + flow.entered[key].text())
    stage(identified, [(removed, "#f5f5f5")])
    excluded = [f"Records excluded (n = {flow.excluded:,})"] + [
        f"  {n.label} (n = {n.value:,})" for n in flow.excluded_per_reason
    ]
    sides = [(excluded, "#f5f5f5")]
    # Not excluded, so not in the excluded box; and a record marked maybe was screened while one not
    # yet screened was not: each has a box of its own (one shared box read as "maybe: 2 + 5 waiting").
    if flow.maybe:
        sides.append(([f"Marked maybe (n = {flow.maybe:,})", "  screened, to decide later"], "#fdf6e3"))
    if flow.not_yet_screened:
        sides.append(([f"Not yet screened (n = {flow.not_yet_screened:,})", "  waiting in the queue"],
                      "#eef3fb"))
    stage([f"Records screened (n = {flow.screened:,})"], sides)
    full_text = [
        flow.entered[k].text() for k in ("reports_not_retrieved", "reports_excluded") if k in flow.entered
    ]
    if full_text:
        stage([f"Reports sought for retrieval (n = {flow.included:,})"], [(full_text, "#f5f5f5")])
    final = [f"Records included (n = {flow.included:,})"]
    if "studies_included" in flow.entered:
        final.append(flow.entered["studies_included"].text())
    svg, h = svg_box(left, y, _BOX_W, final, fill="#eef6ee")
    body.append(svg)
    return svg_document(body, _W, y + h + 30)


def svg_document(body: Sequence[str], width: int, height: int) -> str:
    """Boxes and arrows as a standalone SVG document (white background, the arrow head defined once)."""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="13">\n'
        '<defs><marker id="arrow" markerWidth="10" markerHeight="8" refX="9" refY="4" orient="auto">'
        '<path d="M0,0 L10,4 L0,8 z" fill="#333"/></marker></defs>\n'
        '<rect width="100%" height="100%" fill="#ffffff"/>\n' + "\n".join(body) + "\n</svg>\n"
    )
