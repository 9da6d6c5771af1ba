"""Per-position acceptance in both definitions, for arms whose draft lengths vary (ngram,
dynamic speculation): vLLM's accepted ÷ drafts and accepted ÷ steps that drafted position
k, with the share of steps that drafted it and the arm's mean draft length."""

from __future__ import annotations

import pandas as pd

from bench.stats import Analysis

VARIES = 0.999  # a drafted share below this: some steps stopped before position k


def varying_arms(analysis: Analysis) -> list[str]:
    """Arms where some verify steps drafted fewer than K tokens."""
    return [
        a.arm
        for a in analysis.arms
        if any(p.drafted_share is not None and p.drafted_share < VARIES for p in a.per_position)
    ]


def draft_length_table(analysis: Analysis) -> pd.DataFrame:
    """Rows (arm, position) for every speculative arm with drafted counts, when any varies."""
    if not varying_arms(analysis):
        return pd.DataFrame()
    rows = []
    for a in analysis.arms:
        for p in a.per_position:
            if p.drafted_share is None:
                continue
            rows.append(
                {
                    "arm": a.arm,
                    "k": p.position,
                    "÷ drafts (vLLM)": _f(p.estimate),
                    "÷ steps that drafted k": _f(p.among_drafted),
                    "interval": "—"
                    if p.among_drafted_ci_low is None
                    else f"[{p.among_drafted_ci_low:.4f}, {p.among_drafted_ci_high:.4f}]",
                    "drafted share": _f(p.drafted_share, 3),
                    "mean draft length": _f(a.mean_draft_length, 2),
                }
            )
    return pd.DataFrame(rows)


def _f(v: float | None, digits: int = 4) -> str:
    return "—" if v is None else f"{v:.{digits}f}"
