"""Whose boots give a screening look its spread (`spread = "pooled"`, what new screenings
record): one boot SD pooled over the baseline and every candidate, so that the first look
at 3 boots a side has 2 (m + 1) degrees of freedom instead of Welch's ≈ 4, and a candidate
far from the baseline is decided there.

Two guards keep the rates where spreads differ between arms (calibrated by simulation in
tests/unit/test_screen_spread.py and docs/statistics.md):
- a pair's SE is never below its own (Welch's, with equal boots a side), so a candidate
  noisier than the others is not judged by their spread;
- a baseline whose spread is larger than the candidates' (one-sided F test at
  `BASELINE_SPREAD_LEVEL`) makes the look fall back to Welch for every pair: the baseline
  is in every comparison, so pooling it away would narrow them all.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.stats as st
from numpy.typing import NDArray

F = NDArray[np.float64]
Ints = NDArray[np.int64]

# The F test's level for "the baseline is noisier than the candidates": at 0.1 the false
# lowered and false cleared rates stay ≤ 0.054 (alpha 0.05) with the baseline's SD up to 3×
# the candidates' (4,000 screenings a cell); 0.25 keeps them lower and decides fewer at
# the first look.
BASELINE_SPREAD_LEVEL = 0.1


def pooled_spread(
    cands: F, base: F, look: Ints, n: int, looks: tuple[int, ...], se_pair: F, df_pair: F
) -> tuple[F, F, NDArray[np.bool_]]:
    """Each candidate's SE and df at a look of n boots a side, and whether the pooled spread
    gave them (False: the baseline is noisier, each pair's Welch). The boots in hand: the
    baseline's n, every undecided candidate's n and each decided candidate's up to the look
    that decided it (what the driver booted). `se_pair`, `df_pair`: each pair's Welch."""
    held = np.where(look >= 0, np.asarray(looks)[np.maximum(look, 0)], n)  # (..., m)
    ss_c, df_c = _sum_of_squares(cands[..., :n], held)
    ss_b, df_b = _sum_of_squares(base[..., None, :n], np.full((*held.shape[:-1], 1), n))
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt((ss_c + ss_b) / (df_c + df_b))
        noisier = ss_b / df_b / (ss_c / df_c) > st.f.ppf(1 - BASELINE_SPREAD_LEVEL, df_b, df_c)
    se = np.maximum(sd[..., None] * math.sqrt(2 / n), se_pair)
    df = np.broadcast_to(np.asarray(df_c + df_b, np.float64)[..., None], se.shape)
    fall_back = np.broadcast_to(noisier[..., None], se.shape)
    return np.where(fall_back, se_pair, se), np.where(fall_back, df_pair, df), ~fall_back


def _sum_of_squares(arms: F, counts: Ints) -> tuple[F, Ints]:
    """Over arms (..., k, n) with each arm's first `counts` boots: the summed squared
    deviations from each arm's own mean, and its degrees of freedom."""
    kept = np.arange(arms.shape[-1]) < counts[..., None]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(kept, arms, 0.0).sum(axis=-1) / counts
        ss = np.where(kept, (arms - mean[..., None]) ** 2, 0.0).sum(axis=(-2, -1))
    return ss, (counts - 1).sum(axis=-1)
