"""The package layout is the architecture (README "Layout"): each subpackage imports only
the ones below it, nothing imports upward, and modules stay small enough to read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

# Who may import whom (top-level names under bench/). `errors` is everyone's.
ALLOWED = {
    "errors": set(),
    "records": set(),
    "store": {"errors", "records"},
    "experiment": {"errors"},
    "stats": {"errors", "store"},
    "report": {"errors", "store", "stats"},
    "run": {"errors", "store", "experiment", "stats"},
    "demo": {"errors", "store", "experiment", "run", "report"},
    "commands": {"errors", "store", "experiment", "run", "stats", "report", "demo"},
    "cli": {"errors", "commands"},
}
MAX_LINES = 330  # "~300": a guide with a little slack, not a license
# Being split by the architecture work; this set only shrinks.
KNOWN_LONG: set[str] = set()


def _unit(path: Path) -> str:
    rel = path.relative_to(BENCH)
    return rel.parts[0].removesuffix(".py") if rel.parts[0] != "__init__.py" else ""


def _bench_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] == "bench" and len(parts) > 1:
                found.add(parts[1])
            elif parts == ["bench"]:
                found.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "bench" and len(parts) > 1:
                    found.add(parts[1])
    return found


def _modules() -> list[Path]:
    return sorted(p for p in BENCH.rglob("*.py") if "runtime" not in p.relative_to(BENCH).parts)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(BENCH)))
def test_imports_point_down_only(path: Path) -> None:
    unit = _unit(path)
    if not unit:
        return  # bench/__init__.py: the version only
    assert unit in ALLOWED, f"{unit}: a new top-level unit; add it to README Layout and here"
    # `errors` and `records` (the results rows) are everyone's vocabulary.
    upward = _bench_imports(path) - ALLOWED[unit] - {unit, "__version__", "errors", "records"}
    assert not upward, f"{path.relative_to(BENCH)} imports {sorted(upward)} (not below {unit})"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(BENCH)))
def test_module_is_small_enough_to_read(path: Path) -> None:
    n = len(path.read_text(encoding="utf-8").splitlines())
    if str(path.relative_to(BENCH)) in KNOWN_LONG:
        pytest.skip("known long module, being split")
    assert n <= MAX_LINES, f"{path.relative_to(BENCH)} has {n} lines; split it by concern"


def test_cross_package_imports_use_the_public_surface() -> None:
    """Other subpackages import `bench.stats`, not `bench.stats._core` (tests may look inside)."""
    offenders = []
    for path in _modules():
        unit = _unit(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                parts = node.module.split(".")
                inside = len(parts) > 2 and parts[0] == "bench" and parts[2].startswith("_")
                if inside and parts[1] != unit:
                    offenders.append(f"{path.relative_to(BENCH)}: {node.module}")
    assert not offenders, offenders
