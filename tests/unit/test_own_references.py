"""Each served arm against its own drafter's training forward: an experiment whose baseline is
one drafter's reference arm and that holds another drafter's reference (the demo's DFlash
story beside its EAGLE-3 control) compares each served arm with the reference of the drafter
it serves. Simulated runs with a known truth, through `analyze` and the report's tables."""

from __future__ import annotations

from typing import Any

import pytest

from bench.records import Results
from bench.report.tables import headlines, verdict_table
from bench.simulate import simulate_frames, simulated_manifest
from bench.stats import analyze

# logit shifts: the EAGLE-3 head accepts far more than the DFlash drafter, as trained
TRUTH = {
    "dflash-reference": 0.0,
    "shipped": -0.6,
    "config-fix": 0.0,
    "eagle3-reference": 0.9,
    "eagle3": 0.9,
    "eagle3-aux-1": 0.3,
    "nospec-like": -0.6,
}
DRAFTER = {
    "dflash-reference": "dflash",
    "shipped": "dflash",
    "config-fix": "dflash",
    "eagle3-reference": "eagle3",
    "eagle3": "eagle3",
    "eagle3-aux-1": "eagle3",
    "nospec-like": "draft-model",  # a drafter no reference drives: stays with the baseline
}
REFERENCES = ("dflash-reference", "eagle3-reference")


def _definition(arm: str) -> dict[str, Any]:
    out: dict[str, Any] = {"speculative_config": {"model": f"models/{DRAFTER[arm]}"}}
    if arm in REFERENCES:
        out["reference"] = {"forward": f"training:{DRAFTER[arm]}_logits"}
    return out


def _results(truth: dict[str, float], seed: int = 3) -> Results:
    probes, boots = simulate_frames(truth, boots=6, prompts=80, seed=seed)
    manifest = simulated_manifest(truth, baseline="dflash-reference", boots=6, prompts=80)
    arms = [a.model_copy(update={"definition": _definition(a.name)}) for a in manifest.arms]
    return Results(manifest=manifest.model_copy(update={"arms": arms}), boots=boots, probes=probes)


@pytest.fixture(scope="module")
def both() -> tuple[Results, Any]:
    results = _results(TRUTH)
    return results, analyze(results)


def test_each_served_arm_is_compared_with_its_own_drafters_reference(both: Any) -> None:
    _, out = both
    against = {(c.arm, c.metric): c for c in out.comparisons}
    assert {c.baseline for c in out.comparisons if c.arm.startswith("eagle3")} == {
        "eagle3-reference"
    }
    for arm in ("shipped", "config-fix", "nospec-like"):
        assert against[(arm, "acceptance_pos0")].baseline == "dflash-reference"
    # two drafters' training forwards against each other answer no question of parity
    assert not [c for c in out.comparisons if c.arm == "eagle3-reference"]
    # the control holds parity with its own training forward; the planted off-by-one departs
    assert against[("eagle3", "acceptance_pos0")].verdict not in ("improved", "regressed")
    assert against[("eagle3-aux-1", "acceptance_pos0")].verdict == "regressed"
    assert against[("shipped", "acceptance_pos0")].verdict == "regressed"
    # against the DFlash reference the EAGLE-3 head would read "improved": a wrong answer
    assert against[("eagle3", "acceptance_pos0")].difference == pytest.approx(0.0, abs=0.05)
    assert [a.arm for a in out.arms] == list(TRUTH)
    assert any("compared with eagle3-reference" in n for n in out.notes)
    # token parity too: each served arm against its own drafter's training forward only
    pairs = {(p.arm, p.reference) for p in out.parity}
    assert ("eagle3", "eagle3-reference") in pairs and ("shipped", "dflash-reference") in pairs
    assert not {("eagle3", "dflash-reference"), ("shipped", "eagle3-reference")} & pairs


def test_each_references_comparisons_are_a_holm_family_of_their_own(both: Any) -> None:
    """Holm within a reference's group: the EAGLE-3 arms' adjusted p are Holm's over their
    own primary comparisons only, not over the baseline's as well."""
    _, out = both
    for ref in REFERENCES:
        family = [c for c in out.comparisons if c.baseline == ref and c.family == "primary"]
        ps = sorted((c.p_value, c.p_adjusted) for c in family)
        m, running = len(ps), 0.0
        assert m == (4 if ref == "eagle3-reference" else 6)
        for i, (p, adjusted) in enumerate(ps):
            running = max(running, min(1.0, (m - i) * p))
            assert adjusted == pytest.approx(running, rel=1e-9, abs=1e-15)


def test_the_report_names_each_arms_own_reference(both: Any) -> None:
    results, out = both
    table = verdict_table(out)
    assert "eagle3-aux-1 vs eagle3-reference" in set(table["arm"])
    assert "shipped" in set(table["arm"])
    said = " ".join(headlines(results, out))
    assert "**eagle3-aux-1** serves" in said and "training forward (eagle3-reference)" in said


def test_a_baseline_that_is_no_reference_keeps_one_baseline() -> None:
    """Without a reference baseline every arm is compared with the baseline, as before."""
    truth = {"shipped": -0.6, **{a: v for a, v in TRUTH.items() if a != "shipped"}}
    results = _results(truth)
    manifest = results.manifest.model_copy(update={"baseline": "shipped"})
    spec = manifest.spec.model_copy(
        update={"experiment": manifest.spec.experiment.model_copy(update={"baseline": "shipped"})}
    )
    out = analyze(Results(manifest=manifest.model_copy(update={"spec": spec}),
                          boots=results.boots, probes=results.probes))  # fmt: skip
    assert {c.baseline for c in out.comparisons} == {"shipped"}
