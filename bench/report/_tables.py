"""Tables for the report and the notebook, computed from stored results and the analysis dict.

Output identity, failed attempts, provenance, variance components and the verdict table.
Pure functions of data frames / dicts; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from bench.report._plots_common import Analysis
from bench.stats import METRICS

IDENTITY_COLUMNS = [
    "arm",
    "baseline",
    "probe_set",
    "probes",
    "differ_from_baseline",
    "unstable_within_arm",
]


def _modal_hash(hashes: pd.Series) -> str:
    return str(hashes.value_counts().index[0])


def output_identity(probes: pd.DataFrame, baseline: str, arms: list[str]) -> pd.DataFrame:
    """Per non-baseline arm and probe set: how many probes generated different text.

    A probe differs when the arm's most common `output_sha256` across its boots is not the
    baseline's. `unstable_within_arm` counts probes whose boots of this arm disagree among
    themselves (greedy decoding should be deterministic; if it is not, say so).
    """
    rows: list[dict[str, Any]] = []
    if probes.empty or baseline not in set(probes["arm"]):
        return pd.DataFrame(columns=IDENTITY_COLUMNS)
    key = ["probe_set", "probe_id"]
    modal = probes.groupby(["arm", *key])["output_sha256"].agg(_modal_hash)
    distinct = probes.groupby(["arm", *key])["output_sha256"].nunique()
    base = modal.loc[baseline]
    for arm in arms:
        if arm == baseline or arm not in modal.index.get_level_values(0):
            continue
        mine = modal.loc[arm]
        both = mine.index.intersection(base.index)
        differ = (mine.loc[both] != base.loc[both]).groupby(level="probe_set").sum()
        unstable = (distinct.xs(arm, level="arm").loc[both] > 1).groupby(level="probe_set").sum()
        counts = pd.Series(1, index=both).groupby(level="probe_set").sum()
        for probe_set in counts.index:
            rows.append(
                {
                    "arm": arm,
                    "baseline": baseline,
                    "probe_set": str(probe_set),
                    "probes": int(counts[probe_set]),
                    "differ_from_baseline": int(differ.get(probe_set, 0)),
                    "unstable_within_arm": int(unstable.get(probe_set, 0)),
                }
            )
    return pd.DataFrame(rows, columns=IDENTITY_COLUMNS)


def probe_temperature(manifest: Mapping[str, Any]) -> float | None:
    """The probes' sampling temperature from the manifest's resolved spec (None: unknown)."""
    spec = manifest.get("spec")
    probes = spec.get("probes") if isinstance(spec, Mapping) else None
    t = probes.get("temperature") if isinstance(probes, Mapping) else None
    return float(t) if isinstance(t, int | float) else None


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
    """Long table arm, metric, boot, prompt, residual (variances) from the analysis dict.

    Reads `variance_components.per_arm[arm][metric]` with keys `sigma2_boot`,
    `sigma2_prompt`, `sigma2_res` (STATISTICS.md's crossed ANOVA on per-cell ratios) and
    `between_boot_sd` (of the boot-level metric). Incomplete entries are left out.
    """
    vc = analysis.get("variance_components") or {}
    per_arm = vc.get("per_arm", vc) if isinstance(vc, Mapping) else {}
    rows = []
    for arm, per_metric in per_arm.items() if isinstance(per_arm, Mapping) else []:
        if not isinstance(per_metric, Mapping):
            continue
        for metric in METRICS:
            m = per_metric.get(metric)
            if not isinstance(m, Mapping):
                continue
            vals = [m.get(k) for k in ("sigma2_boot", "sigma2_prompt", "sigma2_res")]
            if any(v is None for v in vals):
                continue
            sd = m.get("between_boot_sd")
            rows.append(
                {
                    "arm": arm,
                    "metric": metric,
                    "boot": _float(vals[0]),
                    "prompt": _float(vals[1]),
                    "residual": _float(vals[2]),
                    "between_boot_sd": _float(sd),
                }
            )
    return pd.DataFrame(
        rows, columns=["arm", "metric", "boot", "prompt", "residual", "between_boot_sd"]
    )


def _float(v: Any) -> float:
    """float(v), NaN for None or anything not numeric (the analysis uses null, not NaN)."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "—"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if f != f:  # NaN
        return "—"
    return f"{f:+.{digits}f}" if digits else f"{f:.0f}"


def verdict_table(analysis: Analysis) -> pd.DataFrame:
    """One row per comparison: difference [CI], p (raw / Holm), margin, verdict, why."""
    rows = []
    for c in analysis.get("comparisons") or []:
        rows.append(
            {
                "arm": c["arm"],
                "metric": c["metric"],
                "difference [CI]": f"{_fmt(c.get('difference'))} "
                f"[{_fmt(c.get('ci_low'))}, {_fmt(c.get('ci_high'))}]",
                "p (raw / Holm)": f"{_p(c.get('p_value'))} / {_p(c.get('p_adjusted'))}",
                "margin": f"±{float(c['margin']):g}" if c.get("margin") is not None else "—",
                "method": str(c.get("method", "")),
                "verdict": str(c.get("verdict", "")),
                "why": why_sentence(c, analysis),
            }
        )
    return pd.DataFrame(rows)


def _p(v: Any) -> str:
    return "—" if v is None else f"{float(v):.3g}"


def why_sentence(comp: Mapping[str, Any], analysis: Analysis) -> str:
    """One sentence explaining the verdict: the analysis' own `why` (bench.stats writes one);
    a plain restatement of the interval for analysis files that lack it."""
    if comp.get("why"):
        return " ".join(str(comp["why"]).split())
    span = (
        f"{_fmt(comp.get('difference'))} [{_fmt(comp.get('ci_low'))}, {_fmt(comp.get('ci_high'))}]"
    )
    sd = _boot_sd(analysis, str(comp["arm"]), str(comp["metric"]))
    noise = f", between-boot SD {sd:.3g}" if sd is not None else ""
    return f"{span} against a margin of ±{comp.get('margin')}{noise}."


def _boot_sd(analysis: Analysis, arm: str, metric: str) -> float | None:
    for a in analysis.get("arms", []):
        if a["arm"] == arm:
            sd = _float(a.get("metrics", {}).get(metric, {}).get("between_boot_sd"))
            return sd if sd == sd else None
    return None
