"""What duets buy on a real run: for each results directory, the speed comparisons' paired
and unpaired interval widths side by side (their ratio), and how much of the speed variance
left after the arms the co-run groups and the slots explain.

    .venv/bin/python benchmarks/bench_duets.py RESULTS_DIR [RESULTS_DIR ...]

For a sweep, also the selection with speed compared within the groups (what specab does)
beside the same boots with the groups hidden (each boot given a host of its own, so no two
form a group): status, choice, and each configuration's MCB interval.

Widths come from the product's analysis (`analyze --json`: `ci_low`/`ci_high` against
`ci_unpaired_low`/`ci_unpaired_high`); the groups are the product's (`corun_groups`: a recorded
duet, else overlapping probe windows). The variance shares are ordinary least squares on log
output tokens/s per ok boot: arm, then arm + group, then arm + group + slot (a boot measured
alone is a group of its own). A ratio below 1 is a narrower paired interval.

"Explain" is the share of the sum of squares, which the groups' dummies inflate with few
boots (6 groups of 12 boots take 62 % with no shared noise at all); the variance share the
groups carry is taken per df, 1 - (residual SD after groups / after arms)^2, floored at 0,
as `analyze --json` reports it (`shared_machine.groups_share`, read from there). One run's
ratios move a lot with its few boots (each unpaired interval rests on two arms' SDs), so it
also prints the ratio this layout gives on average at that share: the same boots' arms and
groups, simulated log speeds whose group part has that share, the paired fit
(`bench.stats.compare.blocked_contrasts`) against a Welch interval at 95 %, the median over
2,000 draws. That number is the machine's; the table is the run's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy.stats import t as t_dist

from bench import stats
from bench.records import SPEED_METRIC, Results
from bench.stats.compare import blocked_contrasts
from bench.stats.inputs import corun_groups
from bench.store import load_results


def _rss(y: np.ndarray, *factors: list[str]) -> tuple[float, int]:
    """Residual sum of squares and residual df of y on the factors' dummies."""
    cols = [np.ones(len(y))]
    for f in factors:
        levels = sorted(set(f))[1:]
        cols += [np.array([v == lv for v in f], dtype=float) for lv in levels]
    x = np.column_stack(cols)
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    rank = int(np.linalg.matrix_rank(x))
    return float(np.sum((y - x @ beta) ** 2)), len(y) - rank


def shares(root: Path) -> dict[str, float]:
    """Residual SD after arms, after arms + groups (+ slots), and the shares explained."""
    res = load_results(root)
    analysis = stats.analyze(res)
    ok = res.ok_boots().set_index("boot_id")
    group_of = corun_groups(res.ok_boots())
    y, arm, group, slot = [], [], [], []
    for a in analysis.arms:
        for b in a.per_boot:
            v = b.output_tokens_per_s
            if v is None or not np.isfinite(v) or v <= 0:
                continue
            y.append(np.log(v))
            arm.append(a.arm)
            group.append(group_of.get(b.boot_id, f"alone:{b.boot_id}"))
            s = ok.loc[b.boot_id, "slot"] if "slot" in ok.columns else None
            slot.append(f"{ok.loc[b.boot_id, 'host']}/{s}")
    ys = np.asarray(y)
    rss_arm, df_arm = _rss(ys, arm)
    rss_grp, df_grp = _rss(ys, arm, group)
    rss_slot, df_slot = _rss(ys, arm, group, slot)
    rss_arm_slot, _ = _rss(ys, arm, slot)
    sharing = analysis.shared_machine  # the product's per-df share (`groups_share`)
    shared = float(sharing.groups_share) if sharing and sharing.groups_share is not None else 0.0
    baseline = analysis.comparisons[0].baseline if analysis.comparisons else arm[0]
    return {
        "boots": len(ys),
        "groups": len({g for g in group if not g.startswith("alone:")}),
        "sd_arm": float(np.sqrt(rss_arm / max(df_arm, 1))),
        "sd_group": float(np.sqrt(rss_grp / max(df_grp, 1))) if df_grp else float("nan"),
        "df_group": df_grp,
        "share_group": 1 - rss_grp / rss_arm if rss_arm else float("nan"),
        "shared": shared,
        "expected_ratio": expected_ratio(arm, group, baseline, shared) if shared < 1 else 0.0,
        "share_slot": 1 - rss_arm_slot / rss_arm if rss_arm else float("nan"),
        "share_slot_within": 1 - rss_slot / rss_grp if rss_grp and df_slot else float("nan"),
        "analysis": analysis,  # type: ignore[dict-item]
    }


def expected_ratio(arm: list[str], group: list[str], baseline: str, share: float) -> float:
    """Median paired/unpaired 95 % width ratio of this layout at this group share."""
    rng = np.random.default_rng(0)
    n, levels = 2000, sorted(set(group))
    gi = np.array([levels.index(g) for g in group])
    order = sorted(range(len(arm)), key=lambda i: arm[i] != baseline)
    arm, gi = [arm[i] for i in order], gi[order]
    y = rng.normal(0, np.sqrt(share), (n, len(levels)))[:, gi]
    y += rng.normal(0, np.sqrt(1 - share), (n, len(arm)))
    fitted, df = blocked_contrasts(y, arm, [levels[i] for i in gi])
    names, ratios = np.array(arm), []
    for other, (_, se) in fitted.items():
        a, b = y[:, names == baseline], y[:, names == other]
        va, vb = a.var(ddof=1, axis=1) / a.shape[1], b.var(ddof=1, axis=1) / b.shape[1]
        dfw = (va + vb) ** 2 / (va**2 / (a.shape[1] - 1) + vb**2 / (b.shape[1] - 1))
        ratios.append(t_dist.ppf(0.975, df) * se / (t_dist.ppf(0.975, dfw) * np.sqrt(va + vb)))
    return float(np.median(ratios)) if ratios and df >= 1 else float("nan")


def _unpaired(root: Path):  # type: ignore[no-untyped-def]
    """The analysis of the same boots with no co-run group (a host per boot)."""
    res = load_results(root)
    boots = res.boots.copy()
    boots["host"] = boots["boot_id"]
    if "corun_group" in boots.columns:
        boots["corun_group"] = None
    return stats.analyze(Results(probes=res.probes, boots=boots, manifest=res.manifest))


def _selection_table(console: Console, root: Path, paired) -> None:  # type: ignore[no-untyped-def]
    plain = _unpaired(root).selection
    for title, sel in (("paired (duets)", paired.selection), ("groups hidden", plain)):
        for g in sel.groups:
            rows = ", ".join(
                f"{c.arm} [{c.mcb_low:+.1%}, {c.mcb_high:+.1%}]"
                if c.mcb_low is not None and c.mcb_high is not None
                else f"{c.arm} (out)"
                for c in g.configs
            )
            console.print(
                f"  {title}, group {g.group}: {g.status}"
                f"{' ' + str(g.chosen) if g.chosen else ''} (look {g.look}); MCB: {rows}"
            )


def main(argv: list[str]) -> int:
    console = Console()
    for arg in argv:
        root = Path(arg)
        s = shares(root)
        analysis = s.pop("analysis")  # type: ignore[assignment]
        console.print(
            f"[bold]{root}[/]: {s['boots']} ok boots, {s['groups']} co-run groups; residual SD "
            f"of log tokens/s {s['sd_arm']:.3f} after arms -> {s['sd_group']:.3f} after groups "
            f"(df {s['df_group']}); groups explain {s['share_group']:.0%} of what arms leave, "
            f"slots {s['share_slot']:.0%} (and {s['share_slot_within']:.0%} within groups)"
        )
        console.print(
            f"  the groups carry {s['shared']:.0%} of the speed variance the arms leave (per "
            f"df); at that share this layout's paired/unpaired width ratio is "
            f"{s['expected_ratio']:.2f} on average (simulated)"
        )
        table = Table()
        for col in ("comparison", "pairing", "paired width", "unpaired width", "ratio"):
            table.add_column(col, justify="left" if col == "comparison" else "right")
        for c in analysis.comparisons:  # type: ignore[attr-defined]
            if c.metric != SPEED_METRIC:
                continue
            paired = c.ci_high - c.ci_low
            lo, hi = c.ci_unpaired_low, c.ci_unpaired_high
            unpaired = hi - lo if lo is not None and hi is not None else float("nan")
            table.add_row(
                f"{c.arm} vs {c.baseline}",
                c.pairing or "none",
                f"{paired:+.1%}".lstrip("+"),
                f"{unpaired:+.1%}".lstrip("+"),
                f"{paired / unpaired:.2f}" if unpaired == unpaired and unpaired else "-",
            )
        console.print(table)
        if analysis.selection is not None:  # type: ignore[attr-defined]
            _selection_table(console, root, analysis)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
