"""How a search runs: the history's length, its error rate and how it spends boots."""

from __future__ import annotations

from dataclasses import dataclass

from bench.records import LOOKS, planned_boots


@dataclass(frozen=True)
class BisectSettings:
    """How a search runs: the history's length, its error rate and how it spends boots."""

    n_points: int
    alpha: float = 0.05
    endpoint_looks: tuple[int, ...] = LOOKS
    first: int = 1  # boots at a point's first visit (the spread is pooled over all points)
    cap: int = 10  # search boots at one inner point at most (confirmation boots come on top)
    slots: int = 1  # points booted at once
    max_boots: int = 400
    # smallest change worth finding (below, above zero, on the comparison's scale); None:
    # any change that reproduces
    margin: tuple[float, float] | None = None
    propose_at: float = 0.9  # posterior at which a candidate is put to its confirmation
    attempts: int = 3  # confirmations at most (their levels sum to alpha)

    @property
    def most_boots(self) -> int:
        """Boots any point may take: its search boots, then one confirmation's fresh boots."""
        return planned_boots(self.cap, self.endpoint_looks)
