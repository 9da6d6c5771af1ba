"""`specab gate`: a regression gate against a stored reference, calibrated by simulation
through the product's own `gate_check`, and the reference/gate commands end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.cli import run
from bench.simulate import simulate_results
from bench.stats import boots_for_gate, gate_check
from bench.stats.gate import gate_bounds, gate_verdicts

ALPHA, MARGIN, REPS = 0.05, 0.02, 20_000
MC = 3 * (ALPHA * (1 - ALPHA) / REPS) ** 0.5  # three Monte Carlo SEs


def _rate(rng: np.random.Generator, b: int, shift: float, sd_ref: float, sd_new: float) -> float:
    """Share of simulated runs that do NOT pass the gate (the product's bounds and verdict
    rule, vectorized over REPS runs)."""
    ref = rng.normal(1.0, sd_ref, (REPS, b))
    new = rng.normal(1.0 + shift, sd_new, (REPS, b))
    _, lo, hi = gate_bounds(new, ref, ALPHA)
    return float(np.mean(gate_verdicts(lo, hi, -MARGIN) != "pass"))


@pytest.mark.slow
@pytest.mark.parametrize(("sd_ref", "sd_new"), [(0.01, 0.01), (0.005, 0.015)])
def test_a_regression_of_the_margin_passes_at_most_alpha_and_no_change_fails_about_alpha(
    sd_ref: float, sd_new: float
) -> None:
    rng = np.random.default_rng(7)
    need = boots_for_gate(((sd_ref**2 + sd_new**2) / 2) ** 0.5, MARGIN, ALPHA)
    assert need is not None and 5 <= need <= 12
    for b in (3, need):  # whatever B: a true regression of the margin rarely passes
        assert 1 - _rate(rng, b, -MARGIN, sd_ref, sd_new) <= ALPHA + MC
    # at the documented B a run with no true change fails about alpha of the time...
    assert _rate(rng, need, 0.0, sd_ref, sd_new) <= ALPHA + MC
    # ...while 3 boots cannot tell at this noise (the gate says inconclusive, not pass)
    assert _rate(rng, 3, 0.0, sd_ref, sd_new) > 0.3
    # and a regression of twice the margin never passes at the documented B
    assert _rate(rng, need, -2 * MARGIN, sd_ref, sd_new) > 0.99


def test_verdicts_and_speed_as_a_ratio() -> None:
    ref = [3.00, 3.02, 2.98, 3.01]
    ok = gate_check([3.01, 2.99, 3.00, 3.02], ref, arm="a", reference_arm="a",
                    metric="mean_accepted_length", margin=0.05, alpha=ALPHA)  # fmt: skip
    assert ok.verdict == "pass" and ok.lower_bound > -0.05
    bad = gate_check([2.80, 2.82, 2.79, 2.81], ref, arm="a", reference_arm="a",
                     metric="mean_accepted_length", margin=0.05, alpha=ALPHA)  # fmt: skip
    assert bad.verdict == "regressed" and bad.upper_bound < -0.05
    speed = gate_check(
        [95.0, 96.0, 94.0], [100.0, 101.0, 99.0], arm="a", reference_arm="a",
        metric="output_tokens_per_s", margin=0.02, alpha=ALPHA, relative=True,
    )  # fmt: skip
    assert speed.scale == "relative" and speed.difference == pytest.approx(-0.05, abs=0.002)
    assert speed.verdict == "regressed"


def test_reference_save_and_gate_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    kw = {"boots": 6, "speed": {"a": 100.0}}
    simulate_results(tmp_path / "ref", {"a": 0.0}, seed=1, **kw)  # type: ignore[arg-type]
    simulate_results(tmp_path / "same", {"a": 0.0}, seed=1, experiment="again", **kw)  # type: ignore[arg-type]
    simulate_results(tmp_path / "worse", {"a": -0.4}, seed=1, **kw)  # type: ignore[arg-type]
    assert run(["reference", "save", "ref", "main"]) == 0
    saved = json.loads((tmp_path / "references" / "main.json").read_text())
    assert saved["reference_version"] == 1 and len(saved["arms"]["a"]["boots"]) == 6
    assert run(["reference", "save", "ref", "main"]) == 2  # exists: --replace
    margins = ["--margin-pos0", "0.05", "--margin-length", "0.2", "--margin-speed", "0.1"]
    capsys.readouterr()
    assert run(["gate", "same", "--reference", "main", *margins]) == 0
    out = capsys.readouterr().out
    assert "pass" in out and "cannot rule out drift" in out and "specab run-ab" in out
    assert run(["gate", "worse", "--reference", "main", *margins, "--json"]) == 1
    body = json.loads(capsys.readouterr().out)
    verdicts = {c["metric"]: c["verdict"] for c in body["checks"]}
    assert body["passed"] is False and verdicts["mean_accepted_length"] == "regressed"
    assert "request_mean_accepted_length" not in verdicts  # checked only when asked for
    per_request = ["--margin", "request_mean_accepted_length=0.2", "--json"]
    assert run(["gate", "worse", "--reference", "main", *margins, *per_request]) == 1
    asked = {c["metric"]: c["verdict"] for c in json.loads(capsys.readouterr().out)["checks"]}
    assert asked["request_mean_accepted_length"] == "regressed"
    assert run(["gate", "same", "--reference", "nope"]) == 2
    assert "reference not found" in capsys.readouterr().err


def test_gate_refuses_other_probe_sets_or_k(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    simulate_results(tmp_path / "ref", {"a": 0.0}, boots=3, seed=1)
    simulate_results(tmp_path / "k3", {"a": 0.0}, boots=3, seed=1, positions=3)
    store = str(tmp_path / "refs")
    assert run(["reference", "save", str(tmp_path / "ref"), "r", "--store", store]) == 0
    capsys.readouterr()
    assert run(["gate", str(tmp_path / "k3"), "--reference", "r", "--store", store]) == 2
    err = capsys.readouterr().err
    assert "num_speculative_tokens" in err and "ran K [3]" in err and "[4]" in err
    simulate_results(tmp_path / "one", {"a": 0.0}, boots=1, seed=1)
    assert run(["reference", "save", str(tmp_path / "one"), "x", "--store", store]) == 2
    assert "fewer than 2 ok boots" in capsys.readouterr().err
