"""Selecting the best configuration (docs/statistics.md, "Selection"): pure array functions.

Hsu's constrained multiple comparisons with the best (MCB), built from pairwise terms
(`pair_terms`: Welch, or within co-run groups) with Bonferroni critical values so that
variances may differ between configurations:
simultaneous intervals for theta_i - max_{j != i} theta_j, the subset not distinguishable
from the best, and the configurations proven within the margin delta of the best. Across
looks the level is spent in increments (`spend`), configurations proven more than delta worse
than another are eliminated, and a group stops once its choice cannot change. Every function
broadcasts over leading batch axes, so calibration simulates many experiments in one call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.stats as st
from numpy.typing import NDArray

from bench.stats.methods import obf_spent
from bench.stats.select.pair_terms import PairTerms, grouped_terms, pair_terms

F = NDArray[np.float64]
B = NDArray[np.bool_]


def spend(looks: tuple[int, ...], alpha: float) -> tuple[float, ...]:
    """The level each look tests at: increments of the O'Brien-Fleming-type spending function
    2 - 2 Phi(z_(1 - alpha/2) / sqrt(t)), t = n_look / n_last (Lan and DeMets 1983). They sum
    to alpha, so a union bound over the looks holds whatever the looks' correlation."""
    spent = obf_spent(np.asarray(looks, dtype=np.float64) / looks[-1], alpha)
    return tuple(float(x) for x in np.diff(np.concatenate([[0.0], spent])))


@dataclass(frozen=True)
class Mcb:
    """Constrained MCB at one look; axes (..., K)."""

    upper: F  # U_i >= 0: upper end for theta_i - max_{j != i} theta_j
    lower: F  # L_i <= 0: its lower end
    free_upper: F  # min_j (d_ij + t se_ij), unconstrained: < -delta means clearly worse
    subset: B  # not distinguishable from the best (U_i > 0)


def mcb(terms: PairTerms, active: B, level: float) -> Mcb:
    """Hsu's constrained MCB over the active configurations at one-sided `level`: each of
    the K - 1 comparisons with the true best holds at level / (K - 1) (Bonferroni, Welch t),
    and on that event every interval covers (Hsu 1996, Thm 4.1.1, pairwise form)."""
    k_active = active.sum(axis=-1)
    m = np.maximum(k_active - 1, 1)[..., None, None]
    d, se, df = terms.d, terms.se, terms.df
    t = st.t.ppf(1.0 - level / m, df)
    other = active[..., None, :] & ~np.eye(terms.mean.shape[-1], dtype=bool)
    hi = np.where(other, d + t * se, np.inf)
    free_upper = hi.min(axis=-1)
    upper = np.where(active, np.maximum(free_upper, 0.0), 0.0)
    subset = active & (upper > 0)
    lo = np.where(other & subset[..., None, :], d - t * se, np.inf)
    alone = (subset.sum(axis=-1) == 1)[..., None] & subset
    lower = np.where(alone, 0.0, np.minimum(lo.min(axis=-1), 0.0))
    lower = np.where(active, lower, -np.inf)
    return Mcb(upper, lower, np.where(active, free_upper, -np.inf), subset)


def choose(
    mean: F, fit: Mcb, active: B, cost: F, margin: float, cheapest: bool
) -> NDArray[np.int64]:
    """Index of the configuration to ship, -1 when none is proven within `margin` of the
    best. cheapest: the lowest cost among the proven ones (ties: the better estimate);
    else the best estimate among them."""
    proven = active & (fit.lower >= -margin)
    score = np.where(proven, -cost * 1e6 + mean if cheapest else mean, -np.inf)
    pick = score.argmax(axis=-1)
    out: NDArray[np.int64] = np.where(proven.any(axis=-1), pick, -1)
    return out


@dataclass(frozen=True)
class Look:
    """One look's outcome; axes (..., K) or (...)."""

    fit: Mcb
    chosen: NDArray[np.int64]
    eliminated: B  # active before the look, dropped at it
    stop: B  # the group's choice cannot change with more boots (or last look)


def look(
    terms: PairTerms,
    active: B,
    cost: F,
    *,
    level: float,
    margin: float,
    cheapest: bool,
    last: bool,
) -> Look:
    """The selection at one look: MCB, the choice, and what is dropped. Eliminated: proven
    more than `margin` worse than another active configuration (it can be neither the best
    nor within the margin of it). Stop: one configuration left; or the chosen one is proven
    and no active configuration is cheaper (cheapest) / the subset is the chosen alone."""
    fit = mcb(terms, active, level)
    chosen = choose(terms.mean, fit, active, cost, margin, cheapest)
    # At the last look nothing is dropped: every configuration keeps its final interval.
    eliminated = active & (fit.free_upper < -margin) & (not last)
    left = active & ~eliminated
    has = chosen >= 0
    idx = np.maximum(chosen, 0)[..., None]
    chosen_cost = np.take_along_axis(cost, idx, axis=-1)[..., 0]
    if cheapest:
        settled = has & ~np.any(left & (cost < chosen_cost[..., None]), axis=-1)
    else:
        settled = has & (fit.subset.sum(axis=-1) == 1)
    stop = settled | (left.sum(axis=-1) <= 1) | last
    return Look(fit, chosen, eliminated, np.asarray(stop))


@dataclass(frozen=True)
class Replay:
    """Looks taken on boot values (..., K, B) in launch order; axes (..., K) or (...)."""

    taken: NDArray[np.int64]  # looks taken (0: none reached)
    stopped: B  # the design stopped (its choice cannot change, or the last look)
    chosen: NDArray[np.int64]  # at the last look taken, -1: none
    eliminated_at: NDArray[np.int64]  # 1-based look an arm was dropped at, 0: never
    boots: NDArray[np.int64]  # boots per arm the design ran (at its drop or the last look)
    lower: F  # MCB interval at the last look taken (-inf: inactive there)
    upper: F
    subset: B
    mean: F  # on the first n boots of the last look taken (NaN: none)
    level: F  # the last look's level (NaN: none)


def boot_stats(values: F, n: int | None = None) -> tuple[F, F, F]:
    """Per configuration, mean, variance and count of the first `n` finite boot values
    (all with n None); NaN pads missing boots."""
    cut = values[..., :n]
    ok = np.isfinite(cut)
    cnt = ok.sum(axis=-1).astype(np.float64)
    x = np.where(ok, cut, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = x.sum(axis=-1) / cnt
        var = (np.where(ok, cut - mean[..., None], 0.0) ** 2).sum(axis=-1) / (cnt - 1)
    return mean, var, cnt


def replay_looks(
    values: F,
    cost: F,
    looks: tuple[int, ...],
    levels: tuple[float, ...],
    *,
    margin: float,
    cheapest: bool,
    fixed: bool = False,
    groups: NDArray[np.int64] | None = None,
) -> Replay:
    """Run the design over planned looks; a look is reached when every active arm has n
    finite boot values (NaN pads the missing; `fixed`: one look over every boot, however
    many each arm has; `groups`: (K, B) co-run group codes by boot index, -1 alone, to
    compare within them, see `pair_terms`). The one implementation run-ab's eliminations,
    analyze and the calibration use."""
    shape = values.shape[:-1]
    # With looks every arm counts from the start (a look waits for its boots); a fixed
    # design compares the arms that have the two boots a variance needs.
    active = np.isfinite(values).sum(axis=-1) >= 2 if fixed else np.ones(shape, dtype=bool)
    done = np.zeros(shape[:-1], dtype=bool)
    taken = np.zeros(shape[:-1], dtype=np.int64)
    gone = np.zeros(shape, dtype=np.int64)
    boots = np.zeros(shape, dtype=np.int64)
    chosen = np.full(shape[:-1], -1, dtype=np.int64)
    lower, upper = np.full(shape, -np.inf), np.full(shape, -np.inf)
    subset, mean_out = np.zeros(shape, dtype=bool), np.full(shape, np.nan)
    level_out = np.full(shape[:-1], np.nan)
    stopped = np.zeros(shape[:-1], dtype=bool)
    for i, n in enumerate(looks if shape[-1] else ()):  # no arm: no look is taken
        mean, var, cnt = boot_stats(values, n)
        terms = pair_terms(mean, var, cnt)
        if groups is not None:
            terms = grouped_terms(values, groups, active, n, terms)
        reached = ~done & (fixed | np.all(~active | (cnt >= n), axis=-1))
        done |= ~reached
        if not reached.any():
            break
        out = look(terms, active, cost, level=levels[i], margin=margin,
                   cheapest=cheapest, last=i == len(looks) - 1)  # fmt: skip
        r = reached[..., None]
        taken = np.where(reached, i + 1, taken)
        chosen = np.where(reached, out.chosen, chosen)
        lower, upper = np.where(r, out.fit.lower, lower), np.where(r, out.fit.upper, upper)
        subset = np.where(r, out.fit.subset, subset)
        mean_out = np.where(r, terms.mean, mean_out)
        level_out = np.where(reached, levels[i], level_out)
        boots = np.where(r & active, cnt.astype(np.int64), boots)
        gone = np.where(r & out.eliminated, i + 1, gone)
        active = active & ~(r & out.eliminated)
        stopped |= reached & out.stop
        done |= reached & out.stop
    return Replay(taken, stopped, chosen, gone, boots, lower, upper, subset, mean_out, level_out)


def boots_to_select(sd: float, margin: float, k: int, level: float, power: float = 0.95) -> int:
    """Boots per configuration at which the best, when it leads every other one by the
    margin, is proven within the margin with probability >= power (Bonferroni over the K - 1
    comparisons; boot SD `sd` on the selection's scale, the largest of the group's)."""
    if not (sd > 0 and margin > 0 and k >= 2):
        return 2
    z = float(st.norm.ppf(1.0 - (1.0 - power) / (k - 1)))
    for b in range(2, 1000):
        t = float(st.t.ppf(1.0 - level / (k - 1), b - 1))  # Welch df >= b - 1
        if 2.0 * margin / (sd * np.sqrt(2.0 / b)) >= t + z:
            return b
    return 1000
