"""Drift within a boot (`[probes] passes = N`): does acceptance or speed change over a
server's lifetime? (vllm issue 41838: EAGLE acceptance length fell over a server's life and
only a restart reset it.)

Each boot runs the same probe set N times. Per boot: the metric on its first pass and on its
last pass (ratios of sums over that pass's probes; speed as the log of Σ tokens / Σ
latency), and their difference — one replicate of the within-boot trend per boot, so the
boot stays the unit of replication. The arm's drift is the mean over boots with a t
interval (B − 1 df), and the verdict is the comparisons' rule against the same margins
(TOST for `equivalent`; speed relative). Boots are independent servers, so boot-to-boot
variation cancels inside each difference and only within-boot noise and real drift remain.
Pure: takes the loaded frames, returns typed rows."""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np
import pandas as pd

from bench.records import ALL_METRICS, METRIC, REGISTRY, SPEED_METRIC, list_matrix
from bench.stats.methods import VERDICTS, interval, verdict_codes
from bench.stats.schema import DriftEstimate


def _pass_values(rows: pd.DataFrame) -> dict[str, float]:
    """Every metric on one pass of one boot: its probe rows are the cells."""
    drafts = rows["num_drafts"].to_numpy(dtype=np.float64)
    accepted = rows["num_accepted_tokens"].to_numpy(dtype=np.float64)
    pos0 = list_matrix(rows["accepted_per_pos"], 1)[:, 0].astype(np.float64)
    out: dict[str, float] = {}
    for m in REGISTRY:
        if m.counts is None:  # speed: log of Σ tokens / Σ seconds
            lat = float(rows["latency_s"].sum())
            if lat > 0:
                out[m.name] = math.log(float(rows["completion_tokens"].sum()) / lat)
            continue
        num, den = m.counts(drafts, accepted, pos0)
        if float(drafts.sum()) > 0 and float(den.sum()) > 0:
            out[m.name] = float(num.sum()) / float(den.sum()) + m.offset
    return out


def _boot_changes(
    pr: pd.DataFrame,
) -> tuple[dict[str, list[float]], dict[str, list[float]], int, int]:
    """Per metric, each boot's last-pass minus first-pass value, and the metric per pass
    averaged over boots; the passes compared."""
    changes: dict[str, list[float]] = {}
    per_pass: dict[str, dict[int, list[float]]] = {}
    passes = sorted(int(x) for x in pr["pass_index"].unique())
    first, last = passes[0], passes[-1]
    for _, rows in pr.groupby("boot_id", sort=True):
        values = {k: _pass_values(rows[rows["pass_index"] == k]) for k in passes}
        for metric in values[first].keys() & values[last].keys():
            changes.setdefault(metric, []).append(values[last][metric] - values[first][metric])
        for k, vals in values.items():
            for metric, v in vals.items():
                per_pass.setdefault(metric, {}).setdefault(k, []).append(v)
    means = {
        m: [
            float(np.exp(np.mean(v)) if METRIC[m].relative else np.mean(v))
            for _, v in sorted(d.items())
        ]
        for m, d in per_pass.items()
    }
    return changes, means, first, last


def drift(
    probes: pd.DataFrame,
    boots: pd.DataFrame,
    arms: list[str],
    margins: dict[str, float],
    alpha: float,
    untimed: Collection[str] = (),
) -> list[DriftEstimate]:
    """One estimate per arm and metric for arms whose ok boots ran more than one pass (no
    speed for the `untimed` arms: a reference arm's tokens/s is an HF forward's)."""
    if "pass_index" not in probes.columns or probes["pass_index"].isna().all():
        return []
    ok = set(boots.loc[boots["status"] == "ok", "boot_id"]) if len(boots) else set()
    out: list[DriftEstimate] = []
    for arm in arms:
        pr = probes[(probes["arm"] == arm) & probes["boot_id"].isin(ok)]
        pr = pr[pr["pass_index"].notna()]
        if pr.empty or pr["pass_index"].nunique() < 2:
            continue
        changes, means, first, last = _boot_changes(pr)
        for metric in ALL_METRICS:
            if metric in changes and not (arm in untimed and metric == SPEED_METRIC):
                e = _estimate(arm, metric, changes[metric], first, last, margins, alpha)
                out.append(e.model_copy(update={"by_pass": means.get(metric, [])}))
    return out


def _estimate(
    arm: str,
    metric: str,
    values: list[float],
    first: int,
    last: int,
    margins: dict[str, float],
    alpha: float,
) -> DriftEstimate:
    x = np.asarray(values, dtype=np.float64)
    b = len(x)
    mean = float(x.mean())
    se = float(x.std(ddof=1) / math.sqrt(b)) if b > 1 else math.nan
    df = b - 1 if b > 1 else math.nan
    lo, hi = (float(v) for v in interval(mean, se, df, alpha))
    lo2, hi2 = (float(v) for v in interval(mean, se, df, 2 * alpha))  # TOST
    relative = METRIC[metric].relative
    m = margins[metric]
    down, up = METRIC[metric].margin_scale(m)
    code = int(verdict_codes(mean, lo, hi, lo2, hi2, up, margin_down=down))
    show = math.expm1 if relative else (lambda v: v)
    return DriftEstimate(
        arm=arm,
        metric=metric,
        first_pass=first,
        last_pass=last,
        boots=b,
        change=show(mean),
        ci_low=show(lo) if math.isfinite(lo) else None,
        ci_high=show(hi) if math.isfinite(hi) else None,
        scale="relative" if relative else "absolute",
        margin=m,
        verdict=VERDICTS[code] if b > 1 else "inconclusive",
    )
