"""The PRISMA 2020 flow for an updated review: the previous version's studies, then each update's own
identification, screening and inclusion, and the total.

Why per round: PRISMA 2020's flow for updated reviews (Page et al. 2021, figure 1) keeps the studies of the
previous version apart from the records a new search identified. Here each record belongs to exactly one
round (the one it joined in), so a record that several runs found is counted once, where it first came,
however often the strategy is re-run; a record the update found again is counted as "already in the
review", not as new identification.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

from kmds_desktop.literature.reviews.store import RunLog
from kmds_desktop.literature.screening.decisions import EXCLUDE, INCLUDE, MAYBE, Decision, Key
from kmds_desktop.literature.screening.prisma import svg_arrow, svg_box, svg_document, svg_stage
from kmds_desktop.text import human_datetime


@dataclass
class RoundFlow:
    """One round's numbers (round 0: the first review)."""

    round: int
    label: str
    identified: int = 0  #: records the round's run found (round 0: records that joined the review)
    already_in_review: int = 0  #: of them, records an earlier round holds (not identified again)
    duplicates_removed: int = 0  #: second records of one paper within the run
    records: int = 0  #: records that joined in this round
    screened: int = 0
    excluded: int = 0
    maybe: int = 0
    not_yet_screened: int = 0
    included: int = 0
    withdrawn: int = 0  #: its records withdrawn since (flagged, decisions kept)
    strategy_version: int | None = None

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class UpdatedFlow:
    rounds: list[RoundFlow] = field(default_factory=list)

    @property
    def total_included(self) -> int:
        return sum(r.included for r in self.rounds)

    def to_dict(self) -> dict[str, object]:
        return {"rounds": [r.to_dict() for r in self.rounds], "total_included": self.total_included}

    def lines(self) -> list[str]:
        """The flow as text (``literature review show`` prints it)."""
        out: list[str] = []
        for r in self.rounds:
            if r.round == 0:
                out.append(f"{r.label}: {r.records:,} records")
                out.append(f"  Records screened (n = {r.screened:,}); excluded (n = {r.excluded:,})"
                           + (f"; maybe (n = {r.maybe:,})" if r.maybe else "")
                           + _not_yet(r))
                out.append(f"  Studies included in the previous version (n = {r.included:,})")
            else:
                strategy = f", strategy version {r.strategy_version}" if r.strategy_version else ""
                out.append(f"{r.label}{strategy}")
                out.append(f"  Records identified (n = {r.identified:,})")
                out.append("  Records already in the review, not counted again "
                           f"(n = {r.already_in_review:,})")
                out.append(f"  Duplicate records removed (n = {r.duplicates_removed:,})")
                out.append(f"  New records screened (n = {r.screened:,}); excluded (n = {r.excluded:,})"
                           + (f"; maybe (n = {r.maybe:,})" if r.maybe else "")
                           + _not_yet(r))
                out.append(f"  New studies included (n = {r.included:,})")
            if r.withdrawn:
                out.append(f"  Records withdrawn since, flagged (n = {r.withdrawn:,})")
        out.append(f"Total studies included in the review (n = {self.total_included:,})")
        return out


def _not_yet(r: RoundFlow) -> str:
    return f"; not yet screened (n = {r.not_yet_screened:,})" if r.not_yet_screened else ""


def build_updated_flow(
    *,
    record_keys: Sequence[Key],
    rounds: Mapping[Key, int],
    decisions: Mapping[Key, Decision],
    runs: Sequence[RunLog],
    withdrawn: Mapping[Key, str] | None = None,
    created_at: str = "",
) -> UpdatedFlow:
    """Count each round from the records that joined in it (see the module docstring)."""
    updates = {int(r.counts.get("round", 0)): r for r in runs if r.kind == "update"}
    numbers = sorted({0, *updates, *rounds.values()})
    by_round: dict[int, list[Key]] = {n: [] for n in numbers}
    for key in record_keys:
        by_round.setdefault(rounds.get(key, 0), []).append(key)
    flow = UpdatedFlow()
    for n in sorted(by_round):
        keys = by_round[n]
        counts = Counter(decisions[k].decision for k in keys if k in decisions)
        run = updates.get(n)
        stamp = run.at if run is not None else created_at
        when = human_datetime(stamp) if stamp else ""
        label = "First review" if n == 0 else f"Update {n}"
        r = RoundFlow(round=n, label=f"{label} · {when}" if when else label, records=len(keys))
        r.included, r.excluded, r.maybe = counts[INCLUDE], counts[EXCLUDE], counts[MAYBE]
        r.screened = sum(counts.values())
        r.not_yet_screened = len(keys) - r.screened
        r.withdrawn = sum(1 for k in keys if k in (withdrawn or {}))
        if run is None:
            r.identified = len(keys)
        else:
            r.identified = int(run.counts.get("found", len(keys)))
            r.already_in_review = int(run.counts.get("known", 0))
            r.duplicates_removed = max(0, r.identified - r.already_in_review - len(keys))
            r.strategy_version = run.strategy_version
        flow.rounds.append(r)
    return flow


#: Columns of the drawing: previous studies, the update's main boxes, the boxes beside them.
_PREVIOUS_X, _MAIN_X, _SIDE_X, _COLUMN_W, _GAP = 30, 400, 770, 330, 36
_WIDTH = _SIDE_X + _COLUMN_W + 30
_SIDE_FILL, _DONE_FILL = "#f5f5f5", "#eef6ee"


def updated_flow_svg(flow: UpdatedFlow, title: str = "") -> str:
    """The PRISMA 2020 flow diagram for an updated review (Page et al. 2021, figure 1) as SVG: the studies
    of the previous version on the left (every round before the latest, each named), the latest update's
    identification, screening and new studies in the middle with what left at each step beside them, and
    the total below both. A review not yet updated is drawn as its first version alone."""
    body: list[str] = []
    y = 30
    for line in textwrap.wrap(title, width=110)[:3]:
        body.append(f'<text x="{_PREVIOUS_X}" y="{y + 4}" font-size="16" font-weight="bold">'
                    f"{escape(line)}</text>")
        y += 24
    latest = flow.rounds[-1] if flow.rounds and flow.rounds[-1].round > 0 else None
    earlier = flow.rounds[:-1] if latest is not None else flow.rounds
    body.append(f'<text x="{_PREVIOUS_X}" y="{y}" font-weight="bold">Previous studies</text>')
    if latest is not None:
        body.append(f'<text x="{_MAIN_X}" y="{y}" font-weight="bold">'
                    "Identification of new studies via databases</text>")
    y += 14
    included_before = sum(r.included for r in earlier)
    previous = [f"Studies included in the previous version of the review (n = {included_before:,})"]
    previous += [f"  {r.label}: {r.included:,} of {r.records:,} records" for r in earlier]
    previous += [f"  {r.label}: records withdrawn since, flagged (n = {r.withdrawn:,})"
                 for r in earlier if r.withdrawn]
    svg, previous_h = svg_box(_PREVIOUS_X, y, _COLUMN_W, previous)
    body.append(svg)
    bottom = y + previous_h
    if latest is not None:
        bottom = _draw_update(body, latest, y)
    total_y = max(bottom, y + previous_h) + _GAP
    total = [f"Total studies included in the review (n = {flow.total_included:,})"]
    svg, total_h = svg_box(_PREVIOUS_X, total_y, _MAIN_X + _COLUMN_W - _PREVIOUS_X, total, fill=_DONE_FILL,
                           chars=80)
    body.append(svg)
    left_mid, main_mid = _PREVIOUS_X + _COLUMN_W // 2, _MAIN_X + _COLUMN_W // 2
    body.append(svg_arrow(left_mid, y + previous_h, left_mid, total_y))
    if latest is not None:
        body.append(svg_arrow(main_mid, bottom, main_mid, total_y))
    return svg_document(body, _WIDTH, total_y + total_h + 30)


def _draw_update(body: list[str], r: RoundFlow, y: int) -> int:
    """The latest update's column from ``y``; returns the bottom of its last box."""
    strategy = f" (strategy version {r.strategy_version})" if r.strategy_version else ""
    stages: list[tuple[list[str], list[list[str]], str]] = [
        ([f"Records identified (n = {r.identified:,})", f"  {r.label}{strategy}"],
         [["Records removed before screening:",
           f"  Already in the review, not counted again (n = {r.already_in_review:,})",
           f"  Duplicate records (n = {r.duplicates_removed:,})"]], "#ffffff"),
        ([f"New records screened (n = {r.screened:,})"],
         [side for side in (
             [f"Records excluded (n = {r.excluded:,})"],
             [f"Marked maybe (n = {r.maybe:,})", "  screened, to decide later"] if r.maybe else [],
             [f"Not yet screened (n = {r.not_yet_screened:,})", "  waiting in the queue"]
             if r.not_yet_screened else [],
             [f"Records withdrawn since, flagged (n = {r.withdrawn:,})"] if r.withdrawn else [],
         ) if side], "#ffffff"),
    ]
    for main, sides, fill in stages:
        y = svg_stage(body, y, main, [(lines, _SIDE_FILL) for lines in sides], left=_MAIN_X, right=_SIDE_X,
                      width=_COLUMN_W, gap=_GAP, fill=fill)
    svg, h = svg_box(_MAIN_X, y, _COLUMN_W, [f"New studies included (n = {r.included:,})"],
                     fill=_DONE_FILL)
    body.append(svg)
    return y + h
