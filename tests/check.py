"""`make check`: the inner loop. Lint (ruff, mypy) beside the unit and fake-server tests that
cover what a change touched, in a few minutes rather than the whole suite's quarter hour.

What a change touched: the files that differ from `SPECAB_CHECK_BASE` (default HEAD: what
is not committed yet; `SPECAB_CHECK_BASE=main` for a branch's commits too), untracked
files included. A test file is picked when
- it changed itself;
- it imports a name that a changed module defines (a package's face resolved to the module
  behind the name: `from bench.stats import screening` is bench/stats/screen/
  screening_replay.py);
- or its name shares a word with the changed module's name or its package's
  (test_screen_run.py for bench/stats/screen/design.py; a word of 4+ letters, compared on
  its first 4).
Tests that boot real vLLM, need the namespace test bed or run long (markers vllm, testbed,
slow: a kill-and-resume, a 300-run calibration) are left to `make test`. The layout and
golden tests run every time.

    .venv/bin/python tests/check.py [--list]
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ("tests/unit", "tests/integration")
# Every change: the layout rules, and the goldens (what every view prints on fixed inputs).
ALWAYS = ["tests/unit/test_layout.py", "tests/unit/test_goldens.py"]
LINT = (
    "ruff format --check bench tests benchmarks && ruff check bench tests benchmarks && mypy bench"
)


def _git(*args: str) -> list[str]:
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    return done.stdout.split("\n") if done.returncode == 0 else []


def changed_files(base: str) -> list[str]:
    """Paths that differ from `base` in the working tree, and untracked ones."""
    files = _git("diff", "--name-only", base) + _git("ls-files", "--others", "--exclude-standard")
    return sorted({f for f in files if f})


def dotted(path: str) -> str | None:
    """bench/x/y.py -> bench.x.y (a package's __init__ -> the package); None if not bench."""
    if not (path.startswith("bench/") and path.endswith(".py")):
        return None
    return path[: -len(".py")].replace("/", ".").removesuffix(".__init__")


def _origin(module: str, name: str) -> str:
    """The module that defines `module.name` (a face re-exports what its modules define)."""
    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return f"{module}.{name}"
    if hasattr(obj, "__path__") or type(obj).__name__ == "module":
        return str(obj.__name__)
    return str(getattr(obj, "__module__", None) or module)


def imports(test: Path) -> set[str]:
    """The bench modules a test file's imports come from, each name resolved to the module
    that defines it."""
    try:
        tree = ast.parse(test.read_text(encoding="utf-8"))
    except SyntaxError:
        return set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("bench.")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bench"):
            out |= {_origin(str(node.module), a.name) for a in node.names}
    return out


def _words(text: str) -> set[str]:
    return {w[:4] for w in re.split(r"[^a-z]+", text.lower()) if len(w) >= 4}


def _near(path: str) -> str:
    """A module's own name and its package's (bench/stats/screen/design.py: screen/design):
    a top-level package's name (stats, report) would pick half the suite."""
    parts = Path(path).with_suffix("").parts[1:]
    return "/".join(p for p in parts[-2:] if p != "__init__")


def covers(module: str, imported: set[str]) -> bool:
    """A test whose names come from `imported` reaches `module`: one of them is defined
    there (a changed face, `__init__`, reaches only what it defines itself)."""
    return module in imported


def picked(changed: list[str]) -> dict[str, str]:
    """Test file -> why it was picked."""
    modules = [m for m in (dotted(f) for f in changed) if m]
    words = {w for f in changed if f.startswith("bench/") for w in _words(_near(f))}
    out: dict[str, str] = {}
    for folder in TESTS:
        for test in sorted((ROOT / folder).glob("test_*.py")):
            rel = str(test.relative_to(ROOT))
            if rel in changed:
                out[rel] = "changed"
                continue
            have = imports(test)
            hit = next((m for m in modules if covers(m, have)), None)
            if hit:
                out[rel] = f"imports {hit}"
            elif shared := words & _words(test.stem.removeprefix("test_")):
                out[rel] = f"named like {', '.join(sorted(shared))}"
    return out


def main() -> int:
    base = os.environ.get("SPECAB_CHECK_BASE", "HEAD")
    changed = changed_files(base)
    tests = picked(changed)
    print(f"check: {len(changed)} changed file(s) since {base}; {len(tests)} test file(s)")
    for test, why in tests.items():
        print(f"  {test}: {why}")
    if "--list" in sys.argv[1:]:
        return 0
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    lint = subprocess.Popen(["bash", "-c", LINT], cwd=ROOT, env=env)
    runner = [sys.executable, str(ROOT / "tests" / "run_pytest.py"), "-q", "-p", "no:cacheprovider"]
    chosen = list(dict.fromkeys([*ALWAYS, *tests]))
    status = subprocess.run(
        [*runner, "-m", "not (vllm or testbed or slow)", *chosen], cwd=ROOT, env=env
    ).returncode
    lint_status = lint.wait()
    print(f"check: lint {'ok' if lint_status == 0 else 'FAILED'}, tests exit {status}")
    return 0 if status in (0, 5) and lint_status == 0 else 1  # 5: every picked test deselected


if __name__ == "__main__":
    sys.exit(main())
