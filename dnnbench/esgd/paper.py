"""The only published ESGD numbers we have, and an honest comparison with ours.

Tao and Li, "eSGD: Communication Efficient Distributed Deep Learning on the Edge", USENIX HotEdge
2018, abstract: on MNIST, accuracy 91.2 % at a 50 % drop ratio, 86.7 % at 75 %, 81.5 % at 87.5 %.
Their model, data size, number of workers and training length are not known to us; ours are in
:class:`dnnbench.esgd.study.StudyConfig`. A difference is therefore a fact about two different
set-ups, not a validation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .. import checks as v

PAPER_CITATION = ("Tao and Li, eSGD: Communication Efficient Distributed Deep Learning on the Edge, "
                  "USENIX HotEdge 2018 (abstract)")

#: MNIST test accuracy by drop ratio, from the paper's abstract (the paper's numbers).
PAPER_MNIST_ACCURACY: dict[float, float] = {0.5: 0.912, 0.75: 0.867, 0.875: 0.815}


@dataclass(frozen=True)
class PaperComparison:
    """Our accuracy beside the paper's at one drop ratio."""

    drop_ratio: float
    paper_accuracy: float
    our_accuracy: float
    tolerance_points: float = 0.5  # within this many percentage points counts as "about equal"

    @property
    def difference_points(self) -> float:
        """Ours minus the paper's, in percentage points."""
        return 100.0 * (self.our_accuracy - self.paper_accuracy)

    @property
    def verdict(self) -> str:
        """"higher", "lower" or "about equal" (ours relative to the paper's)."""
        if abs(self.difference_points) <= self.tolerance_points:
            return "about equal"
        return "higher" if self.difference_points > 0 else "lower"

    def sentence(self) -> str:
        """One line for the report, computed from the numbers."""
        side = {"higher": "better than", "lower": "worse than", "about equal": "about equal to"}[self.verdict]
        return (f"At a {100 * self.drop_ratio:g} % drop ratio our reconstruction reaches "
                f"{100 * self.our_accuracy:.1f} %, {side} the paper's {100 * self.paper_accuracy:.1f} % "
                f"({self.difference_points:+.1f} points).")


def compare_with_paper(our_accuracy_by_drop: Mapping[float, float],
                       tolerance_points: float = 0.5) -> list[PaperComparison]:
    """Comparisons at the paper's drop ratios that ``our_accuracy_by_drop`` also covers."""
    v.number("tolerance_points", tolerance_points, low=0.0)
    ours = {round(float(k), 6): float(a) for k, a in our_accuracy_by_drop.items()}
    return [PaperComparison(drop, paper, ours[drop], tolerance_points)
            for drop, paper in PAPER_MNIST_ACCURACY.items() if drop in ours]


__all__ = ["PAPER_CITATION", "PAPER_MNIST_ACCURACY", "PaperComparison", "compare_with_paper"]
