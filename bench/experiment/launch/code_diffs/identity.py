"""Whether two versions of a Python module run the same code: their syntax trees compared
with comments, docstrings and formatting left out (a comment-only or docstring-only diff is
an A/A under another definition hash), and which vLLM model modules a served model imports
(a diff on a model file the arm never loads is an A/A too).

Compared by `ast.dump` without positions: a change of a constant, a name, an operator or a
statement differs; whitespace, comments, line breaks, quotes and docstrings do not."""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Callable, Iterable

_DOCSTRING_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
MODELS_PACKAGE = "vllm.model_executor.models"
_REGISTRY = "vllm/model_executor/models/registry.py"


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, _DOCSTRING_OWNERS) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = node.body[1:] or [ast.Pass()]
    return tree


def code_fingerprint(source: bytes) -> str | None:
    """sha256 of the module's code without comments, docstrings and layout (None: it does
    not parse, so nothing can be said)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    dumped = ast.dump(_without_docstrings(tree), annotate_fields=False, include_attributes=False)
    return hashlib.sha256(dumped.encode()).hexdigest()


def same_code(a: bytes, b: bytes) -> bool:
    """Both parse and run the same code (False when either does not parse)."""
    fa = code_fingerprint(a)
    return fa is not None and fa == code_fingerprint(b)


Reader = Callable[[str], bytes | None]  # repository path (vllm/...) -> file bytes or None


def model_modules(read: Reader) -> dict[str, str]:
    """Architecture name -> module under vllm.model_executor.models, from the build's own
    registry (its dict literals of `"Arch": ("module", "Class")`), read, not imported."""
    source = read(_REGISTRY)
    if source is None:
        return {}
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values, strict=True):
            if (
                isinstance(key, ast.Constant)
                and isinstance(key.value, str)
                and isinstance(value, ast.Tuple)
                and len(value.elts) == 2
                and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
                )
            ):
                found[key.value] = str(value.elts[0].value)  # type: ignore[attr-defined]
    return found


def _imported_models(source: bytes, package: str = MODELS_PACKAGE) -> set[str]:
    """Sibling model modules one model module imports (absolute or relative)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level == 1:
                base = f"{package}.{base}" if base else package
            if base == package:
                out.update(a.name for a in node.names)
            elif base.startswith(package + "."):
                out.add(base[len(package) + 1 :].split(".")[0])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(package + "."):
                    out.add(a.name[len(package) + 1 :].split(".")[0])
    return out


def loaded_model_modules(read: Reader, roots: Iterable[str]) -> set[str]:
    """Model modules (names under vllm.model_executor.models) the `roots` import, closed
    over their imports of each other."""
    seen: set[str] = set()
    todo = [r for r in roots if r]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        source = read(f"vllm/model_executor/models/{name}.py")
        if source is not None:
            todo.extend(_imported_models(source) - seen)
    return seen
