"""`specab analyze DIR` (boot-level verdicts, a CI gate with --fail-on) and `specab plan DIR
--effect X` (power)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bench.commands.options import (
    Alpha,
    Baseline,
    By,
    ExcludeBoot,
    Json,
    Margin,
    MinDraftingShare,
    ResultsDir,
    as_flags,
    check_share,
    deprecated,
    flags_command,
    margins_given,
    parse_by,
    parse_floats,
    results_dir_not_spec,
)
from bench.errors import SpecabError

if TYPE_CHECKING:
    from rich.console import Console

    from bench.records import Results
    from bench.stats import Analysis, Prior, SplitCheck


def _console() -> Console:
    from bench.report import table_console  # lazy: the report package imports matplotlib

    return table_console()


def _prior_sd(text: str | None) -> dict[str, float] | None:
    """X[,Y...]: the SDs of the acceptance metrics, in their registry order."""
    from bench.records import ACCEPTANCE_METRICS

    vals = parse_floats(text, "--prior-between-boot-sd")
    if vals is None:
        return None
    if not 1 <= len(vals) <= len(ACCEPTANCE_METRICS):
        raise SpecabError(
            f"{text!r} has {len(vals)} values",
            field="--prior-between-boot-sd",
            fix=f"pass one SD per metric, in this order: {', '.join(ACCEPTANCE_METRICS)} "
            "(as many as you have, from an A/A run)",
        )
    return dict(zip(ACCEPTANCE_METRICS, vals, strict=False))


def _looks(text: str | None) -> list[int] | None:
    vals = parse_floats(text, "--looks")
    if vals is None:
        return None
    if any(v != int(v) for v in vals):
        raise SpecabError(f"{text!r}", field="--looks", fix="pass whole boot counts, e.g. 3,6,10")
    return [int(v) for v in vals]


def _fail_on(text: str | None) -> set[str]:
    from bench.stats import VERDICTS

    names = {x.strip() for x in (text or "").split(",") if x.strip()}
    unknown = sorted(names - set(VERDICTS))
    if unknown:
        raise SpecabError(
            f"unknown verdict(s) {unknown}", field="--fail-on", fix=f"use some of: {VERDICTS}"
        )
    return names


def _prior(sd: str | None, df: float | None, from_dir: Path | None, target: Results) -> Prior:
    from bench.stats import Prior, prior_from_results
    from bench.store import load_results

    if from_dir is None:
        return Prior.from_values(_prior_sd(sd), df)
    if sd is not None or df is not None:
        raise SpecabError(
            "--prior-from reads the SD and its df from an A/A run",
            field="--prior-from",
            fix="pass either --prior-from DIR or --prior-between-boot-sd X --prior-df N",
        )
    aa = load_results(from_dir)
    return prior_from_results(aa, source=str(from_dir), target=target)


@dataclass(frozen=True)
class AnalyzeFlags:
    """`specab analyze`'s options, one field each (`flags_command` makes them Typer's)."""

    results_dir: ResultsDir
    as_json: Json = False
    fmt: Annotated[
        str | None,
        typer.Option("--format", help="table (default) or markdown (CI job summaries)."),
    ] = None
    baseline: Baseline = None
    alpha: Alpha = None
    margin: Margin = None
    by: By = None
    exclude_boot: ExcludeBoot = None
    min_drafting_share: MinDraftingShare = None
    prior_between_boot_sd: Annotated[
        str | None,
        typer.Option(help="A/A-measured between-boot SD for 1-boot arms: X (pos0) or X,Y."),
    ] = None
    prior_df: Annotated[
        float | None, typer.Option(help="Degrees of freedom of that SD: arms x (boots - 1).")
    ] = None
    prior_from: Annotated[
        Path | None, typer.Option(help="A/A results directory to read the SD and its df from.")
    ] = None
    split_arm: Annotated[
        str | None, typer.Option(help="A/A check: split this arm's boots into two pseudo-arms.")
    ] = None
    looks: Annotated[
        str | None, typer.Option(help="Planned sequential looks, boots per arm, e.g. 3,6,10.")
    ] = None
    resamples: Annotated[int, typer.Option(help="Resamples for the resampling parts.")] = 10_000
    seed: Annotated[int, typer.Option(help="Seed of the resampling parts.")] = 0
    power: Annotated[float, typer.Option(help="Power for mde and boots needed.")] = 0.8
    fail_on: Annotated[
        str | None,
        typer.Option(help="Exit 1 if a primary verdict is one of these, e.g. regressed."),
    ] = None


def analyze(f: AnalyzeFlags) -> int:
    """Boot-level verdicts: every arm vs the baseline on pos0 acceptance and mean length
    (primary) and output tokens/s (secondary unless the experiment lists it as primary).

    Exit 0, or 1 when --fail-on names a primary verdict that occurred; 2 on any error."""
    from bench import stats
    from bench.store import load_results

    out_fmt = _output(f.fmt, f.as_json, f.resamples, f.power)
    gate = _fail_on(f.fail_on)
    results_dir_not_spec(f.results_dir)
    results = load_results(f.results_dir, stats.probe_columns(f.by))
    src = str(f.results_dir)
    with as_flags():
        options = stats.AnalysisOptions(
            baseline=f.baseline,
            alpha=f.alpha,
            margins=margins_given(f.margin),
            looks=_looks(f.looks),
            prior=_prior(f.prior_between_boot_sd, f.prior_df, f.prior_from, results),
            by=parse_by(f.by),
            exclude_boots=tuple(f.exclude_boot or ()),
            min_drafting_share=check_share(
                f.min_drafting_share, stats.AnalysisOptions.min_drafting_share
            ),
            n_resamples=f.resamples,
            seed=f.seed,
            power=f.power,
        )
        if f.split_arm is not None:
            if gate:
                raise SpecabError(
                    "the split check has no verdicts", field="--fail-on", fix="drop --fail-on"
                )
            _print_split(stats.split_arm(results, f.split_arm, options, source=src), out_fmt)
            return 0
        result = stats.analyze(results, options, source=src)
    _print_analysis(result, out_fmt)
    primary = [c for c in result.comparisons if c.family == "primary"]
    return 1 if any(c.verdict in gate for c in primary) else 0


def _output(fmt: str | None, as_json: bool, resamples: int, power: float) -> str:
    """The output asked for (json, markdown or table), the numeric options checked first."""
    if resamples < 0:
        raise SpecabError("must be >= 0", field="--resamples", fix="pass e.g. 10000")
    if fmt not in (None, "table", "json", "markdown"):
        raise SpecabError(f"{fmt!r}", field="--format", fix="use table or markdown (or --json)")
    if as_json and fmt not in (None, "json"):
        raise SpecabError(
            f"--json and --format {fmt} ask for two outputs",
            field="--format",
            fix="pass one of them: --json for the JSON object, --format for a table",
        )
    if fmt == "json":
        deprecated("--format json", "--json")
    if not 0 < power < 1:
        raise SpecabError(f"{power!r} is out of range", field="--power", fix="use e.g. 0.8")
    return "json" if as_json else fmt or "table"


def _print_split(split: SplitCheck, out_fmt: str) -> None:
    if out_fmt == "json":
        typer.echo(json.dumps(split.model_dump(mode="json"), indent=2, allow_nan=False))
    else:
        from bench.report import render_split

        render_split(split, _console())


def _print_analysis(result: Analysis, out_fmt: str) -> None:
    if out_fmt == "json":
        from bench.report import analysis_json  # its tables only: no matplotlib

        typer.echo(json.dumps(analysis_json(result), indent=2, allow_nan=False))
    elif out_fmt == "markdown":
        from bench.report import verdict_markdown

        typer.echo(verdict_markdown(result), nl=False)
    else:
        from bench.report import render_analysis

        render_analysis(result, _console())


def plan(
    results_dir: ResultsDir,
    effect: Annotated[float, typer.Option(help="Smallest effect worth detecting (metric units).")],
    metric: Annotated[
        str | None,
        typer.Option(
            help="A metric of analyze --json (default: the first primary one, pos0); a ratio "
            "metric's effect is relative (output_tokens_per_s: 0.05 = +5 %)."
        ),
    ] = None,
    power: Annotated[float, typer.Option(help="Target power.")] = 0.8,
    alpha: Alpha = None,
    as_json: Json = False,
    arms: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Also size a [screen] of this many candidates against the baseline, with "
            "--effect as its margin (from this pilot's boot-to-boot spread).",
        ),
    ] = None,
) -> None:
    """Boots per arm and prompts per boot for a target effect, from measured variance."""
    from bench.records import PRIMARY_DEFAULT
    from bench.stats import plan_from_results
    from bench.store import load_results

    results_dir_not_spec(results_dir)
    results = load_results(results_dir)
    with as_flags():
        p = plan_from_results(
            results,
            effect=effect,
            metric=metric or PRIMARY_DEFAULT[0],
            power=power,
            alpha=alpha,
            source=str(results_dir),
            screen_arms=arms,
        )
    if as_json:
        typer.echo(json.dumps(p.to_json(), indent=2, allow_nan=False))
    else:
        from bench.report import render_plan

        render_plan(p, _console())


def register(app: typer.Typer) -> None:
    app.command("analyze")(flags_command(AnalyzeFlags, analyze))
    app.command("plan")(plan)
