"""An answer when the budget ends (docs/statistics.md, "When the budget ends"): for a group
the selection leaves undecided, the best estimate and the probability that it is within the
margin of the true best. Pure array functions, broadcasting over leading batch axes like
`mcb`, so the calibration simulates many sweeps through this very code.

Each configuration's mean gets its own posterior from its boots: with the reference prior
(flat in the mean and the log SD) it is mean + SE * t(n - 1), so a configuration with few
or scattered boots is uncertain in proportion. The posteriors are independent, hence

    P(best estimate b within delta of the best) = P(mu_j <= mu_b + delta for every j)
                                                = E over mu_b of prod_j F_j(mu_b + delta),

a one-dimensional integral, evaluated on a fixed grid of mu_b's quantiles: no random draws,
the same answer on every machine up to float rounding. This is a statement about boot-to-boot
noise given the data, not a guarantee: "chosen" keeps the guarantee, this is the bet.

Each SE is widened by SE_WIDEN first. The best estimate is the largest of several noisy means,
so its lead is overstated (the winner's curse) and the plain posterior was up to 0.12 too
sure where one configuration leads the others by little more than the margin; 1.3 is the
smallest widening (in steps of 0.1) at which every family of the calibration, and three
families held out of it, states at most 0.05 more than it realizes (docs/statistics.md).
Where the configurations are close it is conservative.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.stats as st
from numpy.typing import NDArray

from bench.stats.select.mcb import boot_stats

F = NDArray[np.float64]
B = NDArray[np.bool_]
_NODES = (np.arange(2000, dtype=np.float64) + 0.5) / 2000  # midpoints of the quantile scale
SE_WIDEN = 1.3  # against the winner's curse (see the module docstring)


@dataclass(frozen=True)
class BestGuess:
    """Axes (...): the best estimate's index (-1: fewer than two configurations with two
    boots) and the probability it is within the margin of the true best."""

    best: NDArray[np.int64]
    probability: F


def posterior_terms(values: F) -> tuple[F, F, F, B]:
    """Per configuration (..., K) from boot values (..., K, B) with NaN for missing boots:
    mean, SE of the mean (widened by SE_WIDEN), degrees of freedom, and whether it has the
    two boots a variance needs."""
    mean, var, n = boot_stats(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(var / n)
    usable = n >= 2
    # Identical boots (SE 0): the mean is known to float precision, not exactly.
    se = np.where(usable, np.maximum(se, 1e-12 * np.maximum(np.abs(mean), 1.0)), np.nan)
    return mean, se * SE_WIDEN, np.maximum(n - 1, 1.0), usable


def best_guess(values: F, margin: float, active: B | None = None) -> BestGuess:
    """The best estimate among the active configurations with two or more boots, and
    P(it is within `margin` of the true best) under independent reference posteriors."""
    mean, se, df, usable = posterior_terms(values)
    live = usable if active is None else usable & active
    score = np.where(live, mean, -np.inf)
    best = score.argmax(axis=-1)
    enough = live.sum(axis=-1) >= 2
    idx = best[..., None]
    m_b = np.take_along_axis(np.where(live, mean, 0.0), idx, axis=-1)
    s_b = np.take_along_axis(np.where(live, se, 1.0), idx, axis=-1)
    d_b = np.take_along_axis(df, idx, axis=-1)
    # mu_b at each node: (..., N); every other configuration's CDF there: (..., K, N)
    mu_b = m_b + s_b * st.t.ppf(_NODES, d_b)
    z = (mu_b[..., None, :] + margin - mean[..., :, None]) / np.where(live, se, 1.0)[..., None]
    cdf = st.t.cdf(z, df[..., None])
    others = live & (np.arange(live.shape[-1]) != idx)
    cdf = np.where(others[..., None], cdf, 1.0)
    probability = np.prod(cdf, axis=-2).mean(axis=-1)
    out_best: NDArray[np.int64] = np.where(enough, best, -1)
    return BestGuess(out_best, np.where(enough, probability, np.nan))


def more_boots(needed: int | None, have: int) -> int | None:
    """Boots per configuration still to run before the plan would prove a choice."""
    return None if needed is None else max(needed - have, 0)
