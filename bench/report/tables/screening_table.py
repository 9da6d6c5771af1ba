"""A screening in the report and on the terminal: each candidate against the baseline with
its difference, one-sided bounds, the look that decided it and its status (from
`analysis.screening`)."""

from __future__ import annotations

import pandas as pd

from bench.records import METRIC
from bench.report.tables.headings import Heading
from bench.stats.schema import Screening


def _num(x: float | None, fmt: str) -> str:
    return "—" if x is None else fmt.format(x)


def screening_table(s: Screening) -> pd.DataFrame:
    m = METRIC[s.metric]
    fmt = "{:+.1%}" if m.relative else f"{{:+.{m.digits}f}}"
    rows = []
    for c in s.candidates:
        status = c.status + (" (within margin)" if c.within_margin else "")
        rows.append(
            {
                "candidate": c.arm,
                "boots": c.boots,
                f"Δ {m.short} vs {s.baseline}": _num(c.difference, fmt),
                "one-sided bounds": f"[{_num(c.ci_low, fmt)}, {_num(c.ci_high, fmt)}]",
                "decided at": "—" if c.decided_at_look is None else f"look {c.decided_at_look}",
                "status": status,
            }
        )
    return pd.DataFrame(rows)


def screening_summary(s: Screening) -> str:
    """One sentence: the rule, the error it keeps and the boots it took."""
    m = METRIC[s.metric]
    margin = f"{s.margin:.1%}" if m.relative else f"{s.margin:g}"
    return (
        f"Each candidate against {s.baseline} on {m.short}, one-sided, at looks "
        f"{', '.join(map(str, s.looks))}: cleared = not worse by more than {margin}, lowered "
        f"= worse; a wrong clear or a wrong lowered, over every candidate and look, each has "
        f"chance ≤ {s.alpha:g}. {s.reason} ({s.boots_used} boots; every arm to the last look: "
        f"{s.boots_fixed_design})."
    )


def screening_section(s: Screening) -> tuple[str, str, pd.DataFrame]:
    return (Heading.SCREENING, screening_summary(s), screening_table(s))
