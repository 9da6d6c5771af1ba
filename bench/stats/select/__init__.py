"""Choosing the best configuration of a sweep: constrained multiple comparisons with the
best on boot values (`mcb`, pure arrays, from `pair_terms`: Welch, or within co-run groups
for speed), the looks replayed per selection group exactly as
run-ab took them (`replay`), the choice, what to paste and a dynamic-speculation
schedule across concurrency levels (`choice`), and, when a group stays undecided, the best
estimate with the probability that it is within the margin of the best (`best_guess`)."""

from bench.stats.select.best_guess import best_guess
from bench.stats.select.choice import selection, selection_dropped, sweep_looks
from bench.stats.select.mcb import boots_to_select, mcb, replay_looks, spend
from bench.stats.select.pair_terms import pair_terms

__all__ = [
    "best_guess", "boots_to_select", "mcb", "pair_terms", "replay_looks", "selection",
    "selection_dropped", "spend", "sweep_looks",
]  # fmt: skip
