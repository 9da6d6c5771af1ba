"""Tables for the report and the notebook, from stored results and the typed analysis.

Output identity, failed attempts, variance components and the verdict table. Pure functions
of data frames and the analysis; no I/O, no statistics.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bench.records import ACCEPTANCE_METRICS, FEW_BOOTS_LABEL, Manifest, short_name
from bench.stats import Analysis, Comparison, level_name

IDENTITY_COLUMNS = [
    "arm",
    "baseline",
    "probe_set",
    "probes",
    "differ_from_baseline",
    "unstable_within_arm",
]


def _modal_hashes(
    group: np.ndarray, hashes: np.ndarray, n_groups: int
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Per group (an arm's probe): the most common hash code (ties: the one seen first, as
    `value_counts` orders them) and how many distinct hashes it has; -1 where it has none."""
    keep = hashes >= 0
    rows = np.flatnonzero(keep)
    pairs = pd.DataFrame({"g": group[keep], "h": hashes[keep], "at": rows})
    tally = pairs.groupby(["g", "h"], sort=False)["at"].agg(["size", "min"]).reset_index()
    g, h = tally["g"].to_numpy(), tally["h"].to_numpy()
    order = np.lexsort((tally["min"].to_numpy(), -tally["size"].to_numpy(), g))
    first = order[np.r_[True, g[order][1:] != g[order][:-1]]]
    modal = np.full(n_groups, -1, dtype=np.int64)
    modal[g[first]] = h[first]
    return modal, np.bincount(g, minlength=n_groups)


def output_identity(probes: pd.DataFrame, baseline: str, arms: list[str]) -> pd.DataFrame:
    """Per non-baseline arm and probe set: how many probes generated different text.

    A probe differs when the arm's most common `output_sha256` across its boots is not the
    baseline's. `unstable_within_arm` counts probes whose boots of this arm disagree among
    themselves (greedy decoding should be deterministic; if it is not, say so). Computed on
    integer codes: at 10^6 probe rows, grouping the strings held the report's peak memory.
    """
    if probes.empty or baseline not in set(probes["arm"]):
        return pd.DataFrame(columns=IDENTITY_COLUMNS)
    arm_code, arm_names = pd.factorize(probes["arm"])
    set_code, set_names = pd.factorize(probes["probe_set"])
    id_code, id_names = pd.factorize(probes["probe_id"])
    probe = set_code.astype(np.int64) * len(id_names) + id_code
    n_probes = len(set_names) * len(id_names)
    group = arm_code.astype(np.int64) * n_probes + probe
    modal, distinct = _modal_hashes(group, pd.factorize(probes["output_sha256"])[0], len(
        arm_names) * n_probes)  # fmt: skip
    modal, distinct = modal.reshape(-1, n_probes), distinct.reshape(-1, n_probes)
    names = list(arm_names)
    base = modal[names.index(baseline)]
    probe_set = np.repeat(np.arange(len(set_names)), len(id_names))
    rows: list[dict[str, Any]] = []
    for arm in arms:
        if arm == baseline or arm not in names:
            continue
        mine, spread = modal[names.index(arm)], distinct[names.index(arm)]
        both = (mine >= 0) & (base >= 0)
        for s in sorted(np.unique(probe_set[both]), key=lambda s: str(set_names[s])):
            here = both & (probe_set == s)
            rows.append(
                {
                    "arm": arm,
                    "baseline": baseline,
                    "probe_set": str(set_names[s]),
                    "probes": int(here.sum()),
                    "differ_from_baseline": int((mine[here] != base[here]).sum()),
                    "unstable_within_arm": int((spread[here] > 1).sum()),
                }
            )
    return pd.DataFrame(rows, columns=IDENTITY_COLUMNS)


def probe_temperature(manifest: Manifest) -> float | None:
    """The probes' sampling temperature from the manifest's resolved spec (None: unknown)."""
    return manifest.spec.probes.temperature if manifest.spec is not None else None


def identity_summary(identity: pd.DataFrame, baseline: str, temperature: float | None) -> str:
    """One paragraph on output identity. Only greedy probes should repeat their text; at
    temperature > 0 differences are expected and the check says so instead of warning."""
    if identity.empty:
        return "Only one arm: nothing to compare."
    differing = identity[identity["differ_from_baseline"] > 0]
    unstable = identity[identity["unstable_within_arm"] > 0]
    counts = ", ".join(
        f"{r.arm}: {r.differ_from_baseline} of {r.probes} ({r.probe_set})"
        for r in differing.itertuples()
    )
    if temperature:
        return (
            f"Probes were sampled at temperature {temperature:g}, so different text across "
            f"boots and arms is expected ({counts or 'none differ'}); the identity check is "
            "meaningful for greedy (temperature 0) probes only."
        )
    if len(differing):
        text = (
            f"**Generated text differs from {baseline}** ({counts}): those arms did different "
            "work, so their acceptance is not directly comparable."
        )
    else:
        text = f"Every probe generated the same text in every arm as in {baseline}."
    if len(unstable):
        who = ", ".join(
            f"{r.unstable_within_arm} probe(s) of {r.arm}" for r in unstable.itertuples()
        )
        text += f" Boots of the same arm disagree on {who}: decoding is not deterministic there."
    return text


def failed_attempts(boots: pd.DataFrame) -> pd.DataFrame:
    """Failed boot attempts in launch order, with their recorded error and log."""
    cols = ["order", "arm", "boot", "attempt", "host", "error", "log_path"]
    if boots.empty:
        return pd.DataFrame(columns=cols)
    f = boots[boots["status"] != "ok"].sort_values("order")
    return f[cols].fillna("").reset_index(drop=True)


def variance_table(analysis: Analysis) -> pd.DataFrame:
    """Long table arm, metric, boot, prompt, residual (variances) and between_boot_sd, from
    `variance_components.per_arm` (a crossed ANOVA on per-cell ratios, docs/statistics.md).
    Entries without every component are left out."""
    rows = []
    for arm, per_metric in analysis.variance_components.per_arm.items():
        for metric in ACCEPTANCE_METRICS:
            m = per_metric.get(metric)
            if m is None or None in (m.sigma2_boot, m.sigma2_prompt, m.sigma2_res):
                continue
            rows.append(
                {
                    "arm": arm,
                    "metric": metric,
                    "boot": m.sigma2_boot,
                    "prompt": m.sigma2_prompt,
                    "residual": m.sigma2_res,
                    "between_boot_sd": _nan(m.between_boot_sd),
                }
            )
    return pd.DataFrame(
        rows, columns=["arm", "metric", "boot", "prompt", "residual", "between_boot_sd"]
    )


def _nan(v: float | None) -> float:
    return float("nan") if v is None else float(v)


def _fmt(v: float | None, digits: int = 4) -> str:
    return "—" if v is None else f"{v:+.{digits}f}"


def pct(v: float | None, signed: bool = True) -> str:
    """A relative value (ratio - 1) as a percentage."""
    return "—" if v is None else f"{100 * v:+.1f} %" if signed else f"{100 * v:.1f} %"


FEW_BOOTS = f"({FEW_BOOTS_LABEL})"


def few_boots_mark(flagged: bool) -> str:
    """' (too few boots)' after an interval that rests on an arm with fewer than 3 boots
    (the rule: `bench.records.replication`); the interval itself is always printed."""
    return f" {FEW_BOOTS}" if flagged else ""


def difference(c: Comparison) -> str:
    """'difference [raw CI]' in metric units, or in percent for a relative (speed) one."""
    f = pct if c.scale == "relative" else _fmt
    if c.unreplicated:
        return f"{f(c.difference)} (unreplicated: no interval)"
    ci = f"{f(c.difference)} [{f(c.ci_low)}, {f(c.ci_high)}]{few_boots_mark(c.too_few_boots)}"
    return ci + unpaired_text(c)


def unpaired_text(c: Comparison) -> str:
    """'; paired (duets), unpaired [lo, hi]' for a speed comparison made within co-run
    groups: which interval the row shows, and the other one's ends."""
    if c.pairing != "duet" or c.ci_unpaired_low is None or c.ci_unpaired_high is None:
        return ""
    return f" paired (duets); unpaired [{pct(c.ci_unpaired_low)}, {pct(c.ci_unpaired_high)}]"


def verdict_interval(c: Comparison) -> str:
    """'[lo, hi] 97.5 % Holm interval': the interval the verdict rests on, named."""
    if c.verdict_ci is None:
        return "—"
    lo, hi = c.verdict_ci
    f = pct if c.scale == "relative" else _fmt
    named = level_name(c.verdict_ci_level, c.verdict_ci_kind)
    return f"[{f(lo)}, {f(hi)}] {named}{few_boots_mark(c.too_few_boots)}"


def ab_comparisons(analysis: Analysis) -> list[Comparison]:
    """The comparisons a reader is shown as A/B rows: all of them, except in a culprit
    search, whose points never booted (by design: the search did not need them) have no
    boots to compare."""
    if analysis.bisection is None:
        return list(analysis.comparisons)
    booted = {a.arm for a in analysis.arms if a.boots}
    return [c for c in analysis.comparisons if c.arm in booted]


def verdict_table(analysis: Analysis) -> pd.DataFrame:
    """One row per comparison (primary family first): difference [raw CI], the interval the
    verdict rests on, p (raw / Holm within its family), margin, method, verdict, why (a
    search's points never booted left out: `ab_comparisons`)."""
    raw = f"difference [raw {1 - analysis.alpha:.0%} CI]"
    rows = [
        {
            # an arm compared with its own drafter's reference, not the baseline, says so
            "arm": c.arm if c.baseline == analysis.baseline else f"{c.arm} vs {c.baseline}",
            "metric": short_name(c.metric),
            "family": c.family,
            raw: difference(c),
            "verdict interval": verdict_interval(c),
            "p (raw / Holm)": f"{_p(c.p_value)} / {_p(c.p_adjusted)}",
            "margin": f"±{pct(c.margin, False)}" if c.scale == "relative" else f"±{c.margin:g}",
            "method": c.method,
            "verdict": c.verdict,
            "why": " ".join(c.why.split()),
        }
        for c in ab_comparisons(analysis)
    ]
    cols = ["arm", "metric", "family", raw, "verdict interval", "p (raw / Holm)", "margin"]
    return pd.DataFrame(rows, columns=[*cols, "method", "verdict", "why"])


def _p(v: float | None) -> str:
    return "—" if v is None else f"{v:.3g}"
