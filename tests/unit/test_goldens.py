"""What specab prints on fixed inputs stays what it printed when the goldens were recorded.

The inputs are committed results directories (tests/fixtures/goldens/results/: simulated runs
with fixed seeds and a real `make demo` run) and the committed experiment files under arms/.
The goldens (tests/fixtures/goldens/*.golden) are `analyze --json` (also --by, --split-arm),
the human and markdown verdict views, `plan --json`, the report's markdown, `gate --json` and
its view, and `validate`. They were recorded before the layout step moved every module, and
prove that the move changed no behaviour. Printed text must match exactly, every digit
included. The one tolerance is `JSON_FLOAT_RTOL`, for the unrounded floats of `--json`
output: numpy's reductions may sum in another order on another CPU (AVX2 against AVX-512),
which moves a float by ~1e-16 relative; 1e-9 is far above that and far below any digit the
views print. (vLLM's own ~1e-4 differences across CPUs are data in these inputs, not
recomputed.)

Rewrite them (only with a change that means to alter output, and say so in its note):
    SPECAB_WRITE_GOLDENS=1 .venv/bin/pytest tests/unit/test_goldens.py
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.cli import run

ROOT = Path(__file__).resolve().parents[2]
GOLDENS = ROOT / "tests" / "fixtures" / "goldens"
RESULTS = GOLDENS / "results"
WRITE = os.environ.get("SPECAB_WRITE_GOLDENS") == "1"

# (golden name, argv); DIR is a private copy of the results directory named first.
CLI_CASES: list[tuple[str, str, list[str]]] = [
    ("sim-ab.analyze.json", "sim-ab", ["analyze", "DIR", "--json", "--resamples", "2000"]),
    ("sim-ab.analyze.txt", "sim-ab", ["analyze", "DIR", "--resamples", "2000"]),
    ("sim-ab.analyze.md", "sim-ab", ["analyze", "DIR", "--format", "markdown"]),
    ("sim-ab.by-category.json", "sim-ab", ["analyze", "DIR", "--json", "--by", "category"]),
    ("sim-ab.split.json", "sim-ab", ["analyze", "DIR", "--json", "--split-arm", "base"]),
    ("sim-ab.split.txt", "sim-ab", ["analyze", "DIR", "--split-arm", "base"]),
    ("sim-ab.plan.json", "sim-ab", ["plan", "DIR", "--effect", "0.02", "--json"]),
    ("sim-ab.plan.txt", "sim-ab", ["plan", "DIR", "--effect", "0.02"]),
    ("sim-hosts.analyze.json", "sim-hosts", ["analyze", "DIR", "--json", "--resamples", "500"]),
    ("sim-hosts.analyze.txt", "sim-hosts", ["analyze", "DIR", "--resamples", "500"]),
    ("sim-sweep.analyze.json", "sim-sweep", ["analyze", "DIR", "--json", "--resamples", "0"]),
    ("sim-sweep.analyze.txt", "sim-sweep", ["analyze", "DIR", "--resamples", "0"]),
    ("demo.analyze.json", "demo", ["analyze", "DIR", "--json", "--resamples", "2000"]),
    ("demo.analyze.txt", "demo", ["analyze", "DIR", "--resamples", "2000"]),
    ("demo.by-category.json", "demo", ["analyze", "DIR", "--json", "--by", "category"]),
    ("demo.split.json", "demo", ["analyze", "DIR", "--json", "--split-arm", "shipped"]),
    ("demo.plan.json", "demo", ["plan", "DIR", "--effect", "0.02", "--json"]),
]
VALIDATE = [
    "arms/demo/demo.toml",
    "arms/demo/demo-draft-model.toml",
    "arms/demo/sweep-k.toml",
    "arms/tiny-cpu.toml",
    "arms/vllm-cpu-sampler.toml",
    "arms/selftest/selftest.toml",
    "arms/dspark-v4/experiment.toml",
]


def _normalize(text: str, *roots: Path) -> str:
    """Paths of this checkout, machine and run as placeholders (the interpreter first: it may
    live inside the checkout)."""
    for path, name in ((p, f"<{i}>") for i, p in enumerate(roots)):
        text = text.replace(str(path), name)
    text = text.replace(sys.executable, "<python>").replace(str(ROOT), "<repo>")
    return text.replace(str(Path.home()), "<home>")


# The only tolerance of the goldens, for unrounded floats in --json output (see above).
JSON_FLOAT_RTOL = 1e-9


def _numbers_close(a: str, b: str) -> bool:
    """Printed text is compared exactly: a printed decimal is rounded far from where a
    cross-CPU float difference (~1e-16 relative) could move its last digit."""
    return a == b


def _json_close(a: Any, b: Any, where: str = "$") -> str | None:
    """None when equal (floats to JSON_FLOAT_RTOL), else where they first differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return f"{where}: keys {list(a)} != {list(b)}"
        for k in a:
            if (diff := _json_close(a[k], b[k], f"{where}.{k}")) is not None:
                return diff
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if (diff := _json_close(x, y, f"{where}[{i}]")) is not None:
                return diff
        return None
    if isinstance(a, float) or isinstance(b, float):
        ok = isinstance(a, int | float) and isinstance(b, int | float)
        if ok and math.isclose(a, b, rel_tol=JSON_FLOAT_RTOL, abs_tol=1e-12):
            return None
        return f"{where}: {a!r} != {b!r}"
    if isinstance(a, str) and isinstance(b, str):
        return None if _numbers_close(a, b) else f"{where}: {a!r} != {b!r}"
    return None if a == b else f"{where}: {a!r} != {b!r}"


def _check(name: str, actual: str) -> None:
    path = GOLDENS / f"{name}.golden"
    if WRITE:
        path.write_text(actual, encoding="utf-8")
        return
    assert path.is_file(), f"no golden {path.name}: record it (SPECAB_WRITE_GOLDENS=1)"
    expected = path.read_text(encoding="utf-8")
    if name.endswith(".json"):
        diff = _json_close(json.loads(expected), json.loads(actual))
        assert diff is None, f"{name}: {diff}"
        return
    exp_lines, act_lines = expected.splitlines(), actual.splitlines()
    assert len(exp_lines) == len(act_lines), (
        f"{name}: {len(act_lines)} lines, golden has {len(exp_lines)}"
    )
    for i, (e, a) in enumerate(zip(exp_lines, act_lines, strict=True)):
        assert _numbers_close(e, a), f"{name} line {i + 1}:\n  golden: {e}\n  now:    {a}"


def _copy(tmp_path: Path, name: str) -> Path:
    src = RESULTS / name
    if not src.is_dir():
        pytest.fail(f"fixture {src} missing")
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")


@pytest.mark.parametrize(("name", "results", "argv"), CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_command_output_matches_its_golden(
    name: str, results: str, argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _copy(tmp_path, results)
    rc = run([str(d) if a == "DIR" else a for a in argv])
    out = capsys.readouterr()
    assert rc == 0, out.err
    _check(name, _normalize(out.out, d))


@pytest.mark.parametrize("results", ["sim-ab", "sim-hosts", "sim-sweep", "demo"])
def test_report_markdown_matches_its_golden(
    results: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _copy(tmp_path, results)
    assert run(["report", str(d)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    _check(f"{results}.report.md", _normalize((d / "report" / "report.md").read_text(), d))


def test_gate_matches_its_golden(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "refs"
    ref, new = _copy(tmp_path, "sim-reference"), _copy(tmp_path, "sim-ab")
    assert run(["reference", "save", str(ref), "trusted", "--store", str(store)]) == 0
    saved = _normalize(capsys.readouterr().out, store, ref)
    _check("gate.save.txt", saved)
    saved_file = store / "trusted.json"
    body = json.loads(saved_file.read_text())
    # when, where and by which release it was saved: fixed, so the gate's view prints the same
    body.update(created_at="2026-01-01T00:00:00+00:00", specab_version="<version>")
    body.update(machine={"cpu": "<cpu>", "platform": "<platform>"}, source="<reference>")
    saved_file.write_text(json.dumps(body, indent=2) + "\n")
    _check("gate.reference.json", saved_file.read_text())
    for argv, name in ((["--json"], "gate.json"), ([], "gate.txt")):
        rc = run(["gate", str(new), "--reference", "trusted", "--store", str(store), *argv])
        out = capsys.readouterr()
        assert rc in (0, 1), out.err
        _check(name, _normalize(out.out, store, new))


@pytest.mark.parametrize("spec", VALIDATE)
def test_validate_matches_its_golden(
    spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hf_home = tmp_path / "hf"  # an empty Hugging Face cache, the same on every machine
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    rc = run(["validate", str(ROOT / spec)])
    out = capsys.readouterr()
    text = _normalize(f"exit {rc}\n--- stdout\n{out.out}--- stderr\n{out.err}", hf_home)
    # Arm definition hashes cover the interpreter's and models' absolute paths, so they differ
    # between checkouts; what each arm runs is compared, not its hash.
    text = re.sub(r"\b[0-9a-f]{16,64}\b", "<hash>", text)
    _check("validate." + spec.removeprefix("arms/").replace("/", ".") + ".txt", text)


def _first_boots(tmp_path: Path, n: int) -> Path:
    """The demo run cut to its first `n` boots per arm (as a run stopped early leaves it)."""
    d = _copy(tmp_path, "demo")
    for table in ("boots", "probes"):
        for f in (d / table).glob("*.parquet"):
            if int(f.name.split("__b")[1][:3]) >= n:
                f.unlink()
    return d


@pytest.mark.parametrize("boots", [1, 2, 3])
def test_tables_show_every_interval_at_few_boots(
    boots: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At 1, 2 and 3 boots per arm every table command prints each interval it has, and the
    'too few boots' mark exactly where an arm has fewer than 3 boots (never as hidden markup)."""
    d = _first_boots(tmp_path, boots)
    texts = {}
    for kind, argv in (("txt", []), ("md", ["--format", "markdown"])):
        assert run(["analyze", str(d), "--resamples", "0", *argv]) == 0
        texts[kind] = capsys.readouterr().out
        _check(f"demo-b{boots}.analyze.{kind}", _normalize(texts[kind], d))
    assert run(["report", str(d)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    texts["report"] = (d / "report" / "report.md").read_text()
    # the terminal table wraps cells: its words are checked here, its layout by the golden
    assert ("(too few" in texts.pop("txt")) == (boots == 2)
    for kind, text in texts.items():
        marked = "(too few boots)" in text
        assert marked == (boots == 2), f"{kind}: 'too few boots' mark at {boots} boots"
        if boots == 1:
            assert "unreplicated" in text, kind
        else:  # the arms' and the comparisons' intervals are printed, marked or not
            if kind == "report":  # the markdown view holds the comparisons only
                assert re.search(r"0\.\d{4} \[0\.\d{4}, 0\.\d{4}\]", text), kind
            assert re.search(r"[-+]0\.\d{4} \[[-+]0\.\d{4},\s*[-+]0\.\d{4}\]", text), kind


def test_a_changed_exit_code_or_boot_count_in_a_golden_fails() -> None:
    """Printed text is exact: the comparison that checks every golden refuses `exit 1` for
    `exit 0`, a boot count off by one, a changed df and a last printed decimal one unit
    off."""
    validate = (GOLDENS / "validate.demo.demo.toml.txt.golden").read_text()
    assert validate.startswith("exit 0")
    assert not _numbers_close(validate, validate.replace("exit 0", "exit 1", 1))
    analyzed = (GOLDENS / "sim-ab.analyze.txt.golden").read_text()
    row = next(x for x in analyzed.splitlines() if x.startswith("│ base "))
    boots = row.split("│")[2]
    assert boots.strip() == "6"
    assert not _numbers_close(row, row.replace(boots, boots.replace("6", "7"), 1))
    assert not _numbers_close("p 0.0374 df 3", "p 0.0375 df 3")
    assert not _numbers_close("p 0.0374 df 3", "p 0.0374 df 4")
    assert not _numbers_close("p 0.0374", "p 0.0380")
