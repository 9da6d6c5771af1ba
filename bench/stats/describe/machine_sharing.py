"""Whether boots shared the machine: two boots at once on one host (`[resources]` slots of
one core each, e.g. the demo on a 2-core machine) measure speed under each other's load.
Acceptance counts do not depend on timing; tokens/s does, so the analysis and the report
say how many boots measured their probes while another ran on their host. Order blocks are
shuffled, so the sharing falls on every arm alike; the statement says how to read the
numbers, it changes no verdict."""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from bench.stats.schema import SharedMachine

_WINDOW = ("host", "started_at", "ready_at", "finished_at", "status")
Times = NDArray[np.datetime64]


def _most_at_once(starts: Times, ends: Times) -> int:
    """The most attempts running at one instant: +1 at each start, -1 at each end, an end
    before a start at the same instant."""
    times = np.concatenate([starts, ends])
    steps = np.concatenate([np.ones(len(starts), np.int64), -np.ones(len(ends), np.int64)])
    order = np.lexsort((steps, times))
    return int(np.cumsum(steps[order]).max(initial=0))


def _times(col: pd.Series) -> Times:
    """UTC instants as datetime64[ns]: compared in bulk, not as Timestamp objects (at 1,000
    boots 0.01 CPU-s, where Timestamp objects take 2.4)."""
    out: Times = col.to_numpy(dtype="datetime64[ns]")
    return out


def shared_machine(boots: pd.DataFrame) -> SharedMachine | None:
    """How many ok served boots measured their probes (ready_at..finished_at) while another
    attempt, ok or failed, a reference boot's included, ran (started_at..finished_at) on the
    same host; None when none did."""
    if boots.empty or any(c not in boots.columns for c in _WINDOW):
        return None
    runs = boots.dropna(subset=["host", "started_at", "finished_at"])
    ok = runs[(runs["status"] == "ok") & runs["ready_at"].notna()]
    if "reference_forward" in ok.columns:  # a reference boot loads the host, times no serving
        ok = ok[ok["reference_forward"].isna()]
    shared, hosts, most = 0, set(), 1
    for host, on_host in runs.groupby("host", sort=True):
        start, end = _times(on_host["started_at"]), _times(on_host["finished_at"])
        most = max(most, _most_at_once(start, end))
        mine = ok[ok["host"] == host]
        if mine.empty:
            continue
        # every (ok boot, other attempt) pair on the host at once: boots x attempts booleans
        during = (start[None, :] < _times(mine["finished_at"])[:, None]) & (
            end[None, :] > _times(mine["ready_at"])[:, None]
        )
        during &= mine.index.to_numpy()[:, None] != on_host.index.to_numpy()[None, :]
        n = int(during.any(axis=1).sum())
        if n:
            shared += n
            hosts.add(str(host))
    if not shared:
        return None
    return SharedMachine(boots=len(ok), shared=shared, most_at_once=most, hosts=sorted(hosts))


def sharing_note(s: SharedMachine) -> str:
    return (
        f"speed: {s.shared} of {s.boots} ok boots measured their probes while another boot ran "
        f"on the same host (up to {s.most_at_once} at once on {', '.join(s.hosts)}): each "
        "tokens/s is what a boot got with the machine shared; the shuffled blocks spread that "
        f"over the arms alike, and acceptance does not depend on it{groups_clause(s)}"
    )


def groups_clause(s: SharedMachine) -> str:
    """'; co-run groups carried …' where the analysis measured it, else ''."""
    if s.groups_share is None:
        return ""
    return (
        f"; co-run groups carried {float(s.groups_share):.0%} of the boot-to-boot speed "
        f"variance ({float(s.groups_residual_df or 0):.0f} residual df)"
    )
