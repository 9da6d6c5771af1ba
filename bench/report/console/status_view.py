"""The human view of `specab status`: who writes the directory, per-arm progress, timing and
what comes next. Renders a `CampaignStatus`; reads nothing itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from bench.store import CampaignStatus


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def status_view(s: CampaignStatus) -> Group:
    """A rich renderable (printed once, or refreshed by `--watch`)."""
    missing = f"stopped with {s.missing} boot(s) missing (continue it: run-ab --resume)"
    if s.state == "finished":
        who = "finished: every arm has its boots"
    elif s.writer is None:
        who = f"{missing}; no driver is writing it"
    elif s.writer.gone:
        who = f"{missing}; last written by {s.writer.holder}, which looks gone ({s.writer.gone})"
    else:
        who = f"running: written by {s.writer.holder}"
    t = Table(title=f"{s.experiment} ({s.results_dir})")
    for col in ("arm", "ok", "failed", "in flight", "hosts"):
        t.add_column(col, overflow="fold")
    for a in s.arms:
        ok = f"{a.ok}/{a.target}" if a.target is not None else str(a.ok)
        t.add_row(
            *map(Text, (a.arm, ok, str(a.failed), str(a.in_flight), ", ".join(a.hosts) or "-"))
        )
    lines = [f"{who}", timing_line(s)]
    if s.in_flight:
        running = ", ".join(f"{b.boot_id} on {b.host} since {b.started_at}" for b in s.in_flight)
        lines.append(f"running: {running}")
    if s.next_look is not None:
        lines.append(
            f"next look at {s.next_look} ok boots per arm: the run stops there if every "
            "comparison is decided"
        )
    if s.last_failure:
        lines.append(f"last failure: {s.last_failure}")
    lines.append(s.note)
    return Group(t, *(Text(line) for line in lines))


def timing_line(s: CampaignStatus) -> str:
    """Elapsed, the median boot and the ETA (only while a driver runs)."""
    if s.state != "running":
        span = _minutes(s.elapsed_s)
        return f"took {span} (first boot start to last boot end); a boot took {_minutes(s.boot_s)}"
    eta = (
        f"about {_minutes(s.eta_s)} to go at this pace"
        if s.eta_s is not None
        else "no ETA until a boot finishes"
    )
    return f"elapsed {_minutes(s.elapsed_s)}; a boot takes {_minutes(s.boot_s)}; {eta}"


def status_line(s: CampaignStatus) -> str:
    """One line per refresh, for `--watch` into a pipe or a log file: per arm ok boots of
    its target, and how many are in flight."""
    arms = ", ".join(
        f"{a.arm} {a.ok}/{a.target} ok" + (f" +{a.in_flight} in flight" if a.in_flight else "")
        for a in s.arms
    )
    return f"{s.state}: {arms}; {timing_line(s)}"
