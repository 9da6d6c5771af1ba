"""Sequential design: planned looks with O'Brien-Fleming boundaries (STATISTICS.md).

Looks are boots per arm (e.g. 3, 6, 10). Alpha is spent with the Lan-DeMets O'Brien-Fleming
function alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)), t = n_look / n_last; the boundary
z values come from a fixed-seed simulation of the look statistics (a Brownian motion at the
information fractions) and are turned into a nominal two-sided level per look. At a look a
comparison stops for a difference when its Holm-adjusted p is below that level, and for
equivalence when its (1 - 2 level) interval lies inside the margin. Re-testing after every
boot without this spending inflates the false-positive rate and is not offered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import stats as st

from bench.stats._compare import arm_metric, comparisons
from bench.stats._data import METRICS, ArmData, Settings


@lru_cache(maxsize=64)
def obf_boundaries(
    looks: tuple[int, ...], alpha: float, draws: int = 400_000, seed: int = 0
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(z boundaries, nominal two-sided alpha) per look for Lan-DeMets O'Brien-Fleming."""
    n = np.asarray(looks, dtype=np.float64)
    if n.size == 0 or np.any(np.diff(n) <= 0) or n[0] < 1:
        raise ValueError("looks must be strictly increasing positive boot counts")
    t = n / n[-1]
    z_half = st.norm.ppf(1.0 - alpha / 2.0)
    spent = 2.0 - 2.0 * st.norm.cdf(z_half / np.sqrt(t))
    rng = np.random.default_rng(seed)
    inc = rng.standard_normal((draws, n.size)) * np.sqrt(np.diff(np.concatenate([[0.0], t])))
    z = np.abs(np.cumsum(inc, axis=1) / np.sqrt(t))
    alive = np.ones(draws, dtype=bool)
    bounds, nominal = [], []
    prev = 0.0
    for i in range(n.size):
        target = (spent[i] - prev) * draws  # paths that may newly cross at this look
        zi = np.sort(z[alive, i])[::-1]
        c = float(zi[int(target)]) if target >= 1 and int(target) < zi.size else float(zi[0])
        bounds.append(c)
        nominal.append(float(2.0 * st.norm.sf(c)))
        alive &= z[:, i] < c
        prev = spent[i]
    return tuple(bounds), tuple(nominal)


@dataclass(frozen=True)
class Decision:
    """What a sequential design says at the current look."""

    action: str  # "stop" | "continue"
    reason: str
    boots_per_arm: int
    look: int | None  # 1-based index of the look reached, None before the first
    looks: tuple[int, ...]
    next_look: int | None  # boots per arm at the next look, None when stopping
    nominal_alpha: float | None
    comparisons: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "reason": self.reason,
            "boots_per_arm": self.boots_per_arm,
            "look": self.look,
            "looks": list(self.looks),
            "next_look": self.next_look,
            "nominal_alpha": self.nominal_alpha,
            "comparisons": self.comparisons,
        }


def sequential_status(
    p_adjusted: np.ndarray[Any, Any],
    lo2: np.ndarray[Any, Any],
    hi2: np.ndarray[Any, Any],
    margin: np.ndarray[Any, Any] | float,
    level: float,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Per comparison: (difference at this look, equivalence at this look); vectorized.

    `lo2`/`hi2` must be the (1 - 2 level) interval."""
    diff = np.nan_to_num(p_adjusted, nan=1.0) < level
    equiv = (lo2 > -margin) & (hi2 < margin) & ~diff
    return diff, equiv


def look_index(looks: tuple[int, ...], boots: int) -> int | None:
    """0-based index of the last look reached with `boots` per arm, None before the first."""
    reached = [i for i, n in enumerate(looks) if boots >= n]
    return reached[-1] if reached else None


def decide_data(
    data: dict[str, ArmData], arms: list[str], s: Settings, prior: dict[str, float]
) -> Decision:
    """Decision at the last look reached, using the first n_look boots of every arm."""
    looks = s.looks or ()
    b_now = min(data[a].n_boots for a in arms)
    idx = look_index(looks, b_now)
    if idx is None:
        return Decision(
            "continue",
            f"{b_now} boots per arm; the first planned look is at {looks[0]}",
            b_now,
            None,
            looks,
            looks[0],
            None,
        )
    n = looks[idx]
    _, nominal = obf_boundaries(looks, s.alpha)
    level = nominal[idx]
    head = {a: data[a].head(n) for a in arms}
    stats = {(a, m): arm_metric(head[a], m, prior) for a in arms for m in METRICS}
    comps = comparisons(stats, arms, s.baseline, level, s.margins)
    p_adj = np.array([np.nan if c["p_adjusted"] is None else c["p_adjusted"] for c in comps])
    tost = [c["tost_ci"] or [np.nan, np.nan] for c in comps]
    lo2 = np.array([t[0] for t in tost], dtype=np.float64)
    hi2 = np.array([t[1] for t in tost], dtype=np.float64)
    margin = np.array([c["margin"] for c in comps], dtype=np.float64)
    diff, equiv = sequential_status(p_adj, lo2, hi2, margin, level)
    det = np.array([c["deterministic"] for c in comps], dtype=bool)
    rows = []
    for c, dflag, eflag, dt in zip(comps, diff, equiv, det, strict=True):
        if dt:  # no run-to-run variance: the exact difference decides at once
            dflag, eflag = c["difference"] != 0, c["difference"] == 0
        status = "difference" if dflag else "equivalent" if eflag else "undecided"
        rows.append(
            {
                "arm": c["arm"],
                "metric": c["metric"],
                "difference": c["difference"],
                "p_adjusted": c["p_adjusted"],
                "status": status,
                "verdict": c["verdict"],
            }
        )
    undecided = [r for r in rows if r["status"] == "undecided"]
    last = idx == len(looks) - 1
    where = f"look {idx + 1} of {len(looks)} ({n} boots/arm, nominal alpha {level:.3g})"
    if not undecided:
        return Decision(
            "stop", f"every comparison decided at {where}", b_now, idx + 1, looks, None, level, rows
        )
    if last:
        return Decision(
            "stop",
            f"final {where}: verdicts stand as analyzed",
            b_now,
            idx + 1,
            looks,
            None,
            level,
            rows,
        )
    names = ", ".join(f"{r['arm']}/{r['metric']}" for r in undecided)
    return Decision(
        "continue",
        f"{names} undecided at {where}",
        b_now,
        idx + 1,
        looks,
        looks[idx + 1],
        level,
        rows,
    )
