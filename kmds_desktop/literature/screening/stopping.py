"""When to stop screening: the figures and the rules a user picks. Nothing here stops for the user.

Why two rules with their assumptions spelled out: every stopping rule trades records read against
relevant records missed, and each is only as good as its assumption. The user picks; the view shows
whether a rule is met and what it assumes.

- **N consecutive excluded** (default 50): met when the last N records screened were all excluded.
  Assumes the order puts likely includes first, so a long run of excludes means few are left.
- **Target recall by random sample** (SAFE-like; Boetje & van de Schoot 2024, Callaghan & Müller-Hansen
  2020): screen a random sample of the *undecided* records; from the includes found in it, an upper 95%
  bound on the includes still undecided gives a lower bound on the recall reached. Met when that bound is
  at least the target (default 95%). Assumes the sample is random and the reviewer decides sampled
  records as carefully as the others.

The estimate of the relevant records remaining is made from the recent inclusion rate: if the undecided
records held includes at the rate of the last :data:`RECENT` screened, about rate × undecided would remain.
The active-learning order puts likely includes first, so this is usually an overestimate late in a review.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import beta

from kmds_desktop.text import plural

#: How many of the latest decisions the inclusion-rate estimate looks at.
RECENT = 50
DEFAULT_CONSECUTIVE = 50
DEFAULT_TARGET_RECALL = 0.95
CONFIDENCE = 0.95

CONSECUTIVE_ASSUMPTION = (
    "Assumes the order puts likely includes first, so a long run of excludes means few "
    "are left; relevant records that share few words with those included so far can "
    "still come later."
)
SAMPLE_ASSUMPTION = (
    "Assumes the records sampled were drawn at random from the undecided ones and were "
    "judged as carefully as the rest; the bound is a one-sided 95% (Clopper–Pearson) bound."
)
ESTIMATE_METHOD = (
    f"inclusion rate of the last {RECENT} records screened × records not yet screened "
    "(usually high late in a review: the order puts likely includes first)"
)


@dataclass(frozen=True)
class RuleStatus:
    name: str
    met: bool
    detail: str
    assumption: str


@dataclass(frozen=True)
class SampleCheck:
    """A target-recall check in progress: the random sample drawn from the undecided records."""

    target: float
    sample: tuple[tuple[str, str], ...]
    undecided_at_draw: int
    included_at_draw: int


@dataclass(frozen=True)
class StoppingFigures:
    total: int
    screened: int
    included: int
    since_last_include: int
    recent_rate: float
    remaining_estimate: float

    @property
    def share_screened(self) -> float:
        return self.screened / self.total if self.total else 0.0


def figures(total: int, sequence: Sequence[bool]) -> StoppingFigures:
    """``sequence``: for each screened record in screening order, whether it was included."""
    since = 0
    for included in reversed(sequence):
        if included:
            break
        since += 1
    recent = sequence[-RECENT:]
    rate = sum(recent) / len(recent) if recent else 0.0
    return StoppingFigures(
        total=total,
        screened=len(sequence),
        included=sum(sequence),
        since_last_include=since,
        recent_rate=rate,
        remaining_estimate=rate * max(0, total - len(sequence)),
    )


def consecutive_rule(fig: StoppingFigures, n: int = DEFAULT_CONSECUTIVE) -> RuleStatus:
    met = fig.screened > 0 and fig.since_last_include >= n
    detail = f"{plural(fig.since_last_include, 'record')} excluded in a row; the rule asks for {n:,}" + (
        " — met" if met else ""
    )
    return RuleStatus(f"{n:,} consecutive excluded", met, detail, CONSECUTIVE_ASSUMPTION)


def sample_size(
    undecided: int, included: int, target: float = DEFAULT_TARGET_RECALL, confidence: float = CONFIDENCE
) -> int:
    """Records to sample so that, if none of them is an include, the recall bound reaches ``target``."""
    if undecided <= 0:
        return 0
    allowed = included * (1 - target) / target  # includes that may remain undecided
    share = allowed / undecided
    if share <= 0:
        return undecided
    if share >= 1:
        return min(undecided, 1)
    return min(undecided, math.ceil(math.log(1 - confidence) / math.log(1 - share)))


def recall_lower_bound(
    included: int, sample_size_: int, sample_includes: int, undecided: int, confidence: float = CONFIDENCE
) -> float:
    """Lower bound on recall: includes found / (found + upper bound of the includes still undecided)."""
    if sample_size_ <= 0:
        return 0.0
    upper_rate = (
        1.0
        if sample_includes >= sample_size_
        else float(beta.ppf(confidence, sample_includes + 1, sample_size_ - sample_includes))
    )
    remaining = upper_rate * max(0, undecided - sample_size_) + 0  # sampled records are already decided
    return included / (included + remaining) if included + remaining > 0 else 1.0


def sample_rule(
    check: SampleCheck | None, sampled_decisions: Sequence[bool | None], included_total: int
) -> RuleStatus:
    """The target-recall rule: ``sampled_decisions`` are the sample's decisions (None: not yet decided)."""
    name = f"target recall {check.target:.0%} (random sample)" if check else "target recall (random sample)"
    if check is None:
        return RuleStatus(name, False, "no random sample drawn yet", SAMPLE_ASSUMPTION)
    done = [d for d in sampled_decisions if d is not None]
    left = len(check.sample) - len(done)
    if left > 0:
        return RuleStatus(
            name, False, f"{plural(len(done), 'sampled record')} screened, {left:,} to go", SAMPLE_ASSUMPTION
        )
    found = sum(1 for d in done if d)
    bound = recall_lower_bound(included_total - found, len(done), found, check.undecided_at_draw)
    met = bound >= check.target
    return RuleStatus(
        name,
        met,
        f"{plural(found, 'include')} in the sample of {len(done):,}; recall is at "
        f"least {bound:.0%} (95% confidence)" + (" — met" if met else ""),
        SAMPLE_ASSUMPTION,
    )
