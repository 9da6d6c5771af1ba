"""`specab validate FILE`, `specab schema`, `specab materialize FILE --arm NAME --out DIR`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from bench.commands.options import ExperimentFile

if TYPE_CHECKING:
    from bench.experiment import Experiment, Preflight
    from bench.experiment.launch import AppliedDiff

console = Console(highlight=False, soft_wrap=True)


def validate(
    file: ExperimentFile,
    cluster: Annotated[
        bool,
        typer.Option(
            "--cluster",
            help="The boots run on cluster nodes: a model missing here is a warning, not an "
            "error (as with run-ab --address).",
        ),
    ] = False,
) -> None:
    """Check an experiment file (everything run-ab checks before it writes anything) and
    print, per arm, what a boot would run. Boots nothing, writes nothing."""
    import tempfile

    from bench.experiment.history import served_diffs_in

    # a git history's served diffs live in a directory that goes with this command
    with (
        tempfile.TemporaryDirectory(prefix="specab-validate-") as tmp,
        served_diffs_in(Path(tmp)),
    ):
        _validate(file, cluster)


def _validate(file: Path, cluster: bool) -> None:
    from bench.experiment import (
        command_line,
        inspect_experiment,
        measurement,
        member_title,
        ready_timeout,
    )
    from bench.experiment.history import is_served_diff

    checked, views = inspect_experiment(file, cluster=cluster)
    spec, exp = checked.spec, checked.spec.experiment
    measured = {v.arm.name: measurement(spec, file, v.arm) for v in views}
    n = len(views)
    console.print(f"[bold]{exp.name}[/bold]: {file} is valid")
    if spec.bisect is None:
        console.print(
            f"{n} arm(s) x {exp.boots_per_arm} boot(s) = {n * exp.boots_per_arm} boots; "
            f"baseline: {spec.baseline}; probe sets: {', '.join(spec.probes.sets)}"
        )
    else:
        _print_history(spec, file)
    if spec.sweep is not None:
        _print_sweep(spec)
    _print_nodes(spec)
    for v in views:
        a, plan = v.arm, v.plan
        console.print(
            f"\n[bold]arm {a.name}[/bold]  definition sha256 {a.definition_sha256()[:16]}"
        )
        for m in v.members:
            title = member_title(m, plan.nodes)
            console.print(f"  {title} command: {command_line(m)}", markup=False)
        console.print(f"  measures: {measured[a.name].describe()}", markup=False)
        env = " ".join(f"{k}={val}" for k, val in sorted(v.env_set.items())) or "(none)"
        console.print(f"  env set by the file: {env}", markup=False)
        if a.name != spec.baseline:
            diff = (
                ", ".join(f"{k}: {b!r} -> {x!r}" for k, (b, x) in v.env_vs_baseline.items())
                or "(same)"
            )
            console.print(f"  env vs baseline: {diff}", markup=False)
        diffs = a.diffs()
        commit = spec.arm(a.name).commit
        for p in a.patches:
            # a history point's served diff: named by its range, not a temporary file
            where = f"good..{commit[:12]}" if commit and is_served_diff(p) else str(p)
            console.print(
                f"  patch: {p.stem} ({where}{_diff_note(diffs.get(p), p in diffs)})",
                markup=False,
            )
        for which, cfg in (("target", a.target_config), ("draft", a.draft_config)):
            if cfg is not None:
                console.print(
                    f"  {which}_config overlay: {json.dumps(cfg, sort_keys=True)}", markup=False
                )
        console.print(f"  python: {a.python}", markup=False)
        wait, how = ready_timeout(a, spec.server.ready_timeout_s, spec.resources.gpu)
        console.print(f"  ready timeout: {wait:.0f} s ({how})", markup=False)
    hashes: dict[str, list[str]] = {}
    for v in views:
        hashes.setdefault(v.arm.definition_sha256(), []).append(v.arm.name)
    for names in hashes.values():
        if len(names) > 1:  # a history's points that serve one code: the search boots one
            what = (
                "serve the same code: the search boots the first of them only"
                if spec.bisect is not None
                else "run exactly the same thing (an A/A control?)"
            )
            console.print(f"\nnote: arms {', '.join(names)} {what}", markup=False)
    for line in (*checked.warnings, *checked.advice):
        console.print(f"\n{line}", markup=False)
    _print_lint(checked, file)


def _print_history(spec: Experiment, file: Path) -> None:
    """A [bisect] file: the history's size, what the search may boot, and what each point
    of a git range leaves unserved over the installed build."""
    b = spec.bisect
    assert b is not None
    arms = spec.arms
    console.print(
        f"a history of {len(arms)} points ({arms[0].name} .. {arms[-1].name}): the search "
        f"boots the ends (at {', '.join(map(str, b.endpoint_looks))} boots each), then the "
        f"points it asks for, at most {b.most_boots} boots a point (a culprit's "
        "confirmation included); probe sets: " + ", ".join(spec.probes.sets),
        markup=False,
    )
    if b.git is None or b.git.build is not None:
        return
    from bench.experiment.history import history_points

    for p in history_points(b.git.model_dump(), Path(file)):
        if p.get("unserved"):
            console.print(
                f"  {p['commit'][:12]} ({p['subject']}): not served over the build: "
                + ", ".join(p["unserved"]),
                markup=False,
            )


def _print_nodes(spec: Experiment) -> None:
    """Gang boots and the node preparation before every boot, when the file asks for them."""
    res, srv = spec.resources, spec.server
    if res.nodes > 1:
        console.print(
            f"gang boots: {res.nodes} nodes per boot (one Ray placement group, STRICT_SPREAD; "
            "the head serves the API, every other node runs a headless engine; $HEAD_IP, "
            "$MASTER_PORT, $NODE_IP, $PORT and $BOOT_ID are chosen per boot)",
            markup=False,
        )
    for cmd in srv.pre_boot:
        console.print(f"before every boot, on each node: {cmd}", markup=False)
    if srv.min_free_memory_gb:
        console.print(
            f"before every boot: wait until MemAvailable >= {srv.min_free_memory_gb:g} GiB "
            f"(up to {srv.memory_wait_s:g} s)",
            markup=False,
        )


def _print_lint(checked: Preflight, file: Path) -> None:
    """The findings of `specab lint` (known draft/target config mismatches)."""
    report = checked.lint(file)
    console.print(f"\nlint: {report.summary()}", markup=False)
    for line in report.lines():
        console.print(f"  {line}", markup=False)


def schema(
    markdown: Annotated[
        bool,
        typer.Option("--markdown", help="The reference page (docs/reference/) instead."),
    ] = False,
) -> None:
    """Print the JSON schema of the experiment file (for editors), or its reference page."""
    from bench.experiment import experiment_reference_markdown, json_schema

    if markdown:
        typer.echo(experiment_reference_markdown(), nl=False)
    else:
        typer.echo(json.dumps(json_schema(), indent=2))


def materialize(
    file: ExperimentFile,
    arm: Annotated[str, typer.Option("--arm", help="Arm to materialize.")],
    out: Annotated[Path, typer.Option("--out", help="New or empty output directory.")],
    engine_seed: Annotated[
        int | None, typer.Option("--engine-seed", help="Engine --seed, as a boot would pass.")
    ] = None,
    cluster: Annotated[
        bool,
        typer.Option("--cluster", help="Models that only the cluster's nodes have: no error."),
    ] = False,
) -> None:
    """Write exactly what one boot of ARM would run: command.sh, server.env, plan.json,
    overlay and patch directories."""
    from bench.experiment import materialize_arm

    plan = materialize_arm(file, arm, out, engine_seed=engine_seed, cluster=cluster)
    console.print(f"wrote {out}/command.sh ({len(plan.argv)} argv items)", markup=False)
    for which, path in plan.overlays.items():
        console.print(f"  {which} overlay: {path}", markup=False)
    if plan.patch_dir:
        console.print(f"  patch dir: {plan.patch_dir}", markup=False)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
    app.command("schema")(schema)
    app.command("materialize")(materialize)


def _print_sweep(spec: Any) -> None:
    """The grid, the generated arms per selection group and what will be selected."""
    from bench.experiment import sweep_cells

    sw = spec.sweep
    cells = sweep_cells(spec) or {}
    grid = " x ".join(f"{axis} {levels}" for axis, levels in sw.grid.items())
    looks = spec.experiment.looks
    console.print(
        f"sweep: {grid}" + (" + no speculation" if sw.no_speculation else "") + f"; select: "
        f"maximize {sw.objective} within {sw.margin:g} of the best (alpha "
        f"{spec.experiment.alpha}), tie-break {sw.tie_break}"
        + (f"; looks {looks}: clearly worse configurations get no more boots" if looks else ""),
        markup=False,
    )
    groups: dict[str, list[str]] = {}
    for c in cells.get("cells", []):
        groups.setdefault(c["group"], []).append(c["arm"])
    for group, arms in groups.items():
        console.print(f"  group {group}: {', '.join(arms)}", markup=False)


def _diff_note(applied: AppliedDiff | None, is_diff: bool) -> str:
    """What a diff patch does to this arm's build, for the arm's summary."""
    if not is_diff:
        return ""
    if applied is None:
        return ": a diff, applied when the boot starts"
    files = ", ".join(m.path for m in applied.modules)
    what = "already in" if applied.noop else "applies to"
    same = (
        f"; code unchanged in {', '.join(applied.code_unchanged)}" if applied.code_unchanged else ""
    )
    return f": a diff that {what} {applied.build}, serving {files}{same}"
