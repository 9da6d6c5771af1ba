"""One command-line convention: `--version`, one way to get JSON, flags shown as flags, one
argument name per kind, margins named after their metric, commands listed in the order a
user meets them; older spellings still work and say what replaced them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench import __version__
from bench.cli import WORKFLOW, run
from bench.simulate import simulate_results


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def test_version_as_a_flag_and_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--version"]) == 0
    assert capsys.readouterr().out.strip() == __version__
    assert run(["version"]) == 0
    assert capsys.readouterr().out.strip() == __version__


def test_help_lists_commands_in_workflow_order_and_flags_as_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(["--help"]) == 0
    text = capsys.readouterr().out
    panels = [text.index(f"─ {panel} ") for panel in WORKFLOW]
    assert panels == sorted(panels)
    listed = re.findall(r"^│ ([a-z][a-z-]+) ", text, re.M)
    assert listed == [name for names in WORKFLOW.values() for name in names]
    for command in ("run-ab", "analyze", "validate", "status", "gate", "report"):
        assert run([command, "--help"]) == 0
        shown = capsys.readouterr().out
        assert "<bool>" not in shown, command


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("validate", "EXPERIMENT_FILE"),
        ("lint", "EXPERIMENT_FILE"),
        ("run-ab", "EXPERIMENT_FILE"),
        ("analyze", "RESULTS_DIR"),
        ("status", "RESULTS_DIR"),
        ("report", "RESULTS_DIR"),
        ("plan", "RESULTS_DIR"),
    ],
)
def test_one_argument_name_per_kind(
    command: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run([command, "--help"]) == 0
    usage = next(x for x in capsys.readouterr().out.splitlines() if "Usage:" in x)
    assert name in usage, usage


def test_old_spellings_still_work_and_say_what_replaced_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = simulate_results(tmp_path / "r", {"a": 0.0, "b": 0.02}, boots=3, prompts=10)
    base = ["analyze", str(results), "--resamples", "0"]
    assert run([*base, "--json", "--margin", "acceptance_pos0=0.03"]) == 0
    new = capsys.readouterr()
    assert run([*base, "--format", "json", "--margin-pos0", "0.03"]) == 0
    old = capsys.readouterr()
    assert json.loads(old.out) == json.loads(new.out) and new.err == ""
    assert json.loads(new.out)["margins"]["acceptance_pos0"] == 0.03
    assert "note: --margin-pos0 is deprecated; use --margin acceptance_pos0=0.03" in old.err
    assert "note: --format json is deprecated; use --json" in old.err


TABLE_COMMANDS = """
import sys, json
from bench.cli import run
from bench.records import SPEED_METRIC  # noqa: F401 - the records are everyone's
argvs = json.loads(sys.argv[1])
seen = {}
for argv in argvs:
    before = set(sys.modules)
    rc = run(argv)
    seen[argv[0] + " " + " ".join(a for a in argv[2:] if a.startswith("--"))] = (
        rc, sorted(m for m in sys.modules if m.split(".")[0] == "matplotlib")[:3]
    )
print("SEEN", json.dumps(seen), flush=True)
"""


def test_table_commands_import_no_matplotlib(tmp_path: Path) -> None:
    """What prints a table never loads the plotting stack (a second of start-up each time,
    and a dependency a headless CI job need not load): analyze as a table and as markdown,
    plan, status, validate and gate, in one interpreter, each checked after it ran."""
    import subprocess
    import sys

    results = simulate_results(tmp_path / "r", {"a": 0.0, "b": 0.02}, boots=3, prompts=10)
    root = Path(__file__).resolve().parents[2]
    store = tmp_path / "refs"
    argvs = [
        ["analyze", str(results), "--resamples", "0"],
        ["analyze", str(results), "--resamples", "0", "--format", "markdown"],
        ["plan", str(results), "--effect", "0.02"],
        ["status", str(results)],
        ["validate", str(root / "arms" / "tiny-cpu.toml")],
        ["reference", "save", str(results), "ref", "--store", str(store)],
        ["gate", str(results), "--reference", "ref", "--store", str(store)],
    ]
    out = subprocess.run(
        [sys.executable, "-c", TABLE_COMMANDS, json.dumps(argvs)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("SEEN ")), None)
    assert line is not None, out.stderr[-2000:]
    seen = json.loads(line.removeprefix("SEEN "))
    for command, (rc, plotting) in seen.items():
        assert rc in (0, 1), (command, out.stderr[-1500:])
        assert plotting == [], f"{command} imported {plotting}"
