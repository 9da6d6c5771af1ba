"""The user guide: generated from the code where it can be, built strictly, and the README's
links lead somewhere."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
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
    assert "| `ready_timeout_s` | number | `600.0` |" in sections["[server]"]
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
