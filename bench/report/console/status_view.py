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
    if s.writer is None:
        who = "no driver is writing it"
    elif s.writer.gone:
        who = f"last written by {s.writer.holder}; that driver looks gone ({s.writer.gone})"
    else:
        who = f"written by {s.writer.holder}"
    t = Table(title=f"{s.experiment} ({s.results_dir})")
    for col in ("arm", "ok", "failed", "in flight", "hosts"):
        t.add_column(col, overflow="fold")
    for a in s.arms:
        ok = f"{a.ok}/{a.target}" if a.target is not None else str(a.ok)
        t.add_row(a.arm, ok, str(a.failed), str(a.in_flight), ", ".join(a.hosts) or "-")
    lines = [
        f"{who}",
        f"elapsed {_minutes(s.elapsed_s)}; a boot takes {_minutes(s.boot_s)}; "
        + (f"about {_minutes(s.eta_s)} to go at this pace" if s.eta_s is not None else "no ETA"),
    ]
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
