"""Duet pairing of speed: boots measured at the same time on one host (a co-run group,
`bench.stats.inputs.co_runs`) share what the machine did in those seconds, so arms are
compared within the groups: one least-squares fit over every arm's boots,

    log tokens/s = arm + group (+ slot, where recorded and varying),

a boot that ran alone being a group of its own (it informs nothing). A contrast arm -
baseline is estimable when the groups connect the two arms (directly, or through other arms,
as in an incomplete-block design); its SE comes from the pooled residual on n - rank df.
Groups are nested in hosts, so this also adjusts for hosts. Acceptance is never paired: its
noise is the engine's seed, not the machine's.

Calibrated by simulation through this code (tests/unit/test_duets.py): A/A false claims
stay within alpha with shared time effects, a slower slot, groups broken by failed boots and
heavy-tailed group effects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from bench.records import SPEED_METRIC
from bench.stats.compare.hosts import host_effect_p, pseudo_pair
from bench.stats.inputs import ArmData, boot_values
from bench.stats.methods import Est

F = NDArray[np.float64]
MIN_DF = 3  # residual df a paired comparison needs (fewer: t quantiles explode; unpaired)


def _dummies(values: Sequence[str], levels: Sequence[str]) -> F:
    return np.array([[float(v == lv) for lv in levels] for v in values]).reshape(len(values), -1)


@dataclass(frozen=True)
class _Fit:
    """y = arm + group (+ slot) by least squares over y's last axis (leading axes: batches
    sharing one design)."""

    names: list[str]  # arms, in first-seen order: column j is names[j]
    x: F
    pinv: F
    beta: F  # (..., columns)
    s2: F  # (...): residual variance
    xtx: F  # pinv(X'X)
    df: float

    def contrast(self, i: int, j: int) -> tuple[F, F] | None:
        """Arm i - arm j and its SE, or None where the groups do not connect them."""
        c = np.zeros(self.x.shape[1])
        c[i], c[j] = 1.0, -1.0
        if not np.allclose(c @ self.pinv @ self.x, c, atol=1e-8):
            return None
        return self.beta @ c, np.sqrt(self.s2 * float(c @ self.xtx @ c))


def _fit(y: F, arms: Sequence[str], groups: Sequence[str], slots: Sequence[str] = ()) -> _Fit:
    names = list(dict.fromkeys(arms))
    parts = [_dummies(arms, names), _dummies(groups, sorted(set(groups))[1:])]
    if len(slots):
        parts.append(_dummies(slots, sorted(set(slots))[1:]))
    x = np.hstack(parts)
    df = float(x.shape[0] - int(np.linalg.matrix_rank(x)))
    pinv = np.asarray(np.linalg.pinv(x), dtype=np.float64)
    beta = y @ pinv.T
    resid = y - beta @ x.T
    s2 = (resid**2).sum(axis=-1) / df if df >= 1 else np.full(y.shape[:-1], np.nan)
    xtx = np.asarray(np.linalg.pinv(x.T @ x), dtype=np.float64)
    return _Fit(names, x, pinv, beta, s2, xtx, df)


def blocked_contrasts(
    y: F, arms: Sequence[str], groups: Sequence[str], slots: Sequence[str] = ()
) -> tuple[dict[str, tuple[F, F]], float]:
    """Fit y = arm + group (+ slot) by least squares over y's last axis (leading axes are
    batches: the calibration fits many experiments at once). Returns, for every arm after
    the first one listed (the baseline) that the groups connect to it, (arm - baseline, SE),
    and the residual df."""
    fit = _fit(y, arms, groups, slots)
    out: dict[str, tuple[F, F]] = {}
    for j, name in enumerate(fit.names[1:], start=1):
        if (got := fit.contrast(j, 0)) is not None:
            out[name] = got
    return out, fit.df


def pairwise_contrasts(
    y: F, arms: Sequence[str], groups: Sequence[str]
) -> tuple[list[str], F, F, float]:
    """Every pair of arms within co-run groups (the selection's MCB terms): the arms in
    first-seen order, d_ij = arm i - arm j (..., K, K) and its SE (inf where the groups do
    not connect i and j), and the residual df."""
    fit = _fit(y, arms, groups)
    k = len(fit.names)
    d = np.zeros((*y.shape[:-1], k, k))
    se = np.full((*y.shape[:-1], k, k), np.inf)
    for i in range(k):
        for j in range(k):
            if i != j and (got := fit.contrast(i, j)) is not None:
                d[..., i, j], se[..., i, j] = got
    return fit.names, d, se, fit.df


def _groups(ad: ArmData, tag: str) -> list[str]:
    """Each boot's co-run group; a boot that ran alone is a group of its own."""
    groups = ad.corun or [""] * ad.n_boots
    return [g or f"{tag}:alone:{i}" for i, g in enumerate(groups)]


def _speed_rows(
    data: Mapping[str, ArmData], arms: Sequence[str]
) -> tuple[F, list[str], list[str], list[str]]:
    """Every finite boot speed of these arms (log tokens/s) with its arm, co-run group and
    slot ("" where unrecorded)."""
    y, arm_of, group_of, slot_of = [], [], [], []
    for a in arms:
        v = boot_values(data[a], SPEED_METRIC)  # log tokens/s
        ok = np.isfinite(v)
        slots = data[a].slots or [""] * data[a].n_boots
        y += list(v[ok])
        arm_of += [a] * int(ok.sum())
        group_of += [g for g, k in zip(_groups(data[a], a), ok, strict=True) if k]
        slot_of += [s for s, k in zip(slots, ok, strict=True) if k]
    return np.asarray(y, dtype=np.float64), arm_of, group_of, slot_of


def duet_pairs(
    data: Mapping[str, ArmData],
    baseline: str,
    others: Sequence[str],
    est: Mapping[str, Mapping[str, Est]],
) -> dict[tuple[str, str], tuple[Est, Est]]:
    """(arm, speed) -> the pair to compare within co-run groups, for every arm the groups
    connect to the baseline with MIN_DF residual df; the others stay unpaired."""
    arms = [a for a in (baseline, *others) if SPEED_METRIC in est.get(a, {})]
    if baseline not in arms or not any(g for a in arms for g in data[a].corun):
        return {}
    values, arm_of, group_of, slot_of = _speed_rows(data, arms)
    fitted, df = blocked_contrasts(values, arm_of, group_of)
    if all(slot_of) and len(set(slot_of)) > 1:  # the slot as a covariate where it varies
        with_slot, df_slot = blocked_contrasts(values, arm_of, group_of, slot_of)
        if df_slot >= MIN_DF:
            fitted, df = with_slot, df_slot
    if df < MIN_DF:
        return {}
    out: dict[tuple[str, str], tuple[Est, Est]] = {}
    for arm in others:
        if arm in fitted and np.isfinite(fitted[arm][1]).all():
            diff, se = fitted[arm]
            out[(arm, SPEED_METRIC)] = pseudo_pair(
                np.asarray(diff), np.asarray(se), df, est[arm][SPEED_METRIC]
            )
    return out


def group_share(data: Mapping[str, ArmData], arms: Sequence[str]) -> tuple[float, float] | None:
    """How much of the boot-to-boot speed noise the co-run groups carry: 1 - the residual
    variance of log tokens/s with groups (arm + group) over the one without (arms only), each
    per residual df, floored at 0; and the residual df with groups (None: no co-run group, or
    no df left). Per df, because the groups' dummies take variance by chance: with no shared
    noise at all, 6 groups of the demo's 12 boots would take 62 % of the sum of squares.
    Near 1, comparisons within the groups cancel nearly all the noise."""
    if not any(g for a in arms for g in data[a].corun):
        return None
    values, arm_of, group_of, _ = _speed_rows(data, arms)
    fit = _fit(values, arm_of, group_of)
    codes = np.unique(np.asarray(arm_of), return_inverse=True)[1]
    means = np.bincount(codes, values) / np.bincount(codes)
    left = float(((values - means[codes]) ** 2).sum())  # what the arms leave
    df_left = len(values) - len(means)
    if fit.df < 1 or left <= 0 or df_left < 1:
        return None
    return max(0.0, 1.0 - float(fit.s2) / (left / df_left)), fit.df


def slot_note(data: Mapping[str, ArmData]) -> str | None:
    """A slot effect on speed (log tokens/s = arm + slot within its host, an F-test as for
    hosts), stated when p < 0.05: a slower core or GPU. Slots are counterbalanced across arms
    and comparisons within co-run groups adjust for them, so it moves no verdict by itself."""
    values, cells = {}, {}
    for a, ad in data.items():
        if not ad.slots or not all(ad.slots) or not ad.hosts:
            return None
        values[a] = boot_values(ad, SPEED_METRIC)
        cells[a] = [f"{h} slot {s}" for h, s in zip(ad.hosts, ad.slots, strict=True)]
    p = host_effect_p(values, cells)
    if p is None or p >= 0.05:
        return None
    return (
        f"speed differs between slots (slot effect p = {p:.2g}: a slower core or GPU); the "
        "slots are counterbalanced across arms and comparisons within co-run groups adjust "
        "for them — check the node if it persists"
    )
