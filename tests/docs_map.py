"""docs/internals.md's module map, generated from the package faces: every package and
sub-package of bench/ with the first sentence of its `__init__` docstring and the modules it
holds. `tests/unit/test_docs.py` fails when the page's map differs from what the faces say;
`SPECAB_WRITE_GOLDENS=1` rewrites it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

BEGIN = "<!-- module map: generated from the faces' docstrings (tests/docs_map.py) -->"
END = "<!-- end of the module map -->"


def _first_sentence(doc: str) -> str:
    """Up to the first full stop that ends a sentence (the face's own summary)."""
    text = " ".join(doc.split())
    m = re.search(r"(?<!e\.g)(?<!i\.e)\.(\s|$)", text)
    return text[: m.start() + 1] if m else text


def render(bench: Path) -> str:
    """The map: one row per package face, in path order."""
    rows = [BEGIN, "", "| package | what it owns (its face) | modules |", "|---|---|---|"]
    for init in sorted(bench.rglob("__init__.py")):
        folder = init.parent
        if "runtime" in folder.relative_to(bench.parent).parts:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        modules = sorted(
            p.stem if p.is_file() else f"{p.name}/"
            for p in folder.iterdir()
            if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()
        )
        dotted = ".".join(folder.relative_to(bench.parent).parts)
        listed = ", ".join(f"`{m}`" for m in modules)
        sentence = _first_sentence(doc).replace("|", "/")
        rows.append(f"| `{dotted}` | {sentence} | {listed} |")
    return "\n".join([*rows, "", END])


def replace_map(page: str, bench: Path) -> str:
    """`page` with its map (between the markers) rendered anew."""
    start, end = page.index(BEGIN), page.index(END) + len(END)
    return page[:start] + render(bench) + page[end:]
