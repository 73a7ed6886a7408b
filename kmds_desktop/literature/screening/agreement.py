"""Two reviewers' decisions: where they disagree, and Cohen's kappa.

Why kappa and not plain agreement: with few includes, two reviewers who exclude almost everything agree
on most records by chance; kappa = (p_o − p_e) / (1 − p_e) discounts that. It is computed on the records
both decided, over the three categories (include, exclude, maybe).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from kmds_desktop.literature.screening.decisions import Decision

Key = tuple[str, str]


@dataclass
class Agreement:
    both: int
    agreed: int
    kappa: float | None
    disagreements: list[tuple[Key, str, str]] = field(default_factory=list)  #: (record, mine, theirs)

    def summary(self, other: str) -> str:
        if not self.both:
            return f"no record decided by both you and {other}"
        k = "undefined (one category only)" if self.kappa is None else f"{self.kappa:.2f}"
        return (
            f"{self.both:,} records decided by both; agreement {self.agreed / self.both:.0%}, "
            f"Cohen's kappa {k}; {len(self.disagreements):,} disagreement"
            f"{'s' if len(self.disagreements) != 1 else ''}"
        )


def cohen_kappa(a: list[str], b: list[str]) -> float | None:
    """Cohen's kappa of two equal-length label lists (None when chance agreement is 1)."""
    n = len(a)
    if n == 0:
        return None
    observed = sum(1 for x, y in zip(a, b, strict=True) if x == y) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[c] * cb[c] for c in set(ca) | set(cb)) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1 - expected)


def compare(mine: Mapping[Key, Decision], theirs: Mapping[Key, Decision]) -> Agreement:
    common = [k for k in mine if k in theirs]
    a = [mine[k].decision for k in common]
    b = [theirs[k].decision for k in common]
    dis = [
        (k, mine[k].decision, theirs[k].decision) for k in common if mine[k].decision != theirs[k].decision
    ]
    return Agreement(
        both=len(common), agreed=len(common) - len(dis), kappa=cohen_kappa(a, b), disagreements=dis
    )
