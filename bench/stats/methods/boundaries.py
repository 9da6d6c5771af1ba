"""Sequential design: planned looks with O'Brien-Fleming boundaries (docs/statistics.md).

Looks are boots per arm (e.g. 3, 6, 10). Alpha is spent with the Lan-DeMets O'Brien-Fleming
function alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)), t = n_look / n_last. Boundaries are
exact: the first in closed form (c_1 = z_{1-alpha/2} / sqrt(t_1)), the others by numerical
integration of the look statistics (a Brownian motion at the information fractions) over the
continuation region (Armitage, McPherson & Rowe 1969), each solved so that the probability of
first crossing at that look is the alpha spent there. At a look the primary family is tested
at the look's nominal level (Holm inside it); a comparison is decided when its verdict is a
difference or `equivalent`. Re-testing after every boot inflates the false-positive rate and
is not offered.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from scipy import optimize
from scipy import stats as st

from bench.stats.methods.family import Family
from bench.stats.methods.verdicts import CLAIMS, EQUIVALENT

GRID = 401  # Simpson nodes; boundaries agree with 2001 nodes to 1e-8


def _simpson(a: float, b: float, n: int = GRID) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    x = np.linspace(a, b, n)
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return x, w * (x[1] - x[0]) / 3.0


def _excess(
    b: float, x: NDArray[np.float64], mass: NDArray[np.float64], sig: float, target: float
) -> float:
    """P(first crossing of +-b at this look) - target, from the continuation mass at x."""
    tails = st.norm.sf((b - x) / sig) + st.norm.cdf((-b - x) / sig)
    return float(np.sum(mass * tails)) - target


def obf_spent(t: NDArray[np.float64], alpha: float) -> NDArray[np.float64]:
    """The Lan-DeMets O'Brien-Fleming-type spending function: the level spent by
    information fraction t, 2 - 2 Phi(z_(1 - alpha/2) / sqrt(t)) (Lan and DeMets 1983)."""
    out: NDArray[np.float64] = 2.0 - 2.0 * st.norm.cdf(st.norm.isf(alpha / 2.0) / np.sqrt(t))
    return out


def linear_spent(t: NDArray[np.float64], alpha: float) -> NDArray[np.float64]:
    """Linear spending, alpha * t (the power family with rho = 1, Kim and DeMets 1987): a
    share of the level at every look in proportion to its boots, so a large difference is
    decided at the first look; O'Brien–Fleming keeps almost all of it for the last."""
    out: NDArray[np.float64] = alpha * np.asarray(t, dtype=np.float64)
    return out


SPENDING = {"obrien_fleming": obf_spent, "linear": linear_spent}


@lru_cache(maxsize=64)
def obf_boundaries(
    looks: tuple[int, ...], alpha: float, spending: str = "obrien_fleming"
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(z boundaries, nominal two-sided alpha) per look, two-sided, for the Lan-DeMets
    spending function `spending` (O'Brien–Fleming by default; "linear": alpha * t)."""
    n = np.asarray(looks, dtype=np.float64)
    if n.size == 0 or np.any(np.diff(n) <= 0) or n[0] < 1:
        raise ValueError("looks must be strictly increasing positive boot counts")
    t = n / n[-1]
    spent = SPENDING[spending](t, alpha)
    # On the Brownian scale S = Z sqrt(t) the first boundary spends exactly spent[0].
    first = float(st.norm.isf(spent[0] / 2.0)) * float(np.sqrt(t[0]))
    bounds = [first]
    x, w = _simpson(-first, first)
    dens = st.norm.pdf(x, scale=np.sqrt(t[0]))  # density of S_1 where no boundary was crossed
    for i in range(1, n.size):
        sig = float(np.sqrt(t[i] - t[i - 1]))
        target = float(spent[i] - spent[i - 1])
        mass = w * dens
        b = float(optimize.brentq(_excess, 1e-9, 40.0, args=(x, mass, sig, target), xtol=1e-14))
        bounds.append(b)
        nx, nw = _simpson(-b, b)
        dens = st.norm.pdf((nx[:, None] - x[None, :]) / sig) @ mass / sig
        x, w = nx, nw
    z = np.asarray(bounds) / np.sqrt(t)
    return tuple(float(c) for c in z), tuple(float(2.0 * st.norm.sf(c)) for c in z)


def look_index(looks: tuple[int, ...], boots: int) -> int | None:
    """0-based index of the last look reached with `boots` per arm, None before the first."""
    reached = [i for i, n in enumerate(looks) if boots >= n]
    return reached[-1] if reached else None


STATUSES = ("difference", "equivalent", "undecided")


def look_status(fam: Family) -> NDArray[np.int64]:
    """Per comparison at a look: 0 difference, 1 equivalent, 2 undecided (index STATUSES).
    Read off the verdicts, so the table and the sequential decision cannot disagree."""
    claim = np.isin(fam.code, CLAIMS)
    out: NDArray[np.int64] = np.where(claim, 0, np.where(fam.code == EQUIVALENT, 1, 2))
    return out


def design_stops(status: NDArray[np.int64], last: bool) -> NDArray[np.bool_]:
    """The stop rule at a look, for the product and its calibration alike: every comparison
    decided (no status 2, undecided), or the last planned look."""
    out: NDArray[np.bool_] = np.all(status < 2, axis=-1) | last
    return out
