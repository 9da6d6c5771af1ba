"""`specab analyze DIR` (boot-level verdicts) and `specab plan DIR --effect X` (power)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from bench.errors import SpecabError

# Tables are wide (estimate [CI] columns); do not squeeze them into 80 columns in a pipe.
console = Console(highlight=False, soft_wrap=True, width=None if Console().is_terminal else 132)

METRIC_LABEL = {"acceptance_pos0": "pos0", "mean_accepted_length": "mean length"}


def parse_floats(text: str | None, option: str) -> list[float] | None:
    """'0.008,0.038' -> [0.008, 0.038]; a SpecabError naming the option otherwise."""
    if text is None:
        return None
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SpecabError(
            f"{text!r} is not a comma-separated list of numbers",
            field=option,
            fix="pass numbers separated by commas, e.g. 3,6,10",
        ) from None


def _prior(text: str | None) -> dict[str, float] | None:
    vals = parse_floats(text, "--prior-between-boot-sd")
    if vals is None:
        return None
    if len(vals) not in (1, 2):
        raise SpecabError(
            f"{text!r} has {len(vals)} values",
            field="--prior-between-boot-sd",
            fix="pass X (pos0) or X,Y (pos0, mean accepted length) measured in an A/A run",
        )
    return dict(zip(("acceptance_pos0", "mean_accepted_length"), vals, strict=False))


def _looks(text: str | None) -> list[int] | None:
    vals = parse_floats(text, "--looks")
    if vals is None:
        return None
    if any(v != int(v) for v in vals):
        raise SpecabError(f"{text!r}", field="--looks", fix="pass whole boot counts, e.g. 3,6,10")
    return [int(v) for v in vals]


def _ci(m: dict[str, Any], digits: int = 4) -> str:
    est, lo, hi = m.get("estimate"), m.get("ci_low"), m.get("ci_high")
    if est is None:
        return "-"
    if lo is None or hi is None:
        return f"{est:.{digits}f} [n/a]"
    return f"{est:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _num(x: float | None, spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def render(result: dict[str, Any], out: Console) -> None:
    """The human view of an `analyze` object: arms, comparisons with why, notes."""
    out.print(
        f"[bold]{result['experiment']}[/bold]  baseline: {result['baseline']}  "
        f"alpha: {result['alpha']}  margins: pos0 ±{result['margins']['acceptance_pos0']}, "
        f"mean length ±{result['margins']['mean_accepted_length']}"
    )
    arms = Table(title="Arms (ratio of sums over ok boots; t interval over boots)")
    for col in ("arm", "boots", "failed", "pos0", "sd", "mean length", "sd"):
        arms.add_column(col, justify="left" if col in ("arm", "pos0", "mean length") else "right")
    for a in result["arms"]:
        p0, ml = a["metrics"]["acceptance_pos0"], a["metrics"]["mean_accepted_length"]
        arms.add_row(
            a["arm"],
            str(a["boots"]),
            str(a["failed_boots"]),
            _ci(p0),
            _num(p0["between_boot_sd"], ".4f"),
            _ci(ml),
            _num(ml["between_boot_sd"], ".4f"),
        )
    out.print(arms)
    comps = Table(title="Each arm vs baseline (Welch on boot values; Holm across the family)")
    for col in ("arm", "metric", "difference [CI]", "p", "p Holm", "verdict"):
        comps.add_column(col)
    for c in result["comparisons"]:
        d = {"estimate": c["difference"], "ci_low": c["ci_low"], "ci_high": c["ci_high"]}
        comps.add_row(
            f"{c['arm']} vs {c['baseline']}",
            METRIC_LABEL[c["metric"]],
            _ci(d),
            _num(c["p_value"]),
            _num(c["p_adjusted"]),
            c["verdict"],
        )
    out.print(comps)
    for c in result["comparisons"]:
        out.print(f"- {c['arm']} {METRIC_LABEL[c['metric']]}: {c['verdict']}: {c['why']}")
        extra = []
        if c.get("permutation_p") is not None:
            extra.append(
                f"permutation p {c['permutation_p']:.3g} (min attainable "
                f"{c['permutation_min_p']:.3g})"
            )
        if c.get("new_prompts_ci"):
            lo, hi = c["new_prompts_ci"]
            if lo is not None:
                extra.append(f"on new prompts [{lo:+.4f}, {hi:+.4f}]")
        if extra:
            out.print("    " + "; ".join(extra))
    seq = result.get("sequential")
    if seq:
        out.print(f"sequential: [bold]{seq['action']}[/bold]: {seq['reason']}")
    for note in result.get("notes", []):
        out.print(f"note: {note}", markup=False)


def analyze(
    results_dir: Annotated[Path, typer.Argument(help="Results directory (results/<name>).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON object only.")] = False,
    baseline: Annotated[str | None, typer.Option(help="Arm compared against.")] = None,
    alpha: Annotated[float | None, typer.Option(help="Two-sided level, (0, 0.5).")] = None,
    margin_pos0: Annotated[float | None, typer.Option(help="Margin for pos0.")] = None,
    margin_length: Annotated[float | None, typer.Option(help="Margin, mean length.")] = None,
    prior_between_boot_sd: Annotated[
        str | None,
        typer.Option(help="A/A-measured between-boot SD for 1-boot arms: X (pos0) or X,Y."),
    ] = None,
    split_arm: Annotated[
        str | None, typer.Option(help="A/A check: split this arm's boots into two pseudo-arms.")
    ] = None,
    looks: Annotated[
        str | None, typer.Option(help="Planned sequential looks, boots per arm, e.g. 3,6,10.")
    ] = None,
    resamples: Annotated[int, typer.Option(help="Resamples for the resampling parts.")] = 10_000,
    seed: Annotated[int, typer.Option(help="Seed of the resampling parts.")] = 0,
) -> None:
    """Boot-level verdicts: every arm vs the baseline on pos0 acceptance and mean length."""
    from bench import stats
    from bench.store import load_results

    if resamples < 0:
        raise SpecabError("must be >= 0", field="--resamples", fix="pass e.g. 10000")
    results = load_results(results_dir)
    src = str(results_dir)
    opts: dict[str, Any] = {
        "alpha": alpha,
        "margin_pos0": margin_pos0,
        "margin_length": margin_length,
    }
    if split_arm is not None:
        split = stats.split_arm(
            results.probes, results.boots, results.manifest, split_arm, source=src, **opts
        )
        if as_json:
            typer.echo(json.dumps(split, indent=2, allow_nan=False))
            return
        console.print(
            f"split-arm {split['arm']} ({split['boots']} boots, {split['splits']} splits"
            f"{'' if split['exhaustive'] else ', sampled'}): a difference was claimed in "
            f"{split['any_claimed_rate']:.1%} of splits (pos0 "
            f"{split['claimed_rate']['acceptance_pos0']:.1%}, mean length "
            f"{split['claimed_rate']['mean_accepted_length']:.1%}); alpha {split['alpha']}"
        )
        console.print(f"note: {split['note']}", markup=False)
        return
    result = stats.analyze(
        results.probes,
        results.boots,
        results.manifest,
        baseline=baseline,
        prior_between_boot_sd=_prior(prior_between_boot_sd),
        looks=_looks(looks),
        n_resamples=resamples,
        seed=seed,
        source=src,
        **opts,
    )
    if as_json:
        typer.echo(json.dumps(result, indent=2, allow_nan=False))
    else:
        render(result, console)


def plan(
    results_dir: Annotated[Path, typer.Argument(help="Results directory (results/<name>).")],
    effect: Annotated[float, typer.Option(help="Smallest effect worth detecting (metric units).")],
    metric: Annotated[
        str, typer.Option(help="acceptance_pos0 or mean_accepted_length.")
    ] = "acceptance_pos0",
    power: Annotated[float, typer.Option(help="Target power.")] = 0.8,
    alpha: Annotated[float | None, typer.Option(help="Two-sided level (manifest default).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON object only.")] = False,
) -> None:
    """Boots per arm and prompts per boot for a target effect, from measured variance."""
    from bench.stats import plan_from_results
    from bench.store import load_results

    results = load_results(results_dir)
    p = plan_from_results(
        results.probes,
        results.boots,
        results.manifest,
        effect=effect,
        metric=metric,
        power=power,
        alpha=alpha,
        source=str(results_dir),
    )
    if as_json:
        typer.echo(json.dumps(p, indent=2, allow_nan=False))
        return
    console.print(
        f"[bold]{METRIC_LABEL[metric]}[/bold]: effect {effect} at {power:.0%} power, "
        f"alpha {p['alpha']}; pooled between-boot SD {_num(p['between_boot_sd'], '.4g')} "
        f"(measured boots per arm: {p['boots_measured']})"
    )
    n = p["boots_per_arm"]
    console.print(
        f"boots per arm: {n if n is not None else 'n/a'} "
        f"(at {p['prompts_per_boot_now']} prompts per boot)"
    )
    if p["prompts_per_boot"] is not None:
        console.print(
            f"prompts per boot (Kalibera & Jones, boot {p['boot_cost_s']:.1f} s, prompt "
            f"{p['prompt_cost_s']:.3f} s): {p['prompts_per_boot']}; then boots per arm: "
            f"{_num(p['boots_per_arm_at_optimum'], 'd')}"
        )
        now, opt = p.get("seconds_per_arm_now"), p.get("seconds_per_arm_at_optimum")
        if now is not None and opt is not None:
            console.print(
                f"machine time per arm: {now / 60:.1f} min now vs {opt / 60:.1f} min at the "
                "optimum allocation"
            )
    if p.get("note"):
        console.print(f"note: {p['note']}", markup=False)


def register(app: typer.Typer) -> None:
    app.command("analyze")(analyze)
    app.command("plan")(plan)
