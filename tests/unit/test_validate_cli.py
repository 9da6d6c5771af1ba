"""`specab validate`, `specab schema`, `specab materialize` through the real CLI entry point."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from bench.cli import run

GOOD = """
[experiment]
name = "demo"
boots_per_arm = 3

[server]
model = "models/target"
speculative_config = { method = "draft_model", model = "models/draft", num_speculative_tokens = 3 }
args = { enforce-eager = true, max-model-len = 512, api-key = "sk-validate-secret-key" }
env = { VLLM_CPU_KVCACHE_SPACE = "1", HF_TOKEN = "hf_supersecret" }

[probes]
sets = ["probes.jsonl"]

[[arms]]
name = "baseline"

[[arms]]
name = "fix"
env = { MY_FIX = "1" }
args = { enforce-eager = false }
patches = ["fix_patch.py"]
draft_config = { partial_rotary_factor = 1.0 }
"""


def write_exp_dir(root: Path) -> Path:
    for m in ("target", "draft"):
        d = root / "models" / m
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"model_type": "qwen3", "head_dim": 64}))
        (d / "model.safetensors").write_bytes(b"w")
    (root / "probes.jsonl").write_text('{"id": "a", "prompt": "def f():"}\n')
    (root / "fix_patch.py").write_text("from specab_patch import report_applied\n")
    (root / "exp.toml").write_text(GOOD)
    return root


def primed_experiments(root: Path) -> list[Path]:
    """The command lines vLLM's parser answers here, parsed before the first test
    (tests/conftest.py primes them all in one vLLM import)."""
    demo = [_demo_mistake(root / f"demo-{i}", old, new) for i, (old, new, _) in enumerate(MISTAKES)]
    return [write_exp_dir(root) / "exp.toml", *demo]


DEMO = Path(__file__).resolve().parents[2] / "arms" / "demo"
MISTAKES = [
    (
        "num_speculative_tokens = 4",
        "num_speculative_token = 4",
        (
            "server.speculative_config.num_speculative_token",
            "SpeculativeConfig.num_speculative_token: Unexpected keyword argument",
        ),
    ),
    (
        "max-model-len = 512",
        'max-model-len = "512k"',
        ("server.args.max-model-len", "max_model_len (512000) is greater than the derived"),
    ),
]


def _demo_mistake(root: Path, old: str, new: str) -> Path:
    """The demo's experiment, its paths pointing at the shipped demo, with one mistake."""
    root.mkdir(parents=True, exist_ok=True)
    text = (DEMO / "demo.toml").read_text().replace(old, new, 1)
    for d in ("models", "probes", "patches"):
        text = text.replace(f'"{d}/', f'"{DEMO / d}/')
    f = root / "demo.toml"
    f.write_text(text)
    return f


@pytest.fixture
def exp_dir(tmp_path: Path) -> Path:
    return write_exp_dir(tmp_path)


def test_validate_prints_command_env_patches_overlays(
    exp_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["validate", str(exp_dir / "exp.toml")]) == 0
    out = capsys.readouterr().out
    assert "2 arm(s) x 3 boot(s) = 6 boots" in out
    assert "-m vllm.entrypoints.openai.api_server --model" in out
    assert "--enforce-eager" in out.split("arm fix")[0]  # baseline keeps the flag
    assert "--enforce-eager" not in out.split("arm fix")[1]  # the arm removed it
    assert "MY_FIX: None -> '1'" in out
    assert "patch: fix_patch" in out
    assert 'draft_config overlay: {"partial_rotary_factor": 1.0}' in out
    assert "hf_supersecret" not in out and "HF_TOKEN=<redacted>" in out
    assert "sk-validate-secret-key" not in out and "VLLM_API_KEY=<redacted>" in out
    assert "--api-key" not in out  # the key travels in the server's environment
    assert "boots_per_arm" not in out  # 3 boots: no small-campaign warning
    assert not (exp_dir / "$WORKDIR").exists()
    assert sorted(p.name for p in exp_dir.iterdir()) == [
        "exp.toml",
        "fix_patch.py",
        "models",
        "probes.jsonl",
    ]


def test_schema_is_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "specab experiment file"
    assert "draft_config" in json.dumps(schema)


def test_materialize_writes_what_a_boot_runs(exp_dir: Path) -> None:
    out = exp_dir / "mat"
    rc = run(
        [
            "materialize",
            str(exp_dir / "exp.toml"),
            "--arm",
            "fix",
            "--out",
            str(out),
            "--engine-seed",
            "5",
        ]
    )
    assert rc == 0
    plan = json.loads((out / "plan.json").read_text())
    argv = plan["argv"]
    assert argv[argv.index("--seed") + 1] == "5"
    spec_cfg = json.loads(argv[argv.index("--speculative-config") + 1])
    overlay = Path(spec_cfg["model"])
    assert overlay.parent.parent == out.resolve()
    assert json.loads((overlay / "config.json").read_text())["partial_rotary_factor"] == 1.0
    assert (Path(plan["patch_dir"]) / "sitecustomize.py").is_file()
    sh = (out / "command.sh").read_text()
    assert os.access(out / "command.sh", os.X_OK)
    assert "hf_supersecret" not in sh and "hf_supersecret" not in (out / "server.env").read_text()
    assert "MY_FIX=1" in sh and "env -i" in sh
    # the script is valid shell and refuses to run without the redacted secret
    proc = subprocess.run(
        ["sh", str(out / "command.sh")],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode != 0 and "export HF_TOKEN first" in proc.stderr


def _mutate(exp_dir: Path, old: str, new: str) -> None:
    f = exp_dir / "exp.toml"
    text = f.read_text()
    assert old in text, old
    f.write_text(text.replace(old, new, 1))


# (old text, new text, field path in the message, words of the problem)
BAD = [
    ("boots_per_arm = 3", "boots_per_arm = 0", "experiment.boots_per_arm", "greater than"),
    ('name = "fix"', 'name = "fix"\nargz = {}', "arms(fix).argz", "did you mean `args`?"),
    ('name = "fix"', 'name = "baseline"', "arms", "duplicate arm name"),
    (
        "boots_per_arm = 3",
        'boots_per_arm = 3\nbaseline = "nope"',
        "experiment.baseline",
        "not an arm",
    ),
    (
        "draft_config = { partial_rotary_factor = 1.0 }",
        "draft_config = 1",
        "arms(fix).draft_config",
        "valid dictionary",
    ),
    (
        'patches = ["fix_patch.py"]',
        'patches = ["missing.py"]',
        "arms(fix).patches[0]",
        "not found",
    ),
    (
        'patches = ["fix_patch.py"]',
        'patches = ["probes.jsonl"]',
        "arms(fix).patches[0]",
        "a patch is a Python module (.py) or a unified diff",
    ),
    ('model = "models/target"', 'model = "./models/gone"', "server.model", "not found"),
    ('sets = ["probes.jsonl"]', 'sets = ["nope.jsonl"]', "probes.sets[0]", "not found"),
    (
        "args = { enforce-eager = false }",
        "args = { port = 8001 }",
        "arms(fix).args.port",
        "cannot be set",
    ),
    (
        "args = { enforce-eager = false }",
        "args = { enforce-eager = [1] }",
        "arms(fix).args.enforce-eager",
        "string, number or boolean",
    ),
    (
        'name = "fix"',
        'name = "fix"\npython = "venvs/nope/bin/python"',
        "arms(fix).python",
        "not found",
    ),
    ('model = "models/draft", ', "", "arms(fix).draft_config", "needs a draft model"),
    (
        "[probes]",
        '[probes]\nacceptance_source = "guess"',
        "probes.acceptance_source",
        "'auto'",
    ),
    ('[[arms]]\nname = "fix"', '[[armz]]\nname = "fix"', "armz", "did you mean `arms`?"),
    (
        "draft_config = { partial_rotary_factor = 1.0 }",
        "target_config = { x = 1 }",
        "arms(fix).target_config",
        "config.json not found",
    ),
]


@pytest.mark.parametrize(("old", "new", "field", "problem"), BAD)
def test_bad_experiment_file_one_line_exit_2(
    exp_dir: Path,
    capsys: pytest.CaptureFixture[str],
    old: str,
    new: str,
    field: str,
    problem: str,
) -> None:
    if "config.json not found" in problem:
        (exp_dir / "models" / "target" / "config.json").unlink()
    _mutate(exp_dir, old, new)
    before = sorted(p.relative_to(exp_dir) for p in exp_dir.rglob("*"))
    out_dir = exp_dir / "out"
    for argv in (
        ["validate", str(exp_dir / "exp.toml")],
        ["materialize", str(exp_dir / "exp.toml"), "--arm", "fix", "--out", str(out_dir)],
    ):
        assert run(argv) == 2
        captured = capsys.readouterr()
        err = captured.err.strip()
        assert len(err.splitlines()) == 1, err
        assert "Traceback" not in captured.err + captured.out
        assert err.startswith("error: ") and str(exp_dir / "exp.toml") in err
        assert f": {field}: " in err, err
        assert problem in err and ". Fix: " in err, err
    assert sorted(p.relative_to(exp_dir) for p in exp_dir.rglob("*")) == before  # nothing written


def test_bad_toml_and_missing_file(exp_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (exp_dir / "exp.toml").write_text(GOOD + "\n[broken\n")
    assert run(["validate", str(exp_dir / "exp.toml")]) == 2
    assert "not valid TOML" in capsys.readouterr().err
    assert run(["validate", str(exp_dir / "none.toml")]) == 2
    assert "experiment file not found" in capsys.readouterr().err


def test_materialize_refuses_unknown_arm_and_nonempty_out(
    exp_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = str(exp_dir / "exp.toml")
    assert run(["materialize", f, "--arm", "nope", "--out", str(exp_dir / "o")]) == 2
    assert "use one of: baseline, fix" in capsys.readouterr().err
    assert not (exp_dir / "o").exists()
    (exp_dir / "o").mkdir()
    (exp_dir / "o" / "x").write_text("keep")
    assert run(["materialize", f, "--arm", "fix", "--out", str(exp_dir / "o")]) == 2
    assert "not empty" in capsys.readouterr().err
    assert [p.name for p in (exp_dir / "o").iterdir()] == ["x"]


def test_example_experiments_validate(capsys: pytest.CaptureFixture[str]) -> None:
    """The committed dspark-v4 experiment validates for its cluster (its models are hub names
    cached on the GPU nodes, not here: warnings with --cluster, an error without)."""
    root = Path(__file__).resolve().parents[2]
    f = root / "arms" / "dspark-v4" / "experiment.toml"
    assert run(["validate", str(f), "--cluster"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "baseline: warning: server.model: deepseek-ai/DeepSeek-V4-Flash" in out
    assert "arm aux-rope-fix" in out and "patch: dspark_rope_fix" in out
    assert textwrap.dedent("DSPARK_AUX_HIDDEN_FIX") in out


def test_validate_notes_arms_that_run_the_same_thing(
    exp_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = exp_dir / "exp.toml"
    f.write_text(GOOD + '\n[[arms]]\nname = "aa"\ndescription = "A/A control"\n')
    assert run(["validate", str(f)]) == 0
    assert "note: arms baseline, aa run exactly the same thing" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("boots", "probes", "words"),
    [
        (1, "", "every verdict will be 'unreplicated'"),
        (2, "concurrency = 2", "between-boot SD rests on 1 degree of freedom"),
        (2, "", "compared as 'deterministic'"),
        (3, "", None),
    ],
)
def test_fewer_than_three_boots_an_arm_are_said_as_analyze_says_them(
    exp_dir: Path, capsys: pytest.CaptureFixture[str], boots: int, probes: str, words: str | None
) -> None:
    """validate before the run and analyze after it say one minimum in the same words. At
    temperature 0 one request at a time (the file's defaults), 2 boots are said to suffice
    where boots repeat exactly; analyze says so only when they did (simulated boots differ,
    so it says the general words)."""
    from bench.simulate import simulate_results

    f = exp_dir / "exp.toml"
    text = f.read_text().replace("boots_per_arm = 3", f"boots_per_arm = {boots}")
    f.write_text(text.replace('sets = ["probes.jsonl"]', f'sets = ["probes.jsonl"]\n{probes}'))
    assert run(["validate", str(f)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    if words is None:
        assert "boots per arm" not in out.split("lint:")[0]
        return
    said = next(line for line in out.split("experiment.boots_per_arm: ")[1:])
    assert words in said and "3 or more boots per arm" in said
    results = simulate_results(exp_dir / "r", {"a": 0.0, "b": 0.0}, boots=boots, prompts=5)
    assert run(["analyze", str(results), "--resamples", "0"]) == 0
    analyzed = " ".join(capsys.readouterr().out.split())
    if "deterministic" in words:
        assert "between-boot SD rests on 1 degree of freedom" in analyzed
        assert "deterministic" not in analyzed
    else:
        assert said.split(" Run 3")[0] in analyzed


def test_an_ab_of_the_cpu_sampler_fix_is_warned_not_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """arms/vllm-cpu-sampler.toml measures the known-bad build against its fix on purpose:
    the arm without the fix is named in a warning; the demo (every arm fixed) has none."""
    root = Path(__file__).resolve().parents[2]
    assert run(["validate", str(root / "arms" / "vllm-cpu-sampler.toml")]) == 0
    out = capsys.readouterr().out
    assert "WARNING: arm(s) stock run a known-bad build at temperature 0.8" in out
    assert run(["validate", str(root / "arms" / "demo" / "demo.toml")]) == 0
    assert "known-bad" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("old", "new", "words"),
    MISTAKES,
    ids=["speculative_config typo", "max-model-len beyond the model"],
)
def test_validate_refuses_what_vllms_engine_refuses_on_the_demo_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, words: tuple[str, ...]
) -> None:
    """The demo's own experiment and models, one newcomer's mistake each: one line naming the
    field, in vLLM's words, before any boot (the engine check of `validate`)."""
    assert run(["validate", str(_demo_mistake(tmp_path, old, new))]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Fix:" in err
    for w in words:
        assert w in err, (w, err)
