"""The DSpark rope fix (arms/dspark-v4/dspark_rope_fix.py) against a faithful transcription
of the fork's buggy `resolve_layer_compress_ratio` (seed report 000, attention.py:102-118),
and against the fork's current, already-fixed resolver: there the patch must wrap nothing
and report "already fixed" (changed=False), which fails the boot unless the arm allows it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from bench.errors import BootFailed
from bench.experiment.launch import RUNTIME_DIR, build_patch_dir, check_patch_report, read_report

ROOT = Path(__file__).resolve().parents[2]
PATCH = ROOT / "arms" / "dspark-v4" / "dspark_rope_fix.py"

# Faithful transcription of the fork's function (jasl/vllm b5c0d43b, attention.py:102-118).
BUGGY_SOURCE = """
def resolve_layer_compress_ratio(config, layer_id: int) -> tuple[int, bool]:
    if layer_id < config.num_hidden_layers:
        return max(1, config.compress_ratios[layer_id]), False
    if layer_id < len(config.compress_ratios):
        raw_compress_ratio = config.compress_ratios[layer_id]
        return max(1, raw_compress_ratio), raw_compress_ratio == 0
    return 1, False
"""


# The fork after the fix landed (the report's proposed change): out-of-range draft layers
# get plain rope.
FIXED_SOURCE = BUGGY_SOURCE.replace(
    "    return 1, False\n",
    "    # a DSpark/MTP draft layer past the target's compress_ratios: plain rope\n"
    "    return 1, True\n",
)
assert FIXED_SOURCE != BUGGY_SOURCE


def _compile(source: str) -> Any:
    ns: dict[str, Any] = {}
    exec(source, ns)
    return ns["resolve_layer_compress_ratio"]


def buggy() -> Any:
    return _compile(BUGGY_SOURCE)


def fork_fixed() -> Any:
    return _compile(FIXED_SOURCE)


# The report's hybrid checkpoint: 43 target layers, 44 ratios (the last, 0, is a draft slot).
TARGET_RATIOS = [0, 0] + [4, 128] * 20 + [4] + [0]
CONFIG = SimpleNamespace(num_hidden_layers=43, compress_ratios=TARGET_RATIOS)
assert len(TARGET_RATIOS) == 44


@pytest.fixture
def patch_module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(RUNTIME_DIR))
    monkeypatch.delenv("SPECAB_PATCH_REPORT", raising=False)
    spec = importlib.util.spec_from_file_location("dspark_rope_fix_under_test", PATCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_transcription_reproduces_the_bug() -> None:
    """Anti-vacuity: without the fix, draft ids 44/45 fall back to yarn (use_unscaled=False)."""
    f = buggy()
    assert [f(CONFIG, i) for i in (43, 44, 45)] == [(1, True), (1, False), (1, False)]


def test_fix_gives_plain_rope_to_all_draft_layers(patch_module: ModuleType) -> None:
    f = patch_module.fixed(buggy())
    assert [f(CONFIG, i) for i in (43, 44, 45)] == [(1, True)] * 3


def test_fix_leaves_target_layers_and_in_range_draft_layers(patch_module: ModuleType) -> None:
    orig, f = buggy(), patch_module.fixed(buggy())
    for layer in range(43):
        assert f(CONFIG, layer) == orig(CONFIG, layer)
        assert f(CONFIG, layer)[1] is False
    # a draft config whose list covers the draft ids (46 entries, trailing non-zero) is honoured
    long_cfg = SimpleNamespace(num_hidden_layers=43, compress_ratios=[*TARGET_RATIOS, 4, 0])
    assert f(long_cfg, 44) == orig(long_cfg, 44) == (4, False)
    assert f(long_cfg, 45) == orig(long_cfg, 45) == (1, True)


def test_apply_replaces_module_function_and_fails_loudly_without_it(
    patch_module: ModuleType,
) -> None:
    mod = ModuleType("fake_attention")
    mod.resolve_layer_compress_ratio = buggy()  # type: ignore[attr-defined]
    patch_module.apply(mod)
    assert mod.resolve_layer_compress_ratio(CONFIG, 45) == (1, True)
    patch_module.apply(mod)  # idempotent: not wrapped twice
    assert mod.resolve_layer_compress_ratio.__wrapped__.__name__ == "resolve_layer_compress_ratio"
    assert not hasattr(mod.resolve_layer_compress_ratio.__wrapped__, "__wrapped__")
    with pytest.raises(AttributeError, match="does not exist in this vLLM build"):
        patch_module.apply(ModuleType("upstream_attention"))


def test_fork_fixed_transcription_already_gives_plain_rope() -> None:
    f = fork_fixed()
    assert [f(CONFIG, i) for i in (43, 44, 45)] == [(1, True)] * 3
    for layer in range(43):
        assert f(CONFIG, layer) == buggy()(CONFIG, layer)


def test_probe_tells_the_buggy_resolver_from_the_fixed_one(patch_module: ModuleType) -> None:
    assert patch_module.already_fixed(buggy()) is False
    assert patch_module.already_fixed(fork_fixed()) is True
    assert patch_module.already_fixed(patch_module.fixed(buggy())) is True
    # one out-of-range id still on yarn is not "fixed": the patch must wrap
    half = _compile(BUGGY_SOURCE.replace("return 1, False", "return 1, layer_id == 44"))
    assert patch_module.already_fixed(half) is False


def test_apply_on_a_fixed_build_wraps_nothing_and_reports_noop(
    patch_module: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "report.jsonl"
    monkeypatch.setenv("SPECAB_PATCH_REPORT", str(report))
    mod = ModuleType("fork_attention")
    original = fork_fixed()
    mod.resolve_layer_compress_ratio = original  # type: ignore[attr-defined]
    patch_module.apply(mod)
    assert mod.resolve_layer_compress_ratio is original  # nothing wrapped
    (rec,) = [r for r in read_report(report) if r["event"] == "applied"]
    assert rec["changed"] is False
    assert rec["detail"].startswith("already fixed in this build")
    buggy_mod = ModuleType("old_fork_attention")
    buggy_mod.resolve_layer_compress_ratio = buggy()  # type: ignore[attr-defined]
    patch_module.apply(buggy_mod)
    assert buggy_mod.resolve_layer_compress_ratio.specab_patch == "dspark_rope_fix"
    assert [r["changed"] for r in read_report(report) if r["event"] == "applied"] == [False, True]


def _fake_vllm(root: Path, body: str) -> None:
    pkg = root / "vllm" / "models" / "deepseek_v4"
    pkg.mkdir(parents=True)
    for d in (root / "vllm", root / "vllm" / "models", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "attention.py").write_text(body)
    # a module that imports the function by name, as the fork's dspark.py would
    (pkg / "dspark.py").write_text(
        "from vllm.models.deepseek_v4.attention import resolve_layer_compress_ratio as r\n"
    )


@pytest.mark.parametrize("build", ["buggy", "fixed", "missing"])
def test_through_the_runtime_in_a_real_interpreter(tmp_path: Path, build: str) -> None:
    body = {"buggy": BUGGY_SOURCE, "fixed": FIXED_SOURCE, "missing": "X = 1\n"}[build]
    _fake_vllm(tmp_path / "site", body)
    pd = build_patch_dir([PATCH], tmp_path / "patches")
    main = textwrap.dedent(
        """
        from types import SimpleNamespace
        from vllm.models.deepseek_v4.dspark import r
        cfg = SimpleNamespace(num_hidden_layers=43, compress_ratios=[0] * 44)
        print([r(cfg, i) for i in (43, 44, 45)], getattr(r, "specab_patch", None))
        """
    )
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": os.pathsep.join([str(pd.path), str(tmp_path / "site")]),
        **pd.env(),
    }
    proc = subprocess.run(
        [sys.executable, "-c", main],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    name = ("dspark_rope_fix",)
    if build == "buggy":
        assert proc.stdout.strip() == "[(1, True), (1, True), (1, True)] dspark_rope_fix"
        assert check_patch_report(pd.report, name, in_process=True) == ()
    elif build == "fixed":
        # the build's own function answers; the patch wrapped nothing and said so
        assert proc.stdout.strip() == "[(1, True), (1, True), (1, True)] None", proc.stderr
        with pytest.raises(BootFailed, match=r"'dspark_rope_fix' changed nothing.*already fixed"):
            check_patch_report(pd.report, name, in_process=True)
        assert check_patch_report(pd.report, name, in_process=True, allow_noop=True) == name
    else:
        with pytest.raises(BootFailed, match=r"dspark_rope_fix.*does not exist in this vLLM"):
            check_patch_report(pd.report, name, in_process=True)
