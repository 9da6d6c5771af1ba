"""`specab reference save DIR NAME` (store a trusted run's per-boot values) and `specab gate DIR
--reference NAME` (non-inferiority of a new run against it: exit 0 pass, 1 fail, 2 refused)."""

from __future__ import annotations

import json
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bench.errors import SpecabError

if TYPE_CHECKING:
    import pandas as pd

    from bench.stats import Analysis, GateCheck

reference_app = typer.Typer(help="Trusted references for `specab gate`.")
STORE = Path("references")
CAVEAT = (
    "A stored reference cannot rule out drift of everything else between the two runs "
    "(vLLM build, drivers, host, machine load): it moves the difference as much as the patch "
    "does. To compare free of it, re-run a few reference boots in the same run: an A/B with "
    "the reference configuration as the baseline (`specab run-ab`)."
)
_METRICS = (("acceptance_pos0", False), ("mean_accepted_length", False))


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _analysis(results_dir: Path) -> tuple[Analysis, pd.DataFrame, dict[str, Any]]:
    from bench import stats
    from bench.store import load_results

    res = load_results(results_dir)
    result = stats.analyze(res.probes, res.boots, res.manifest, source=str(results_dir))
    return result, res.ok_boots(), res.manifest


def _values(rows: pd.DataFrame, col: str) -> list[Any]:
    return sorted({v for v in rows[col].tolist() if v is not None and v == v})


def _arm_entry(arm: Any, ok: pd.DataFrame) -> dict[str, Any]:
    rows = ok[ok["arm"] == arm.arm]
    return {
        "speculative": arm.speculative,
        "num_speculative_tokens": [int(k) for k in _values(rows, "num_speculative_tokens")],
        "probe_sets_sha256": _values(rows, "probe_sets_sha256"),
        "definition_sha256": _values(rows, "definition_sha256"),
        "vllm_versions": _values(rows, "vllm_version"),
        "hosts": _values(rows, "host"),
        "gpus": _values(rows, "gpu"),
        "boots": [b.model_dump(mode="json") for b in arm.per_boot],
    }


@reference_app.command("save")
def save(
    results_dir: Annotated[Path, typer.Argument(metavar="DIR", help="A trusted results dir.")],
    name: Annotated[str, typer.Argument(help="Reference name (letters, digits, . _ -).")],
    store: Annotated[Path, typer.Option("--store", help="Where references live.")] = STORE,
    replace: Annotated[bool, typer.Option("--replace", help="Overwrite NAME.")] = False,
) -> None:
    """Store DIR's per-boot values (per arm and metric), probe-set hash, K, vLLM version,
    hosts and date as reference NAME."""
    from bench import __version__
    from bench.store import save_reference

    result, ok, manifest = _analysis(results_dir)
    arms = {a.arm: _arm_entry(a, ok) for a in result.arms if a.boots}
    thin = [a for a, e in arms.items() if len(e["boots"]) < 2]
    if thin:
        raise SpecabError(
            f"arm(s) {thin} have fewer than 2 ok boots: a reference needs its own boot-to-boot "
            "variance",
            file=results_dir,
            fix="run more boots (specab run-ab --resume with boots_per_arm >= 3)",
        )
    body = {
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "specab_version": __version__,
        "experiment": manifest.get("experiment"),
        "source": str(results_dir),
        "machine": {"cpu": _cpu_model(), "platform": platform.platform()},
        "arms": arms,
    }
    path = save_reference(store, name, body, replace=replace)
    boots = ", ".join(f"{a} ({len(e['boots'])} boots)" for a, e in arms.items())
    typer.echo(f"saved reference {name}: {boots} -> {path}")


def _refuse_if_different(arm: str, ref_arm: str, new: dict[str, Any], ref: dict[str, Any]) -> None:
    for key, what in (("probe_sets_sha256", "probe sets"), ("num_speculative_tokens", "K")):
        if new[key] != ref[key]:
            raise SpecabError(
                f"arm {arm!r} ran {what} {new[key]} but reference arm {ref_arm!r} ran {ref[key]}",
                field=key,
                fix="gate only runs of the same probe sets and num_speculative_tokens (or save "
                "a new reference)",
            )


def _checks(
    arm: str,
    ref_arm: str,
    new: dict[str, Any],
    ref: dict[str, Any],
    margins: dict[str, float],
    alpha: float,
) -> list[GateCheck]:
    from bench.stats import gate_check

    out = []
    metrics = [*(_METRICS if new["speculative"] and ref["speculative"] else ())]
    metrics.append(("output_tokens_per_s", True))
    for metric, relative in metrics:
        a = [b[metric] for b in new["boots"] if b.get(metric) is not None]
        b = [x[metric] for x in ref["boots"] if x.get(metric) is not None]
        if len(a) < 2 or len(b) < 2:
            continue
        out.append(
            gate_check(a, b, arm=arm, reference_arm=ref_arm, metric=metric,
                       margin=margins[metric], alpha=alpha, relative=relative)
        )  # fmt: skip
    return out


def _pairs(
    new_arms: list[str], ref_arms: list[str], arm: list[str] | None
) -> list[tuple[str, str]]:
    if arm:
        pairs = [tuple(x.split("=", 1)) if "=" in x else (x, x) for x in arm]
    else:
        pairs = [(a, a) for a in new_arms if a in ref_arms]
    for new, ref in pairs:
        if new not in new_arms or ref not in ref_arms:
            raise SpecabError(
                f"no arm pair {new}={ref}",
                field="--arm",
                fix=f"new arms: {', '.join(new_arms)}; reference arms: {', '.join(ref_arms)}",
            )
    if not pairs:
        raise SpecabError(
            "no arm of the new run has a reference arm of the same name",
            field="--arm",
            fix="pair them: --arm NEW=REFERENCE",
        )
    return [(str(a), str(b)) for a, b in pairs]


def gate(
    results_dir: Annotated[Path, typer.Argument(metavar="DIR", help="The new results dir.")],
    reference: Annotated[str, typer.Option("--reference", help="Reference NAME.")],
    store: Annotated[Path, typer.Option("--store", help="Where references live.")] = STORE,
    arm: Annotated[
        list[str] | None, typer.Option("--arm", help="NEW=REFERENCE arm pair (repeat).")
    ] = None,
    margin_pos0: Annotated[float | None, typer.Option("--margin-pos0")] = None,
    margin_length: Annotated[float | None, typer.Option("--margin-length")] = None,
    margin_speed: Annotated[float | None, typer.Option("--margin-speed")] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="One-sided level.")] = 0.05,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> int:
    """Is the new run not worse than the trusted reference by the margins? Non-inferiority
    on boot values (Welch on the two boot samples). Exit 0 pass, 1 fail."""
    from bench.store import load_reference

    if not 0 < alpha < 0.5:
        raise SpecabError(f"{alpha!r} is out of range", field="--alpha", fix="use e.g. 0.05")
    ref = load_reference(store, reference)
    result, ok, _ = _analysis(results_dir)
    new_arms = {a.arm: _arm_entry(a, ok) for a in result.arms if a.boots}
    margins = dict(result.margins)
    for key, value in (("acceptance_pos0", margin_pos0), ("mean_accepted_length", margin_length),
                       ("output_tokens_per_s", margin_speed)):  # fmt: skip
        if value is not None:
            margins[key] = value
    checks: list[GateCheck] = []
    for a, r in _pairs(list(new_arms), list(ref["arms"]), arm):
        _refuse_if_different(a, r, new_arms[a], ref["arms"][r])
        checks += _checks(a, r, new_arms[a], ref["arms"][r], margins, alpha)
    if not checks:
        raise SpecabError(
            "nothing to gate: fewer than 2 boots", file=results_dir, fix="run more boots"
        )
    passed = all(c.verdict == "pass" for c in checks)
    if as_json:
        body = {"reference": reference, "passed": passed, "alpha": alpha, "caveat": CAVEAT,
                "checks": [c.model_dump() for c in checks]}  # fmt: skip
        typer.echo(json.dumps(body, indent=2, allow_nan=False))
    else:
        from bench.commands._gate_view import render_gate

        render_gate(reference, ref, new_arms, checks, alpha, CAVEAT)
    return 0 if passed else 1


def register(app: typer.Typer) -> None:
    app.add_typer(reference_app, name="reference")
    app.command("gate")(gate)
