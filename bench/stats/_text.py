"""The one-sentence "why" of every verdict, and JSON hygiene (no NaN/Infinity: null)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def fmt(x: float | None, signed: bool = True) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    if x != 0 and abs(x) < 0.001:
        return f"{x:+.2g}" if signed else f"{x:.2g}"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def why(c: dict[str, Any], alpha: float, sd: float | None) -> str:
    """One sentence explaining comparison `c` (a filled comparison dict)."""
    d, lo, hi, margin = c["difference"], c["ci_low"], c["ci_high"], c["margin"]
    ci = f"{fmt(d)} [{fmt(lo)}, {fmt(hi)}]"
    v = c["verdict"]
    if c.get("no_boots"):
        return "no comparison: an arm has no ok boots (see failed_boots); rerun it with --resume"
    if c.get("unreplicated"):
        return (
            f"{fmt(d)} cannot be told from run-to-run noise: an arm has 1 boot, so there is no "
            "between-boot variance (unreplicated); run >= 2 boots per arm or pass "
            "--prior-between-boot-sd from an A/A run"
        )
    if c.get("deterministic"):
        return (
            f"deterministic on this probe set (every boot of both arms identical): the exact "
            f"difference is {fmt(d)} against a margin of ±{fmt(margin, False)}; no p-value "
            "is stated because there is no run-to-run variance to test against"
        )
    padj = c.get("p_adjusted")
    p_txt = f"Holm p {padj:.2g}" if padj is not None else "p n/a"
    if v == "improved":
        return f"{ci} lies above +{fmt(margin, False)}: a real gain beyond the margin ({p_txt})"
    if v == "regressed":
        return f"{ci} lies below -{fmt(margin, False)}: a real loss beyond the margin ({p_txt})"
    if v in ("small_improvement", "small_regression"):
        word = "gain" if v == "small_improvement" else "loss"
        return (
            f"{ci} excludes 0 ({p_txt}) but reaches inside the margin ±{fmt(margin, False)}: "
            f"a real {word} that may be too small to matter"
        )
    if v == "equivalent":
        lo2, hi2 = c.get("tost_ci") or (None, None)
        return (
            f"{fmt(d)}, {1 - 2 * alpha:.0%} interval [{fmt(lo2)}, {fmt(hi2)}] lies inside "
            f"±{fmt(margin, False)}: no difference that matters (TOST)"
        )
    if lo is None:
        return f"{fmt(d)}: no interval could be computed"
    n = c.get("boots_needed")
    target = max(abs(d), margin)
    more = (
        f"; ≈{n} boots/arm would resolve {fmt(target, False)}"
        if n is not None
        else "; more boots per arm are needed"
    )
    if padj is not None and c.get("p_value") is not None and c["p_value"] < alpha <= padj:
        return f"{ci} excludes 0 alone but not after Holm across the family ({p_txt}){more}"
    return f"{ci} is within run-to-run noise (between-boot SD {fmt(sd, False)}){more}"


def clean(obj: Any) -> Any:
    """Recursively make `obj` strict JSON: numpy scalars to Python, NaN/inf to None."""
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [clean(v) for v in obj.tolist()]
    if isinstance(obj, np.bool_ | bool):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating | float):
        x = float(obj)
        return x if math.isfinite(x) else None
    return obj
