"""`make demo` (`python -m bench.demo`): the product's real job, end to end, on this machine.

1. The demo models: the committed trained ones under arms/demo/models/ (nothing is built),
   else the fixed training recipe writes them (or only the missing DFlash drafter) first.
2. `run-ab arms/demo/demo.toml` through Ray, then the report.
3. The time split, then the verdict table and the report path as the last lines.
Rerunning resumes the same results directory (instant when complete); delete it to rerun.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from rich.console import Console

from bench.demo.build import build_demo_models, train_drafters
from bench.demo.tiny_models import MODELS_SUBDIR, committed_models, repo_root
from bench.errors import SpecabError

DEMO_SPEC = Path("arms") / "demo" / "demo.toml"


def ensure_models(console: Console) -> float:
    """Seconds spent building models (0 when the committed ones exist)."""
    models = committed_models()
    if models is not None and (models.dflash / "config.json").is_file():
        return 0.0
    t0 = time.monotonic()
    if models is not None:  # the target is there: only the DFlash drafter is missing
        console.print(f"no trained DFlash drafter: training it into {models.dflash} ...")
        train_drafters(models.target.parent)
        return time.monotonic() - t0
    out = repo_root() / MODELS_SUBDIR
    console.print(f"no committed demo models: training them into {out} (fixed recipe) ...")
    tmp = out.with_name(f".{out.name}-building")
    shutil.rmtree(tmp, ignore_errors=True)
    build_demo_models(tmp, train=True)
    tmp.rename(out)  # all or nothing: an interrupted build leaves no half model dir
    return time.monotonic() - t0


def run_orchestrated(spec_file: Path, results: Path, console: Console, t_start: float) -> None:
    from bench.report import analysis_or_refusal, print_end, write_report
    from bench.run import RunOptions, run_ab
    from bench.store import load_results

    resume = results.exists() and any(results.iterdir())
    if resume:
        console.print(f"resuming {results} (delete it for a fresh run)", markup=False)
    summary = run_ab(spec_file, RunOptions(results_dir=results, resume=resume), console)
    if not summary.complete:
        console.print(f"run incomplete: stopped={summary.stopped} lost={summary.lost}")
    loaded = load_results(results)
    boots = loaded.boots
    console.print(
        f"time: boots (start -> /health) {boots['boot_seconds'].fillna(0).sum():.0f} s, "
        f"probes {boots['probe_seconds'].fillna(0).sum():.0f} s, "
        f"run-ab wall {summary.wall_s:.0f} s, demo so far {time.monotonic() - t_start:.0f} s",
        markup=False,
        highlight=False,
    )
    # Last lines: the verdict table, then the report path.
    analysis, refusal = analysis_or_refusal(loaded)
    print_end(loaded, analysis, console, per_node=summary.per_node, refusal=refusal)
    if analysis is not None:
        console.print(f"report {write_report(loaded, analysis)}", markup=False, highlight=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.demo", description=__doc__)
    parser.add_argument("--results-dir", type=Path, default=Path("results") / "demo")
    default_spec = (repo_root() / DEMO_SPEC).resolve()
    parser.add_argument("--spec", type=Path, default=default_spec)
    args = parser.parse_args(argv)
    from bench.report import table_console

    console = table_console()
    t0 = time.monotonic()
    try:
        # A user's own --spec brings its own models; only the demo's are built here.
        build_s = ensure_models(console) if args.spec.resolve() == default_spec else 0.0
        if build_s:
            console.print(f"models built in {build_s:.0f} s")
        run_orchestrated(args.spec, args.results_dir, console, t0)
    except SpecabError as exc:
        console.print(f"error: {exc.one_line()}", markup=False)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
