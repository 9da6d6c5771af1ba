"""Per-boot metrics: each ok boot's ratio of sums over its own probes (what figure 1 plots
and the notebook lists). Boot-level points, not estimates: intervals come from `analyze`."""

from __future__ import annotations

import pandas as pd

from bench.stats._data import METRICS


def boot_metrics(probes: pd.DataFrame, boots: pd.DataFrame) -> pd.DataFrame:
    """Per ok boot: the two primary metrics as ratios of sums over that boot's probes.

    Columns: arm, boot, boot_id, order, drafts, acceptance_pos0, mean_accepted_length,
    sorted by launch order. Boots without drafts are dropped (the analysis rejects them).
    """
    cols = ["arm", "boot", "boot_id", "order", "drafts", *METRICS]
    if probes.empty:
        return pd.DataFrame(columns=cols)
    p = probes.assign(
        acc0=[int(v[0]) if len(v) else 0 for v in probes["accepted_per_pos"]],
    )
    g = p.groupby("boot_id", sort=False).agg(
        arm=("arm", "first"),
        boot=("boot", "first"),
        drafts=("num_drafts", "sum"),
        accepted=("num_accepted_tokens", "sum"),
        acc0=("acc0", "sum"),
    )
    g = g[g["drafts"] > 0].reset_index()
    g["acceptance_pos0"] = g["acc0"] / g["drafts"]
    g["mean_accepted_length"] = 1.0 + g["accepted"] / g["drafts"]
    order = boots.set_index("boot_id")["order"] if len(boots) else pd.Series(dtype="int64")
    g["order"] = g["boot_id"].map(order).fillna(-1).astype("int64")
    return g[cols].sort_values(["order", "arm", "boot"], kind="stable").reset_index(drop=True)
