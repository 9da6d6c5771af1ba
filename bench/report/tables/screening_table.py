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


def _formats(s: Screening) -> tuple[str, str]:
    """How the screening's differences are printed, and its margin as printed."""
    relative = METRIC[s.metric].relative
    fmt = "{:+.1%}" if relative else f"{{:+.{METRIC[s.metric].digits}f}}"
    return fmt, f"{s.margin:.1%}" if relative else f"{s.margin:g}"


def screening_table(s: Screening) -> pd.DataFrame:
    m = METRIC[s.metric]
    fmt, _ = _formats(s)
    rows = []
    for c in s.candidates:
        status = (
            c.status
            + (" (within margin)" if c.within_margin else "")
            + (" (runs the baseline's code)" if c.same_code else "")
        )
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
    _, margin = _formats(s)
    used = {c.spread for c in s.candidates if c.spread is not None}
    spread = (
        " with one boot spread pooled over every arm" if used == {"pooled"}
        else " with each pair's own spread (Welch)" if used == {"welch"}
        else " with one boot spread pooled over every arm (each pair's own where the "
        "baseline was noisier)" if used
        else ""
    )  # fmt: skip
    return (
        f"Each candidate against {s.baseline} on {m.short}, one-sided, at looks "
        f"{', '.join(map(str, s.looks))}{spread}: cleared = not worse by more than {margin}, "
        f"lowered = worse; a wrong clear or a wrong lowered, over every candidate and look, "
        f"each has chance ≤ {s.alpha:g}. {s.reason} ({s.boots_used} boots; every arm to the "
        f"last look: {s.boots_fixed_design})."
    )


_SAID = {
    "cleared": "cleared: not worse than {base} by more than {margin}",
    "lowered": "lowered: worse than {base}",
    "unresolved": "unresolved at the last look it reached",
}


def screening_headlines(s: Screening) -> list[str]:
    """The report's answer for a screening, in its own words and margin: its outcome, then
    one sentence per candidate with its difference and one-sided bounds."""
    m = METRIC[s.metric]
    fmt, margin = _formats(s)
    said = [f"**screening** on {m.short} (margin {margin}): {s.reason}."]
    for c in s.candidates:
        if c.same_code:  # no test, no numbers: it is the baseline's code
            said.append(f"**{c.arm}** runs {s.baseline}'s code: cleared without boots.")
            continue
        words = _SAID[c.status].format(base=s.baseline, margin=margin)
        if c.within_margin:
            words += f", by less than {margin}"
        at = f" at look {c.decided_at_look}" if c.decided_at_look is not None else ""
        said.append(
            f"**{c.arm}** vs {s.baseline}, {m.short}: {_num(c.difference, fmt)} one-sided "
            f"[{_num(c.ci_low, fmt)}, {_num(c.ci_high, fmt)}], {c.boots} boots: {words}{at}."
        )
    return said


def screening_section(s: Screening) -> tuple[str, str, pd.DataFrame]:
    return (Heading.SCREENING, screening_summary(s), screening_table(s))
