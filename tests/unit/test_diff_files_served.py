"""A diff's data files, deletions and renames served to every server process, on the small
vllm package of test_diff_patches.py: a tuned JSON beside a module reads patched through
`open` and `pathlib`, an added one exists, a deleted one is absent, a module renamed away
no longer imports while its new name does; and what still cannot be served (a binary file
in the package, compiled code) is refused naming the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_diff_patches import ORIGINAL, ROPE, _unified, build, experiment, resolve

from bench.errors import SpecabError
from bench.experiment.launch import build_patch_dir, check_patch_report, read_report

LAYERS = "vllm/layers"
PROBE = """
import json, os, pathlib, multiprocessing as mp
def look():
    import vllm.layers.rope as r
    here = os.path.dirname(r.__file__)
    out = [json.load(open(os.path.join(here, "table.json")))["ok"],
           pathlib.Path(here, "table.json").read_text().strip(),
           os.path.exists(os.path.join(here, "added.json")),
           os.path.isfile(os.path.join(here, "gone.json")),
           os.path.exists(os.path.join(here, "untouched.json"))]
    try:
        open(os.path.join(here, "gone.json"))
        out.append("gone readable")
    except FileNotFoundError:
        out.append("gone absent")
    try:
        import vllm.layers.old
        out.append("old imports")
    except ModuleNotFoundError:
        out.append("old absent")
    import vllm.layers.new as n
    out.append(n.NAME)
    print(mp.current_process().name, json.dumps(out), flush=True)
if __name__ == "__main__":
    look()
    p = mp.get_context("spawn").Process(target=look, name="EngineCore")
    p.start(); p.join()
"""


def _whole(path: str, text: str, *, added: bool) -> str:
    """A diff that adds (or deletes) the whole file `path` holding `text`."""
    lines = text.splitlines()
    sign, head = ("+", "new") if added else ("-", "deleted")
    old, new = ("/dev/null", f"b/{path}") if added else (f"a/{path}", "/dev/null")
    span = f"-0,0 +1,{len(lines)}" if added else f"-1,{len(lines)} +0,0"
    body = "".join(f"{sign}{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\n{head} file mode 100644\n--- {old}\n+++ {new}\n"
        f"@@ {span} @@\n{body}"
    )


def _site(tmp_path: Path) -> Path:
    site = build(tmp_path)
    layers = site / LAYERS
    (layers / "gone.json").write_text('{"x": 1}\n')
    (layers / "untouched.json").write_text("{}\n")
    (layers / "old.py").write_text('NAME = "old"\n')
    return site


def test_data_files_deletions_and_renames_are_served_in_every_process(tmp_path: Path) -> None:
    site = _site(tmp_path)
    rename = (
        f"diff --git a/{LAYERS}/old.py b/{LAYERS}/new.py\nsimilarity index 60%\n"
        f"rename from {LAYERS}/old.py\nrename to {LAYERS}/new.py\n"
        f"--- a/{LAYERS}/old.py\n+++ b/{LAYERS}/new.py\n"
        '@@ -1 +1 @@\n-NAME = "old"\n+NAME = "new"\n'
    )
    diff = (
        _unified(f"{LAYERS}/table.json", '{"ok": "beside"}\n', '{"ok": "tuned"}\n')
        + _whole(f"{LAYERS}/added.json", "{}", added=True)
        + _whole(f"{LAYERS}/gone.json", '{"x": 1}', added=False)
        + rename
        + _unified(ROPE, ORIGINAL, ORIGINAL + "X = 1\n")
    )
    # the build's table.json has no newline at its end: the diff is made against the file
    (site / LAYERS / "table.json").write_text('{"ok": "beside"}\n')
    (tmp_path / "fix.diff").write_text(diff)
    arm = resolve(experiment(tmp_path, ["fix.diff"]))
    files = {f["path"]: f for f in arm.definition()["patches"][0]["files"]}
    assert files[f"{LAYERS}/gone.json"]["patched_sha256"] is None
    assert files[f"{LAYERS}/old.py"]["patched_sha256"] is None
    assert files[f"{LAYERS}/new.py"]["original_sha256"] is None

    diffs = {p: a for p, a in arm.diffs().items() if a is not None}
    pd = build_patch_dir(list(arm.patches), tmp_path / "patchroot", diffs=diffs)
    (tmp_path / "probe.py").write_text(textwrap.dedent(PROBE))
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": f"{pd.path}{os.pathsep}{site}", **pd.env()}
    out = subprocess.run([sys.executable, "probe.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    want = ["tuned", '{"ok": "tuned"}', True, False, True, "gone absent", "old absent", "new"]
    lines = [line.split(" ", 1) for line in out.stdout.splitlines()]
    assert [(name, json.loads(seen)) for name, seen in lines] == [
        ("MainProcess", want),
        ("EngineCore", want),
    ]
    details = {r.get("detail") for r in read_report(pd.report) if r.get("event") == "applied"}
    assert {f"deleted {LAYERS}/gone.json", f"served {LAYERS}/added.json"} <= details
    check_patch_report(pd.report, ("fix",))
    assert (site / LAYERS / "table.json").read_text() == '{"ok": "beside"}\n'  # build untouched


def test_a_data_file_of_another_build_fails_the_boot_naming_it(tmp_path: Path) -> None:
    site = _site(tmp_path)
    (site / LAYERS / "table.json").write_text('{"ok": "beside"}\n')
    diff = _unified(f"{LAYERS}/table.json", '{"ok": "beside"}\n', '{"ok": "tuned"}\n')
    (tmp_path / "fix.diff").write_text(diff)
    arm = resolve(experiment(tmp_path, ["fix.diff"]))
    diffs = {p: a for p, a in arm.diffs().items() if a is not None}
    pd = build_patch_dir(list(arm.patches), tmp_path / "patchroot", diffs=diffs)
    (site / LAYERS / "table.json").write_text('{"ok": "rebuilt"}\n')
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": f"{pd.path}{os.pathsep}{site}", **pd.env()}
    subprocess.run([sys.executable, "-c", "import sys"], env=env, check=True, timeout=60)
    errors = [r for r in read_report(pd.report) if r.get("event") == "error"]
    assert errors and "table.json here" in errors[0]["error"]
    assert "another vLLM build" in errors[0]["error"]


def test_a_binary_file_in_the_package_is_refused_naming_it(tmp_path: Path) -> None:
    _site(tmp_path)
    path = f"{LAYERS}/logo.png"
    (tmp_path / "fix.diff").write_text(
        f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..e69de29\n"
        f"Binary files /dev/null and b/{path} differ\n"
        + _unified(ROPE, ORIGINAL, ORIGINAL + "X = 1\n")
    )
    with pytest.raises(SpecabError, match=r"logo\.png is a binary file"):
        resolve(experiment(tmp_path, ["fix.diff"])).diffs()


def test_a_screening_candidate_whose_diff_changes_no_code_is_cleared_without_boots(
    tmp_path: Path,
) -> None:
    """`[screen] patches` with a comment-only diff beside a real change: the comment-only
    candidate runs the baseline's code, so the screening clears it before any boot and the
    driver plans none for it; the real change is screened as usual."""
    from bench.experiment import load_spec
    from bench.experiment.manifest import build_manifest
    from bench.stats.screen import same_code_candidates

    build(tmp_path, shift=0)
    (tmp_path / "comment.diff").write_text(
        _unified(
            ROPE,
            ORIGINAL,
            ORIGINAL.replace("def factor(declared):", "def factor(declared):  # why"),
        )
    )
    (tmp_path / "code.diff").write_text(_unified(ROPE, ORIGINAL, ORIGINAL + "X = 1\n"))
    f = experiment(tmp_path, [])
    text = f.read_text().replace('name = "fix"\npatches = []', 'name = "base"')
    f.write_text(
        text + '[screen]\nmetric = "acceptance_pos0"\npatches = ["comment.diff", "code.diff"]\n'
    )
    spec = load_spec(f)
    assert [a.name for a in spec.arms] == ["base", "01-comment", "02-code"]
    manifest = build_manifest(spec, f)
    assert same_code_candidates(manifest, "base") == {"01-comment"}
    # before any boot the driver already has nothing to boot for it, and says why
    import pandas as pd

    from bench.records import Results
    from bench.stats import screen_dropped

    empty = pd.DataFrame({"arm": [], "status": [], "boot": []})
    dropped = screen_dropped(Results(manifest, empty, pd.DataFrame()), alpha=0.05)
    assert dropped == {"01-comment": "cleared: runs the baseline's code"}
