"""What `specab analyze` and `specab plan` print for people (rich tables); the numbers come
from `bench.stats`, the verdict table from `bench.report`."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.records import METRIC, REGISTRY, short_name
from bench.report.console.bisect_view import render_bisection, render_screening
from bench.report.console.verdict_view import print_verdicts
from bench.report.sections import parity_sentence
from bench.report.tables import (
    across_p,
    data_row,
    difference,
    draft_length_table,
    estimate_text,
    group_verdict,
    render_selection,
)
from bench.stats import Analysis, MetricEstimate, Plan, SplitCheck


def _ci(est: float | None, lo: float | None, hi: float | None, digits: int = 4) -> str:
    if est is None:
        return "-"
    if lo is None or hi is None:
        return f"{est:.{digits}f} [n/a]"
    return f"{est:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _m(m: MetricEstimate, digits: int = 4) -> str:
    return "-" if m.estimate is None else estimate_text(m, digits)


def _num(x: float | None, spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def _margins(result: Analysis) -> str:
    return ", ".join(
        f"{METRIC[k].short} ±{100 * v:g} %" if METRIC[k].relative else f"{METRIC[k].short} ±{v}"
        for k, v in result.margins.items()
        if k in METRIC
    )


def _arms_table(result: Analysis) -> Table:
    """Per arm: boots, then every metric's estimate [CI] and between-boot SD."""
    arms = Table(title="Arms (ratio of sums over ok boots; t interval over boots)")
    cols = ["arm", "boots", "failed", "B_eff"]
    for m in REGISTRY:
        cols += [m.short, "sd"]
    for col in cols:
        right = col in ("boots", "failed", "B_eff")  # fold, never cut, on a narrow terminal
        arms.add_column(col, justify="right" if right else "left", overflow="fold")
    for a in result.arms:
        cells: list[str] = []
        for m in REGISTRY:
            est = a.metrics.get(m.name)
            if m.acceptance and not a.speculative:
                cells += ["no speculation" if not cells else "", ""]
            elif est is None:
                cells += ["-", "-"]
            else:
                sd_format = f".{1 if m.relative else 4}f"
                cells += [_m(est, m.digits), _num(est.between_boot_sd, sd_format)]
        boots = (a.arm, str(a.boots), str(a.failed_boots), _num(a.effective_boots, ".1f"))
        data_row(arms, *boots, *cells)
    return arms


def render_analysis(result: Analysis, out: Console) -> None:
    """The human view of an analysis: arms, comparisons with why, notes."""
    out.print(
        f"[bold]{escape(result.experiment)}[/bold]  baseline: {escape(result.baseline)}  "
        f"alpha: {result.alpha}  margins: {escape(_margins(result))}  primary: "
        f"{escape(', '.join(short_name(x) for x in result.primary_metrics))}"
    )
    if result.bisection is not None:  # a history's answer leads, before every point's rows
        render_bisection(result.bisection, out)
    out.print(_arms_table(result))
    print_verdicts(out, result)
    drafting = draft_length_table(result)
    if len(drafting):
        table = Table(title="Draft lengths vary: acceptance per position, two definitions")
        for col in drafting.columns:
            table.add_column(escape(str(col)), overflow="fold")
        for row in drafting.itertuples(index=False):
            data_row(table, *row)
        out.print(table)
    for s in result.speedups:
        out.print(
            f"speedup {s.arm} over {s.reference} (no speculation, concurrency {s.concurrency}): "
            f"{_ci(s.speedup, s.ci_low, s.ci_high, 3)}x (raw {1 - result.alpha:.0%} interval)",
            markup=False,
        )
    _render_peer_lengths(result, out)
    for d in result.drift:
        fmt = (lambda v: f"{100 * v:+.1f} %") if d.scale == "relative" else (lambda v: f"{v:+.4f}")
        ci = f"[{fmt(d.ci_low)}, {fmt(d.ci_high)}]" if d.ci_low is not None else "(1 boot)"
        out.print(
            f"drift {d.arm} {short_name(d.metric)} pass {d.first_pass} -> "
            f"{d.last_pass}: {fmt(d.change)} {ci} over {d.boots} boot(s): {d.verdict}",
            markup=False,
        )
    for p in result.parity:
        out.print(f"parity: {parity_sentence(p)}", markup=False)
    if result.breakdown is not None:
        _render_breakdown(result, out)
    if result.hosts is not None:
        _render_hosts(result, out)
    if result.selection is not None:
        render_selection(result.selection, out)
    if result.screening is not None:
        render_screening(result.screening, out)
    if result.sequential:
        out.print(
            f"sequential: [bold]{result.sequential.action}[/bold]: {result.sequential.reason}"
        )
    for note in result.notes:
        out.print(f"note: {note}", markup=False)


def _render_hosts(result: Analysis, out: Console) -> None:
    h = result.hosts
    if h is None:
        return
    table = Table(title="Ok boots per host (arms x hosts)")
    for col in ("arm", *h.hosts, "compared"):
        table.add_column(col, overflow="fold")
    for arm, counts in h.boots.items():
        how = (
            "within hosts"
            if arm in h.adjusted
            else "confounded: no claim"
            if arm in h.confounded
            else "baseline"
            if arm == result.baseline
            else "plain (balanced)"
        )
        data_row(table, arm, *(str(counts.get(x, 0)) for x in h.hosts), how)
    out.print(table)
    effect = ", ".join(
        f"{short_name(m)} p={p:.3g}" for m, p in h.host_effect_p.items() if p is not None
    )
    if effect:
        out.print(f"host effect (boot value = arm + host, F-test): {effect}", markup=False)


def _render_peer_lengths(result: Analysis, out: Console) -> None:
    """Mean accepted length as the tools users compare against define it (same requests)."""
    rows = [(a.arm, a.peer_lengths) for a in result.arms if a.peer_lengths is not None]
    if not rows:
        return
    t = Table(title="Mean accepted length as other tools define it (same requests; see docs)")
    for col in ("arm", "specab = vLLM /metrics", "mean over requests", "token-weighted", "n"):
        t.add_column(col, overflow="fold")
    for arm, p in rows:
        data_row(
            t,
            arm,
            _num(p.vllm_metrics, ".4f"),
            _num(p.request_mean, ".4f"),
            _num(p.token_weighted, ".4f"),
            str(p.requests),
        )
    out.print(t)


def _render_breakdown(result: Analysis, out: Console) -> None:
    b = result.breakdown
    assert b is not None
    table = Table(
        title=f"By {b.by} (secondary; verdicts: Holm within each group; p across: Holm across "
        "the groups)"
    )
    across = across_p(b)
    for col in (
        "group", "probes", "arm", "metric", "estimate [CI]", "vs baseline", "verdict", "p across"
    ):  # fmt: skip
        table.add_column(escape(col), overflow="fold")
    for g in b.groups:
        for a in g.arms:
            for metric, m in a.metrics.items():
                if m.estimate is None:
                    continue
                c = next((c for c in g.comparisons if c.arm == a.arm and c.metric == metric), None)
                data_row(
                    table,
                    g.group,
                    str(g.probes),
                    a.arm,
                    short_name(metric),
                    _m(m, METRIC[metric].digits),
                    difference(c)
                    if c is not None
                    else "baseline"
                    if a.arm == result.baseline
                    else "",
                    group_verdict(b, g.group, c, result.alpha) if c is not None else "",
                    across.get((g.group, a.arm, metric), ""),
                )
    out.print(table)
    out.print(f"note: {b.note}", markup=False)


def render_split(split: SplitCheck, out: Console) -> None:
    rates = ", ".join(f"{short_name(m)} {r:.1%}" for m, r in split.claimed_rate.items())
    out.print(
        f"split-arm {split.arm} ({split.boots} boots, {split.splits} splits"
        f"{'' if split.exhaustive else ', sampled'}): a primary difference was claimed in "
        f"{split.any_claimed_rate:.1%} of splits ({rates}); alpha {split.alpha}"
    )
    out.print(f"note: {split.note}", markup=False)


def _family_note(p: Plan) -> str:
    if p.alpha_given or not p.family_size or p.family_size < 2:
        return ""
    return (
        f" (the experiment's alpha over its {p.family_size} primary comparisons: Holm's first step)"
    )


def render_plan(p: Plan, out: Console) -> None:
    out.print(
        f"[bold]{short_name(p.metric)}[/bold]: effect {p.effect}"
        f"{' (relative; SD of its log)' if METRIC[p.metric].relative else ''} at {p.power:.0%} "
        f"power, alpha {p.alpha:.3g}{_family_note(p)}; pooled between-boot SD "
        f"{_num(p.between_boot_sd, '.4g')} (measured boots per arm: {p.boots_measured})"
    )
    n = p.boots_per_arm
    out.print(
        f"boots per arm: {n if n is not None else 'n/a'} "
        f"(at {p.prompts_per_boot_now} prompts per boot)"
    )
    if p.prompts_per_boot is not None:
        out.print(
            f"prompts per boot (Kalibera & Jones, boot {p.boot_cost_s:.1f} s, prompt "
            f"{p.prompt_cost_s:.3f} s): {p.prompts_per_boot}; then boots per arm: "
            f"{_num(p.boots_per_arm_at_optimum, 'd')}"
        )
        now, opt = p.seconds_per_arm_now, p.seconds_per_arm_at_optimum
        if now is not None and opt is not None:
            out.print(
                f"machine time per arm: {now / 60:.1f} min now vs {opt / 60:.1f} min at the "
                "optimum allocation"
            )
    if p.note:
        out.print(f"note: {p.note}", markup=False)
    if (sc := p.screening) is not None:
        out.print(
            f"screening {sc.candidates} candidates ([screen] margin = {sc.margin:g}, boot SD "
            f"{sc.boot_value_sd:.4g}): boots_per_arm = {sc.looks[-1]}, looks = {sc.looks}; "
            f"a harmless candidate clears {sc.cleared:.0%} of the time; ≈ {sc.boots_expected:.0f} "
            f"boots when all are harmless, ≈ {sc.boots_one_harmful or 0:.0f} when one is 4 "
            f"margins worse (every arm to the last look: {sc.boots_fixed_design})",
            markup=False,
        )
