"""The user guide: generated from the code where it can be, built strictly, and the README's
links lead somewhere."""

from __future__ import annotations

import ast
import importlib
import os
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from bench.experiment import experiment_reference_markdown

ROOT = Path(__file__).parents[2]
REFERENCE = ROOT / "docs" / "reference" / "experiment-file.md"


def test_experiment_reference_is_generated_from_the_models() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == experiment_reference_markdown(), (
        "docs/reference/experiment-file.md is out of date: run `make docs` "
        "(or `specab schema --markdown > docs/reference/experiment-file.md`)"
    )


def test_reference_names_every_field_with_its_default() -> None:
    from bench.experiment import ArmSpec, ServerSection

    sections = {
        part.split("`", 2)[1]: part for part in experiment_reference_markdown().split("\n## ")[1:]
    }
    for title, model in (("[server]", ServerSection), ("[[arms]]", ArmSpec)):
        rows = sections[title].splitlines()
        for name, field in model.model_fields.items():
            row = next(line for line in rows if line.startswith(f"| `{name}` |"))
            assert field.description and field.description.split()[0] in row
    assert "| `ready_timeout_s` | number or none | `null` |" in sections["[server]"]
    assert "The same fields as [`server.container`]" in sections["[arms.container]"]


def test_schema_markdown_command_prints_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.cli import run

    assert run(["schema", "--markdown"]) == 0
    assert capsys.readouterr().out == experiment_reference_markdown()


def test_user_guide_builds_in_strict_mode(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    exe = str(mkdocs) if mkdocs.exists() else shutil.which("mkdocs")
    assert exe, "mkdocs is part of the dev extra (pip install -e '.[dev]')"
    proc = subprocess.run(
        [exe, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    built = {p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("*")}
    assert {
        "index.html",
        "reference/experiment-file/index.html",
        "troubleshooting/index.html",
    } <= built


def test_readme_is_short_and_its_links_resolve() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert links
    missing = [x for x in links if "://" not in x and not (ROOT / x).exists()]
    assert not missing


def test_troubleshooting_names_every_module_that_raises_an_error() -> None:
    text = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    raising = sorted(
        p.relative_to(ROOT / "bench").as_posix()
        for p in (ROOT / "bench").rglob("*.py")
        if p.name != "errors.py"
        and re.search(r"\b(SpecabError|BootFailed)\(", p.read_text(encoding="utf-8"))
    )
    assert raising
    assert [m for m in raising if m not in text] == []


MAP_DOCS = ("docs/internals.md", "docs/development.md")


def _defined_names() -> set[str]:
    """Every function, class, method and module-level name defined in bench/ and tests/."""
    out: set[str] = set()
    for p in [*(ROOT / "bench").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                out.add(node.name)
                out.update(a.arg for a in [*node.args.args, *node.args.kwonlyargs])
            elif isinstance(node, ast.ClassDef):
                out.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def _identifiers() -> set[str]:
    """Every identifier and string token in the code: fields, options and keys included."""
    out: set[str] = set()
    for p in [*(ROOT / "bench").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]:
        with tokenize.open(p) as fh:
            for tok in tokenize.generate_tokens(fh.readline):
                if tok.type == tokenize.NAME:
                    out.add(tok.string)
                elif tok.type == tokenize.STRING:
                    out.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", tok.string))
    return out


def _dotted_exists(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("doc", MAP_DOCS)
def test_the_module_map_names_only_modules_and_functions_that_exist(doc: str) -> None:
    """docs/internals.md and docs/development.md are the newcomer's map: a module path, a
    dotted name, a call or a name in code quotes that the code no longer has fails here."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    files = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.py") if ".venv" not in p.parts]
    defined = _defined_names()
    known = _identifiers() | {Path(f).stem for f in files}
    missing = []
    for span in re.findall(r"`([^`\n]+)`", text):
        for path in re.findall(r"[\w/]+\.py\b", span):
            if not any(f == path or f.endswith("/" + path) for f in files):
                missing.append(path)
        for dotted in re.findall(r"\bbench(?:\.\w+)+", span):
            if not _dotted_exists(dotted):
                missing.append(dotted)
        for call in re.findall(r"\b([A-Za-z_]\w*)\(", span):
            if call not in defined:
                missing.append(f"{call}()")
        named = re.fullmatch(r"[A-Za-z_]\w*", span) and (
            "_" in span.strip("_") or span[0].isupper()
        )
        if named and span not in known:
            missing.append(span)
    assert not missing, f"{doc} names what the code does not have: {sorted(set(missing))}"


def test_no_file_cites_a_document_the_repository_lacks() -> None:
    """The repository stands alone: every document a source file or page names exists in it
    (relative to the citing file, the repository root or docs/): markdown links, documents
    named in capitals (README and the like) and paths that leave their folder (`..`). Files specab
    writes (`report.md`) are outputs, not citations."""
    cites = (
        re.compile(r"\]\(([^)#\s]+\.md)"),
        re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[A-Z][A-Z0-9_]+\.md)\b"),
        re.compile(r"((?:\.\./)+[\w./-]+\.md)\b"),
    )
    missing = []
    listed = subprocess.run(  # the repository's files: what git tracks or would (no ignored)
        ["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for p in (ROOT / f for f in listed):
        rel = p.relative_to(ROOT)
        if p.suffix not in (".py", ".md", ".toml", ".sh", ".yml") or not p.is_file():
            continue
        if rel.parts[0] in (".venv", ".git", "site") or "goldens" in rel.parts:
            continue
        text = p.read_text(encoding="utf-8", errors="replace")
        for name in {n for c in cites for n in c.findall(text)}:
            if name.startswith(("http", "www.")):
                continue
            here = [p.parent / name, ROOT / name, ROOT / "docs" / name]
            if not any(c.resolve().is_file() for c in here):
                missing.append(f"{rel}: {name}")
    assert missing == [], missing


def test_the_module_map_is_generated_from_the_package_faces() -> None:
    """docs/internals.md's module map says what every package face says (its first
    sentence) and holds the modules there are; SPECAB_WRITE_GOLDENS=1 rewrites it."""
    import os
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from docs_map import replace_map

    page = ROOT / "docs" / "internals.md"
    text = page.read_text(encoding="utf-8")
    want = replace_map(text, ROOT / "bench")
    if os.environ.get("SPECAB_WRITE_GOLDENS") == "1" and want != text:
        page.write_text(want, encoding="utf-8")
        text = want
    assert text == want, "the module map is stale: SPECAB_WRITE_GOLDENS=1 rewrites it"
