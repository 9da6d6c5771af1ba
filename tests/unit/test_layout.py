"""The package layout is the architecture (docs/development.md "Layout"): top-level units
import only the ones below them; inside a package its sub-packages form layers whose arrows
point down (no cycles); a sub-package is reached through its `__init__` (its public face),
never through its modules; folders stay small enough to hold in one's head, module names say
what they own, and tests import what a sub-package exports."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"

# Who may import whom (top-level names under bench/). `errors` and `records` (the results
# contract) are everyone's vocabulary; `__version__` and `lazy_attribute` (a face's PEP 562
# loader) are the package's.
ALLOWED = {
    "errors": set(),
    "records": set(),
    "store": set(),
    "experiment": set(),
    "stats": {"store"},
    "simulate": {"store", "stats"},
    "report": {"store", "stats"},
    "tracking": {"store", "stats", "report"},
    "run": {"store", "experiment", "stats"},
    "trace": {"store", "experiment", "run"},
    "demo": {"store", "experiment", "run", "report"},
    "commands": {"store", "experiment", "run", "stats", "report", "tracking", "demo", "trace"},
    "cli": {"commands"},
}
EVERYONE = {"errors", "records", "__version__", "lazy_attribute", "release_freed_memory"}

# Inside each package, its units (sub-packages and top-level modules) from the bottom up:
# a unit imports only units listed before it.
LAYERS = {
    "records": [
        "metrics",
        "replication",
        "boots_and_probes",
        "manifest",
        "reference",
        "claim",
        "count_lists",
        "loaded_results",
        "trace_record",
    ],
    "store": [
        "atomic_files",
        "validity",
        "versions",
        "parquet_rows",
        "load",
        "appended_results",
        "writer_claim",
        "write",
        "references",
        "campaign",
    ],
    "experiment": [
        "spec",
        "history",
        "probes",
        "reference",
        "launch",
        "lint",
        "preflight",
        "manifest",
        "preview",
    ],
    "stats": [
        "schema",
        "methods",
        "inputs",
        "describe",
        "compare",
        "select",
        "checks",
        "gate",
        "bisect",
        "screen",
        "plan",
        "own_references",
        "analysis",
    ],
    "simulate": ["generative", "simulated_boots", "output_steps", "runs", "directory", "histories"],
    "report": [
        "figures",
        "tables",
        "sections",
        "page",
        "render",
        "console",
    ],
    "tracking": ["mlflow_runs", "live_tracking"],
    "run": ["attempt", "compile_caches", "node", "process", "boot", "placement", "driver"],
    "trace": [
        "name_maps",
        "tensor_diff",
        "config_fields",
        "trace_plan",
        "compare_steps",
        "trace_run",
    ],
    "demo": [
        "tiny_models",
        "dflash",
        "eagle3",
        "train",
        "distillation",
        "training_forward",
        "drafters",
        "build",
        "__main__",
    ],
    "commands": [
        "options",
        "validate",
        "lint",
        "demo_models",
        "boot",
        "analyze",
        "run_ab",
        "selftest",
        "report",
        "probes",
        "gate",
        "export",
    ],
}
MAX_LINES = 330  # "~300": a guide with a little slack, not a license
MAX_MODULES = 12  # "about ten" per folder


def _modules() -> list[Path]:
    return sorted(p for p in BENCH.rglob("*.py") if "runtime" not in p.relative_to(BENCH).parts)


def _dotted(path: Path) -> str:
    parts = list(path.with_suffix("").relative_to(ROOT).parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_package(dotted: str) -> bool:
    return (ROOT / dotted.replace(".", "/") / "__init__.py").is_file()


def _imports(tree: ast.AST) -> list[tuple[str, list[str]]]:
    """(module, names) of every absolute import of bench, at any depth (lazy ones too)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "bench" or node.module.startswith("bench."):
                out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names if a.name.startswith("bench")]
    return out


def _targets(module: str, names: list[str]) -> list[str]:
    """`from bench import stats` imports the module bench.stats; `from bench import x` a name."""
    if module == "bench":
        return [f"bench.{n}" for n in names]
    return [module]


def _where(path: Path) -> tuple[str, str | None]:
    """(top-level unit, unit inside it or None) of a module under bench/."""
    rel = path.relative_to(BENCH).with_suffix("").parts
    top = rel[0]
    if len(rel) == 1:
        return top, None
    return top, rel[1] if rel[1] != "__init__" else None


IDS = [str(p.relative_to(BENCH)) for p in _modules()]


@pytest.mark.parametrize("path", _modules(), ids=IDS)
def test_imports_point_down_only(path: Path) -> None:
    top, unit = _where(path)
    if top == "__init__":
        return  # bench/__init__.py: the version and the faces' lazy loader only
    assert top in ALLOWED, f"{top}: a new top-level unit; add it to docs/development.md and here"
    layers = LAYERS.get(top, [])
    if unit is not None and layers:
        assert unit in layers, f"{top}/{unit}: a new unit; place it in LAYERS (and the docs)"
    problems = []
    for module, names in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        for target in _targets(module, names):
            parts = target.split(".")
            other = parts[1] if len(parts) > 1 else None
            if other is None or other in EVERYONE:
                continue
            if other != top:
                if other not in ALLOWED[top]:
                    problems.append(f"{target} (not below {top})")
                elif not _is_package(target) and len(parts) > 2:
                    problems.append(f"{target} (a module of {other}: import its package)")
                continue
            if len(parts) == 2 and unit is not None:
                problems.append(f"{target} (its own package's face, from inside: a cycle)")
                continue
            if unit is None or len(parts) < 3:
                continue
            theirs = parts[2]
            if theirs != unit and layers.index(theirs) > layers.index(unit):
                problems.append(f"{target} ({theirs} is above {unit})")
            elif theirs != unit and len(parts) > 3:
                problems.append(f"{target} (inside {theirs}: import bench.{top}.{theirs})")
    assert not problems, f"{path.relative_to(BENCH)} imports {problems}"


@pytest.mark.parametrize("path", _modules(), ids=IDS)
def test_module_is_small_enough_to_read(path: Path) -> None:
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(BENCH)} has {n} lines; split it by concern"


def test_every_folder_holds_about_ten_modules() -> None:
    big = {}
    for folder in {p.parent for p in _modules()}:
        n = len([p for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py")])
        if n > MAX_MODULES:
            big[str(folder.relative_to(ROOT))] = n
    assert not big, f"folders over {MAX_MODULES} modules (make a sub-package): {big}"


def test_module_names_say_what_they_own_and_are_unique() -> None:
    names = [p for p in _modules() if p.name not in ("__init__.py", "__main__.py")]
    private = [str(p.relative_to(BENCH)) for p in names if p.name.startswith("_")]
    assert not private, f"a package's __init__ is its face; no private module names: {private}"
    counted = Counter(p.stem for p in names)
    twice = sorted(n for n, c in counted.items() if c > 1)
    assert not twice, f"two modules share a name: {twice}"
    shape = {"core", "parts", "cells", "extras", "rows", "base", "text", "common", "utils", "misc"}
    vague = [str(p.relative_to(BENCH)) for p in names if p.stem in shape]
    assert not vague, f"modules named by shape, not content: {vague}"


def test_every_package_says_what_it_owns() -> None:
    for init in BENCH.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 60 and "TODO" not in doc, f"{init.relative_to(ROOT)}: docstring"


def _outside_files() -> list[tuple[Path, str]]:
    """Python that uses bench from outside it: tests, benchmarks, docs scripts, notebooks,
    the cluster recipes, and the code that tests run in subprocesses (strings)."""
    out = []
    for folder in ("tests", "benchmarks", "docs", "cluster"):
        out += [(p, p.read_text(encoding="utf-8")) for p in (ROOT / folder).rglob("*.py")]
    for nb in (ROOT / "notebooks").glob("*.ipynb"):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        out.append((nb, code))
    return out


def test_tests_import_what_a_package_exports() -> None:
    """Tests, benchmarks and notebooks import a package's public face (its __init__) or a
    top-level module (bench.errors, bench.cli), never a module inside a package: a test that
    reaches in pins the layout in place."""
    offenders = []
    pattern = re.compile(r"^\s*from (bench(?:\.\w+)*) import", re.M)
    for path, text in _outside_files():
        for module in pattern.findall(text):  # in code and in scripts run as strings
            top_module = module.count(".") == 1 and not _is_package(module)
            if not (_is_package(module) or top_module):
                offenders.append(f"{path.relative_to(ROOT)}: {module}")
    assert not offenders, offenders


def _defined_names(module: str) -> set[str]:
    """What `from module import name` may name: a face's `__all__` and its sub-modules, or a
    plain module's top-level definitions and imports."""
    path = ROOT / module.replace(".", "/")
    init = path / "__init__.py"
    tree = ast.parse((init if init.is_file() else path.with_suffix(".py")).read_text("utf-8"))
    names: set[str] = set()
    if init.is_file():
        names = {p.stem for p in path.glob("*.py")} | {p.name for p in path.iterdir() if p.is_dir()}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                assert node.value is not None
                names |= {ast.literal_eval(e) for e in node.value.elts}  # type: ignore[attr-defined]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def test_outside_code_imports_only_names_that_exist() -> None:
    """A name renamed or removed in bench fails here, not when a benchmark, a docs script or a
    test is next run by hand (a benchmark once imported a record two releases gone)."""
    missing = []
    for path, text in _outside_files():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(text)):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
                continue
            if node.module.split(".")[0] != "bench":
                continue
            defined = _defined_names(node.module)
            missing += [
                f"{path.relative_to(ROOT)}: {node.module}.{a.name}"
                for a in node.names
                if a.name != "*" and a.name not in defined
            ]
    assert not missing, missing


def _face_exports() -> dict[str, list[str]]:
    """Each package face's `__all__`."""
    out = {}
    for init in BENCH.rglob("__init__.py"):
        for node in ast.parse(init.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                out[_dotted(init)] = [ast.literal_eval(e) for e in node.value.elts]
    return out


def test_a_face_exports_only_what_someone_imports_from_it() -> None:
    """Narrow faces: every name a package's `__init__` exports is imported from that face
    (`from bench.x import name`, or `x.name` after importing the face) somewhere: another
    package, a test, a benchmark, a docs script or the notebook. A name nobody reads there
    belongs to the sub-package that defines it."""
    faces = _face_exports()
    texts = [p.read_text(encoding="utf-8") for p in BENCH.rglob("*.py")]
    texts += [text for _, text in _outside_files()]
    read: set[tuple[str, str]] = set()
    for text in texts:
        alias = {face.rsplit(".", 1)[-1]: face for face in faces}  # `stats.analyze`
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                read |= {(node.module, a.name) for a in node.names}
                alias |= {a.asname: f"{node.module}.{a.name}" for a in node.names if a.asname}
        # `x.name` in code, not in an import line, where `from bench.x.name import name`
        # would count a module named like its function as a read of the face
        code = re.sub(r"^\s*(from|import)\s.*$", "", text, flags=re.M)
        for short, face in alias.items():  # `from bench import report as tables`
            read |= {(face, n) for n in re.findall(rf"\b{short}\.([A-Za-z_]\w*)", code)}
    unread = [f"{f}.{n}" for f, names in faces.items() for n in names if (f, n) not in read]
    assert not unread, f"exported but never imported from the face: {sorted(unread)}"
