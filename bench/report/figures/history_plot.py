"""Figure 0 of a culprit search: the searched metric along the history, every visited point's
mean with its interval over boots, the points never booted marked on the axis, and the
culprit (or the range the search ended with) shaded."""

from __future__ import annotations

from matplotlib.figure import Figure

from bench.records import METRIC
from bench.report.figures.plot_style import new_figure
from bench.stats import Bisection

_ENDS = ("good end", "bad end")


def plot_history(b: Bisection) -> Figure:
    m = METRIC[b.metric]
    fig = new_figure(max(6.0, 0.45 * len(b.points) + 2.0), 3.8)
    ax = fig.subplots()
    index = {p.arm: p.index for p in b.points}
    if b.range_first is not None and b.range_last is not None:
        lo, hi = index[b.range_first], index[b.range_last]
        label = "culprit" if b.culprit is not None else "the change lies here"
        ax.axvspan(lo - 0.45, hi + 0.45, color="#d62728", alpha=0.15, label=label)
    for p in b.points:
        if p.estimate is None:
            why = "x" if p.decision == "skipped" else "|"
            ax.plot([p.index], [0], marker=why, color="grey", transform=ax.get_xaxis_transform())
            continue
        lo_ = p.estimate - p.ci_low if p.ci_low is not None else 0.0
        hi_ = p.ci_high - p.estimate if p.ci_high is not None else 0.0
        colour = "#1f77b4" if p.decision in ("like good", "good end") else "#d62728"
        if p.decision not in (*_ENDS, "like good", "like bad"):
            colour = "#7f7f7f"
        ax.errorbar(
            [p.index], [p.estimate], yerr=[[lo_], [hi_]], fmt="s" if p.decision in _ENDS else "o",
            color=colour, capsize=3,
        )  # fmt: skip
        ax.annotate(f"{p.boots}", (p.index, p.estimate), textcoords="offset points",
                    xytext=(5, 4), fontsize=7, color=colour)  # fmt: skip
    ax.set_xticks([p.index for p in b.points])
    ax.set_xticklabels([_tick(p.arm, p.subject) for p in b.points], rotation=60, ha="right",
                       fontsize=7)  # fmt: skip
    ax.set_ylabel(m.label)
    ax.grid(alpha=0.3)
    if b.range_first is not None:
        ax.legend(loc="best", fontsize=8)
    fig.suptitle(
        f"Where did {m.short} change? {_answer(b)} ({b.boots} boots)",
        x=0.01, ha="left", fontsize=11,
    )  # fmt: skip
    return fig


def _tick(arm: str, subject: str | None) -> str:
    """A point's label: its arm and, for a git history, its commit's subject (cut short)."""
    if not subject:
        return arm
    return f"{arm} {subject if len(subject) <= 28 else subject[:27] + '…'}"


def _answer(b: Bisection) -> str:
    """The answer in a few words (the reason sentence is the report's, beside the figure)."""
    if b.outcome == "culprit" and b.culprit is not None:
        subject = (b.culprit_commit or {}).get("subject")
        return f"culprit {b.culprit}" + (f": {subject[:48]}" if subject else "")
    if b.outcome == "range":
        return f"in {b.range_first} .. {b.range_last}"
    return "did not reproduce" if b.outcome == "not_reproduced" else "searching"
