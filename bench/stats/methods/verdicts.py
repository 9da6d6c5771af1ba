"""The six verdicts (docs/statistics.md) from the interval a claim rests on, the (1 - 2 alpha) TOST
interval and the margin, as codes into `VERDICTS`; vectorized."""

from __future__ import annotations

from typing import get_args

import numpy as np
from numpy.typing import NDArray

from bench.stats.methods.ratio_estimates import X
from bench.stats.schema import Verdict

# The names, in code order, are the contract's (`Comparison.verdict`), defined there once.
VERDICTS: tuple[str, ...] = get_args(Verdict)
IMPROVED, REGRESSED, SMALL_IMP, SMALL_REG, EQUIVALENT, INCONCLUSIVE = range(6)
CLAIMS = (IMPROVED, REGRESSED, SMALL_IMP, SMALL_REG)
CLAIMED = frozenset(VERDICTS[c] for c in CLAIMS)  # the verdicts that claim a difference


def verdict_codes(
    diff: X,
    lo: X,
    hi: X,
    lo2: X,
    hi2: X,
    margin: X,
    claimed: NDArray[np.bool_] | None = None,
    margin_down: X | None = None,
) -> NDArray[np.int64]:
    """The verdicts (codes index VERDICTS) from the interval [lo, hi] a claim rests on, the
    (1-2a) TOST interval [lo2, hi2] and the margin (+margin above 0, -margin_down below it;
    margin_down defaults to margin; a log-ratio metric with a relative margin d has
    log(1 + d) above and -log(1 - d) below). `claimed` (a difference is declared) defaults
    to 0 outside [lo, hi]. NaN intervals give `inconclusive`."""
    up = margin
    down = margin if margin_down is None else margin_down
    diff = np.asarray(diff, dtype=np.float64)
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    lo2, hi2 = np.asarray(lo2, dtype=np.float64), np.asarray(hi2, dtype=np.float64)
    claim: NDArray[np.bool_] = (lo > 0) | (hi < 0) if claimed is None else np.asarray(claimed)
    out = np.full(diff.shape, INCONCLUSIVE, dtype=np.int64)
    equiv = (lo2 > -down) & (hi2 < up)
    gain, loss = claim & (diff > 0), claim & (diff < 0)
    # Written in reverse priority so that earlier rules overwrite later ones.
    out = np.where(loss, SMALL_REG, out)
    out = np.where(gain, SMALL_IMP, out)
    out = np.where(equiv, EQUIVALENT, out)
    out = np.where(gain & (lo <= up) & (hi > up), SMALL_IMP, out)
    out = np.where(loss & (hi >= -down) & (lo < -down), SMALL_REG, out)
    out = np.where(gain & (lo > up), IMPROVED, out)
    out = np.where(loss & (hi < -down), REGRESSED, out)
    return out
