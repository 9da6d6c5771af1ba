"""The one-sentence "why" of every verdict, and how an interval's level is named.

The interval a sentence quotes is the one the verdict rests on (`verdict_ci`), named by its
level: the Holm-compatible interval for a difference claim, the (1 - 2 alpha) interval for
equivalence (TOST), the exact difference for identical boots."""

from __future__ import annotations

import math

from bench.records import MIN_USEFUL_BOOTS
from bench.stats.schema import Comparison


def _fmt(x: float | None, signed: bool = True) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    if x != 0 and abs(x) < 0.001:
        return f"{x:+.2g}" if signed else f"{x:.2g}"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def pct(x: float | None, signed: bool = True) -> str:
    """A relative value as a percentage: +3.1 %."""
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{100 * x:+.1f} %" if signed else f"{100 * x:.1f} %"


def level_name(level: float | None, kind: str | None) -> str:
    """'95 % interval', '97.5 % Holm interval', '90 % TOST interval'."""
    if level is None:
        return "interval"
    pct = f"{100 * (1 - level):.4g} %"
    if kind == "tost":
        return f"{pct} TOST interval"
    if kind in ("holm", "holm_sequential"):
        where = " at this look" if kind == "holm_sequential" else ""
        return f"{pct} Holm interval{where}"
    return f"{pct} interval"


def why(c: Comparison, alpha: float) -> str:
    """One sentence explaining comparison `c` (every other field filled); relative-scale
    comparisons (speed) in percent."""
    fmt = pct if c.scale == "relative" else _fmt
    d, margin, v = c.difference, c.margin, c.verdict
    m = fmt(margin, False)
    if c.no_boots:
        return "no comparison: an arm has no ok boots (see failed_boots); rerun it with --resume"
    if c.unreplicated:
        return (
            f"{fmt(d)} cannot be told from run-to-run noise: an arm has 1 boot, so there is no "
            f"between-boot variance (unreplicated); run {MIN_USEFUL_BOOTS} or more boots per "
            "arm, or give a prior between-boot SD (with its df) from an A/A run of the same "
            "design (--prior-from)"
        )
    if c.deterministic:
        return (
            f"deterministic on this probe set (every boot of both arms identical): the exact "
            f"difference is {fmt(d)} against a margin of ±{m}; no p-value "
            "is stated because there is no run-to-run variance to test against"
        )
    lo, hi = c.verdict_ci or (None, None)
    ci = f"{fmt(d)} [{fmt(lo)}, {fmt(hi)}] ({level_name(c.verdict_ci_level, c.verdict_ci_kind)})"
    p_txt = f"Holm p {c.p_adjusted:.2g}" if c.p_adjusted is not None else "p n/a"
    if v == "improved":
        return f"{ci} lies above +{m}: a real gain beyond the margin ({p_txt})"
    if v == "regressed":
        return f"{ci} lies below -{m}: a real loss beyond the margin ({p_txt})"
    if v in ("small_improvement", "small_regression"):
        word = "gain" if v == "small_improvement" else "loss"
        return (
            f"{ci} excludes 0 ({p_txt}) but reaches inside the margin ±{m}: "
            f"a real {word} that may be too small to matter"
        )
    if v == "equivalent":
        return f"{ci} lies inside ±{m}: no difference that matters"
    if lo is None:
        return f"{fmt(d)}: no interval could be computed"
    n = c.boots_needed
    target = max(abs(d or 0.0), margin)
    more = (
        f"; ≈{n} boots/arm would resolve {fmt(target, False)}"
        if n is not None
        else "; more boots per arm are needed"
    )
    raw = c.p_value
    if raw is not None and c.p_adjusted is not None and raw < alpha <= c.p_adjusted:
        return (
            f"raw {fmt(d)} [{fmt(c.ci_low)}, {fmt(c.ci_high)}] excludes 0 alone, but {ci} "
            f"does not after Holm across the family ({p_txt}){more}"
        )
    return (
        f"{ci} is within run-to-run noise (between-boot SD {fmt(c.between_boot_sd, False)}){more}"
    )
