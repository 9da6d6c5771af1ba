"""Hosts that differ: when two arms ran on hosts in unequal proportions, a host effect (another
driver, firmware, GPU bin, a noisy neighbour) would masquerade as an arm effect. Then each
comparison is made within hosts: an additive model boot value = arm + host, fitted by least
squares on the two arms' boots (host as a blocking factor), gives the arm difference with a
pooled-residual SE on n - rank df. Arms on disjoint hosts are confounded with them: no
difference can be claimed (NaN SE: inconclusive). Balanced arms (the same share of boots on
every host) and single-host runs keep the ordinary comparison: the host effect cancels.

Boot values are what each comparison's scale uses: a boot's ratio of sums for acceptance,
its log tokens/s for speed. Every function broadcasts over leading batch axes of the values
(the calibration simulates many experiments with one host layout)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import scipy.stats as st
from numpy.typing import NDArray

from bench.stats.inputs import ArmData, boot_values
from bench.stats.methods import Est
from bench.stats.schema import HostSummary

F = NDArray[np.float64]


def balanced(hosts_a: Sequence[str], hosts_b: Sequence[str]) -> bool:
    """Same share of boots on every host (or a single host overall): nothing to adjust."""
    ca, cb = Counter(hosts_a), Counter(hosts_b)
    if len(set(ca) | set(cb)) <= 1:
        return True
    na, nb = sum(ca.values()), sum(cb.values())
    return all(ca[h] * nb == cb[h] * na for h in set(ca) | set(cb))


def _design(hosts_a: Sequence[str], hosts_b: Sequence[str]) -> NDArray[np.float64]:
    """Columns: intercept, arm b, one dummy per host after the first."""
    order = sorted(set(hosts_a) | set(hosts_b))
    rows = [(0.0, h) for h in hosts_a] + [(1.0, h) for h in hosts_b]
    x = np.zeros((len(rows), 1 + len(order)))
    x[:, 0] = 1.0
    for i, (arm, h) in enumerate(rows):
        x[i, 1] = arm
        j = order.index(h)
        if j:
            x[i, 1 + j] = 1.0
    return x


def adjusted_difference(
    ya: F, yb: F, hosts_a: Sequence[str], hosts_b: Sequence[str]
) -> tuple[F, F, float]:
    """Arm b minus arm a within hosts: (difference, SE, df) over batch axes. SE is NaN when
    arm and host are confounded (no host has both arms) or no residual df is left."""
    x = _design(hosts_a, hosts_b)
    y = np.concatenate([np.asarray(ya, float), np.asarray(yb, float)], axis=-1)
    rank = int(np.linalg.matrix_rank(x))
    pinv = np.linalg.pinv(x)
    beta = y @ pinv.T
    resid = y - beta @ x.T
    df = float(x.shape[0] - rank)
    shared = set(hosts_a) & set(hosts_b)
    if rank < x.shape[1] or df < 1 or not shared:
        nan = np.full(y.shape[:-1], np.nan)
        return beta[..., 1], nan, df
    s2 = (resid**2).sum(axis=-1) / df
    cov11 = float(np.linalg.inv(x.T @ x)[1, 1])
    return beta[..., 1], np.sqrt(s2 * cov11), df


def pseudo_pair(diff: F, se: F, df: float, like: Est) -> tuple[Est, Est]:
    """A (baseline, arm) pair whose Welch difference is exactly (diff, se, df): the
    baseline carries nothing, the arm the adjusted difference."""
    zero = np.zeros_like(diff)
    dfs = np.full(diff.shape, df)
    base = Est(zero, zero, zero, np.full(diff.shape, np.inf), like.b_eff, like.boots, False)
    return base, Est(diff, se, se, dfs, like.b_eff, like.boots, False)


def host_adjusted_pairs(
    data: Mapping[str, ArmData],
    baseline: str,
    others: Sequence[str],
    metrics: Sequence[str],
    est: Mapping[str, Mapping[str, Est]],
) -> dict[tuple[str, str], tuple[Est, Est]]:
    """(arm, metric) -> the pair to compare, for every comparison whose two arms ran on hosts
    in unequal proportions; comparisons not listed keep the ordinary estimates."""
    base = data[baseline]
    out: dict[tuple[str, str], tuple[Est, Est]] = {}
    for arm in others:
        ad = data[arm]
        if not base.hosts or not ad.hosts or balanced(base.hosts, ad.hosts):
            continue
        for m in metrics:
            if m not in est[baseline] or m not in est[arm]:
                continue
            ya, yb = boot_values(base, m), boot_values(ad, m)
            ok_a, ok_b = np.isfinite(ya), np.isfinite(yb)
            ha = [h for h, ok in zip(base.hosts, ok_a, strict=True) if ok]
            hb = [h for h, ok in zip(ad.hosts, ok_b, strict=True) if ok]
            diff, se, df = adjusted_difference(ya[ok_a], yb[ok_b], ha, hb)
            out[(arm, m)] = pseudo_pair(np.asarray(diff), np.asarray(se), df, est[arm][m])
    return out


def host_effect_p(values: Mapping[str, F], hosts: Mapping[str, Sequence[str]]) -> float | None:
    """F-test of a host effect in boot value = arm + host over every arm (None: one host,
    or no residual df)."""
    arms = [a for a in values if len(values[a])]
    all_hosts = sorted({h for a in arms for h in hosts[a]})
    if len(all_hosts) < 2:
        return None
    y = np.concatenate([values[a] for a in arms])
    arm_cols = np.array([[1.0 if a == b else 0.0 for b in arms] for a in arms for _ in values[a]])
    host_of = [h for a in arms for h in hosts[a]]
    host_cols = np.array([[1.0 if h == g else 0.0 for g in all_hosts[1:]] for h in host_of])
    full, reduced = np.hstack([arm_cols, host_cols]), arm_cols
    ok = np.isfinite(y)
    y, full, reduced = y[ok], full[ok], reduced[ok]
    rank_f, rank_r = np.linalg.matrix_rank(full), np.linalg.matrix_rank(reduced)
    df2 = len(y) - rank_f
    if df2 < 1 or rank_f == rank_r:
        return None
    rss = [
        float(((y - x @ np.linalg.lstsq(x, y, rcond=None)[0]) ** 2).sum()) for x in (full, reduced)
    ]
    if rss[0] <= 0:
        return 0.0 if rss[1] > 0 else None
    f = ((rss[1] - rss[0]) / (rank_f - rank_r)) / (rss[0] / df2)
    return float(st.f.sf(f, rank_f - rank_r, df2))


def host_summary(
    data: Mapping[str, ArmData], baseline: str, metrics: Sequence[str]
) -> tuple[HostSummary | None, list[str]]:
    """The arms x hosts table, a test of a host effect per metric, and which comparisons were
    made within hosts (None when every boot ran on one host)."""
    hosts = sorted({h for ad in data.values() for h in ad.hosts})
    if len(hosts) < 2:
        return None, []
    table = {a: dict(Counter(ad.hosts)) for a, ad in data.items()}
    base = data[baseline]
    adjusted: list[str] = []
    confounded: list[str] = []
    for a, ad in data.items():
        if a == baseline or not ad.hosts or balanced(base.hosts, ad.hosts):
            continue
        (confounded if not set(ad.hosts) & set(base.hosts) else adjusted).append(a)
    effect: dict[str, float | None] = {}
    notes: list[str] = []
    for m in metrics:
        vals = {a: boot_values(ad, m) for a, ad in data.items() if ad.has(m)}
        vals = {a: v for a, v in vals.items() if len(v) and np.isfinite(v).all()}
        effect[m] = host_effect_p(vals, {a: data[a].hosts for a in vals})
    if adjusted:
        notes.append(
            f"arms ran on hosts in unequal proportions ({', '.join(adjusted)} vs {baseline}): "
            "those comparisons are made within hosts (boot value = arm + host, least squares, "
            "pooled residual SE); to get the plain comparison back, rerun balanced"
        )
    if confounded:
        notes.append(
            f"{', '.join(confounded)} and {baseline} ran on disjoint hosts: arm and host are "
            "confounded, so no difference can be claimed; rerun with every arm on every host"
        )
    small = [m for m, p in effect.items() if p is not None and p < 0.05]
    if small:
        notes.append(f"the hosts differ (host effect p < 0.05 on {', '.join(small)}): see hosts")
    summary = HostSummary(
        hosts=hosts,
        boots=table,
        balanced=not adjusted and not confounded,
        adjusted=adjusted,
        confounded=confounded,
        host_effect_p=effect,
    )
    return summary, notes
