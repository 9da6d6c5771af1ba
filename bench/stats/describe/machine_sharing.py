"""Whether boots shared the machine: two boots at once on one host (`[resources]` slots of
one core each, e.g. the demo on a 2-core machine) measure speed under each other's load.
Acceptance counts do not depend on timing; tokens/s does, so the analysis and the report
say how many boots measured their probes while another ran on their host. Order blocks are
shuffled, so the sharing falls on every arm alike; the statement says how to read the
numbers, it changes no verdict."""

from __future__ import annotations

import pandas as pd

from bench.stats.schema import SharedMachine

_WINDOW = ("host", "started_at", "ready_at", "finished_at", "status")


def _most_at_once(starts: list[pd.Timestamp], ends: list[pd.Timestamp]) -> int:
    events = sorted([(t, 1) for t in starts] + [(t, -1) for t in ends], key=lambda e: (e[0], e[1]))
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def shared_machine(boots: pd.DataFrame) -> SharedMachine | None:
    """How many ok boots measured their probes (ready_at..finished_at) while another attempt,
    ok or failed, ran (started_at..finished_at) on the same host; None when none did."""
    if boots.empty or any(c not in boots.columns for c in _WINDOW):
        return None
    runs = boots.dropna(subset=["host", "started_at", "finished_at"])
    ok = runs[(runs["status"] == "ok") & runs["ready_at"].notna()]
    shared, hosts, most = 0, set(), 1
    for host, on_host in runs.groupby("host", sort=True):
        starts, ends = list(on_host["started_at"]), list(on_host["finished_at"])
        most = max(most, _most_at_once(starts, ends))
        mine = ok[ok["host"] == host]
        if mine.empty:
            continue
        # every (ok boot, other attempt) pair on the host at once: boots x attempts booleans
        start = on_host["started_at"].to_numpy()
        end = on_host["finished_at"].to_numpy()
        during = (start[None, :] < mine["finished_at"].to_numpy()[:, None]) & (
            end[None, :] > mine["ready_at"].to_numpy()[:, None]
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
        "over the arms alike, and acceptance does not depend on it"
    )
