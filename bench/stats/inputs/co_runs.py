"""Co-run groups: ok boots whose measurements ran at the same time on one host share what
the machine did over those seconds (another tenant, its thermal state, the page cache), so
their speeds move together. A speed comparison within such groups cancels that shared part
(`bench.stats.compare`, duet pairing)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.sparse.csgraph import connected_components

MIN_OVERLAP = 0.5  # of the shorter probe window: what makes two boots a co-run group


def corun_groups(boots: pd.DataFrame) -> dict[str, str]:
    """boot_id -> its co-run group, for ok boots measured together with another ok boot.

    A duet's members (`corun_group` recorded: launched together, probes begun at one
    barrier) form their group as recorded ("host/d<n>"). The other ok boots are grouped by
    their probe windows (ready_at to finished_at): those that overlapped another's on the same
    host by at least MIN_OVERLAP of the shorter window, the connected parts of that relation
    ("host/g<n>"). Boots that ran alone are left out. What a group shares (the machine's
    state over those seconds: another tenant, thermal state, a page cache) is common to its
    members' speed."""
    need = ("boot_id", "host", "ready_at", "finished_at", "status")
    if boots.empty or any(c not in boots.columns for c in need):
        return {}
    ok = boots[(boots["status"] == "ok")].dropna(subset=["host", "ready_at", "finished_at"])
    out: dict[str, str] = {}
    if "corun_group" in ok.columns:
        duet = ok["corun_group"].notna()
        sizes = ok.loc[duet, "corun_group"].value_counts()
        for boot_id, group in zip(
            ok.loc[duet, "boot_id"], ok.loc[duet, "corun_group"], strict=True
        ):
            if sizes[group] > 1:  # a partner that failed leaves no pair
                out[str(boot_id)] = str(group)
        ok = ok[~duet]
    for host, on_host in ok.groupby("host", sort=True):
        out.update(_window_groups(str(host), on_host))
    return out


def _window_groups(host: str, on_host: pd.DataFrame) -> dict[str, str]:
    """Boots of one host grouped by overlapping probe windows (see `corun_groups`)."""
    ids = [str(b) for b in on_host["boot_id"]]
    lo, hi = _seconds(on_host["ready_at"]), _seconds(on_host["finished_at"])
    both = np.minimum(hi[:, None], hi[None, :]) - np.maximum(lo[:, None], lo[None, :])
    span = hi - lo
    shorter = np.minimum(span[:, None], span[None, :])
    linked = (both >= MIN_OVERLAP * shorter) & (shorter > 0)
    np.fill_diagonal(linked, False)
    _, label = connected_components(linked, directed=False)
    members: dict[int, list[int]] = {}
    for i, g in enumerate(label):
        members.setdefault(int(g), []).append(i)
    groups = sorted((g for g in members.values() if len(g) > 1), key=lambda g: lo[g[0]])
    return {ids[i]: f"{host}/g{n}" for n, g in enumerate(groups) for i in g}


def _seconds(times: pd.Series) -> np.ndarray:
    """Seconds since the epoch (whatever the column's unit and time zone)."""
    t = pd.to_datetime(times, utc=True)
    return np.asarray((t - pd.Timestamp(0, tz="UTC")).dt.total_seconds(), dtype=np.float64)
