"""What `specab analyze` (and run-ab's end of run) prints for a sweep: per group the
configurations with their MCB intervals, the choice with its guarantee, and what to paste."""

from __future__ import annotations

import json

import pandas as pd
from rich.console import Console
from rich.table import Table

from bench.report.tables.headings import Heading
from bench.report.tables.literal_rows import data_row
from bench.stats import Selection


def _rel(x: float | None, relative: bool) -> str:
    if x is None:
        return "-"
    return f"{100 * x:+.1f} %" if relative else f"{x:+.4f}"


def render_selection(sel: Selection, out: Console) -> None:
    """One table per group, then the choice, the paste line and the schedule."""
    relative = sel.margin_scale == "relative"
    delta = f"{sel.margin:.0%}" if relative else f"{sel.margin:g}"
    out.print(
        f"[bold]selection[/bold]: maximize {sel.objective}, margin {delta}, alpha {sel.alpha} "
        f"(P(chosen not within the margin of the best) <= alpha), tie-break {sel.tie_break}"
        + (f", looks {sel.looks}" if sel.looks else "")
    )
    for g in sel.groups:
        table = Table(title=f"{g.group}: configuration minus the best of the others (MCB)")
        for col in ("config", "k", "boots", sel.objective, "vs best [MCB]", "status", "length"):
            table.add_column(col, overflow="fold")
        for c in g.configs:
            if c.eliminated_at_look:
                status = f"eliminated at look {c.eliminated_at_look}"
            elif not c.feasible:
                status = "excluded (constraint)"
            else:
                status = (
                    ", ".join(
                        s
                        for s, on in (
                            ("CHOSEN", c.arm == g.chosen),
                            ("may be best", c.in_subset),
                            (f"within {delta}", c.within_margin),
                        )
                        if on
                    )
                    or "worse"
                )
            digits = ".1f" if relative else ".4f"
            est = "-" if c.estimate is None else format(c.estimate, digits)
            vs = f"[{_rel(c.mcb_low, relative)}, {_rel(c.mcb_high, relative)}]"
            length = "-" if c.mean_accepted_length is None else f"{c.mean_accepted_length:.3f}"
            data_row(table, c.arm, str(c.speculative_tokens), str(c.boots), est, vs, status, length)
        out.print(table)
        out.print(f"{g.group}: [bold]{g.status}[/bold]: {g.reason}", highlight=False)
        if g.paste:
            out.print(f"  ship: {g.paste}", markup=False, highlight=False)
    if sel.schedule_speculative_config is not None:
        cfg = json.dumps(sel.schedule_speculative_config)
        out.print(
            f"dynamic speculation across concurrency: --speculative-config '{cfg}'",
            markup=False,
            highlight=False,
        )
    for note in sel.notes:
        out.print(f"selection note: {note}", markup=False, highlight=False)


def selection_table(sel: Selection) -> pd.DataFrame:
    """The report's selection table: one row per configuration of every group."""
    relative = sel.margin_scale == "relative"
    rows = []
    for g in sel.groups:
        for c in g.configs:
            rows.append(
                {
                    "group": g.group,
                    "configuration": c.arm,
                    "k": c.speculative_tokens,
                    "boots": c.boots,
                    sel.objective: None if c.estimate is None else round(c.estimate, 4),
                    "vs best [MCB]": f"[{_rel(c.mcb_low, relative)}, {_rel(c.mcb_high, relative)}]",
                    "may be best": "yes" if c.in_subset else "",
                    "within margin": "yes" if c.within_margin else "",
                    "chosen": "CHOSEN" if c.arm == g.chosen else "",
                    "eliminated at look": c.eliminated_at_look or "",
                }
            )
    return pd.DataFrame(rows)


def selection_section(sel: Selection) -> tuple[str, str, pd.DataFrame]:
    delta = f"{sel.margin:.0%}" if sel.margin_scale == "relative" else f"{sel.margin:g}"
    lines = [f"{g.group}: **{g.status}**: {g.reason}." for g in sel.groups]
    lines += [f"Ship ({g.group}): `{g.paste}`." for g in sel.groups if g.paste]
    if sel.schedule_speculative_config is not None:
        lines.append(f"Across concurrency: `{json.dumps(sel.schedule_speculative_config)}`.")
    text = (
        f"Maximize {sel.objective} per group, margin {delta}, alpha {sel.alpha}: with "
        f"probability >= {1 - sel.alpha:.0%} the chosen configuration is within the margin of "
        f"the true best. Method: {sel.method}. " + " ".join(lines)
    )
    return (Heading.SELECTION, text, selection_table(sel))
