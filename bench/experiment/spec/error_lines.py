"""How a pydantic validation error of the experiment file is rendered as one line: the fix
per error type and the field path (arms shown by name). Used by `experiment_file.parse_spec`."""

from __future__ import annotations

import difflib
import re
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from bench.errors import SpecabError

FIXES = {
    "extra_forbidden": "remove it (unknown field; see `specab schema` for valid ones)",
    "missing": "add this field",
    "greater_than_equal": "use a larger value",
    "greater_than": "use a larger value",
    "less_than": "use a smaller value",
    "less_than_equal": "use a smaller value",
    "string_pattern_mismatch": "use letters, digits, '.', '_' or '-' only",
    "too_short": "give at least one entry",
    "dict_type": "write a TOML table, e.g. { key = value }",
    "list_type": 'write a list, e.g. ["a", "b"]',
    "string_type": "write a quoted string",
    "int_type": "write a whole number",
    "int_parsing": "write a whole number",
    "int_from_float": "write a whole number",
    "float_type": "write a number",
    "float_parsing": "write a number",
    "bool_type": "write true or false",
    "bool_parsing": "write true or false",
    "literal_error": "use one of the values listed",
}
# Members of the flag-value union (ArgValue); pydantic reports one error per member.
UNION_TAGS = {"str", "int", "float", "bool", "none"}


def render_loc(loc: tuple[int | str, ...], data: Any) -> str:
    """Render a pydantic location; an element of a list shows its name when it has one."""
    out: list[str] = []
    node = data
    for part in loc:
        if isinstance(part, int):
            name = (
                node[part].get("name")
                if isinstance(node, list) and part < len(node) and isinstance(node[part], dict)
                else None
            )
            # an arm by its name, as every other message names it: arms(fix); by index
            # only where it has none yet
            out[-1] = f"{out[-1]}({name})" if name and out else f"{out[-1] if out else ''}[{part}]"
            node = node[part] if isinstance(node, list) and part < len(node) else None
        else:
            out.append(str(part))
            node = node.get(part) if isinstance(node, dict) else None
    return ".".join(out)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model class an annotation holds (through Optional, unions and lists)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, tuple, typing.Annotated):
        for arg in typing.get_args(annotation):
            if (found := _model_in(arg)) is not None:
                return found
    return None


def fields_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The field names valid at `loc`'s parent ([] when it is not a model: a free table)."""
    current: type[BaseModel] | None = model
    for part in loc[:-1]:
        if current is None:
            return []
        if isinstance(part, int):
            continue  # an element of a list of models: the same model
        field = current.model_fields.get(part)
        current = _model_in(field.annotation) if field is not None else None
    return list(current.model_fields) if current is not None else []


def unknown_field_fix(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """'did you mean `x`?' from the model's own field names, else the names valid there."""
    names = fields_at(model, loc)
    close = difflib.get_close_matches(str(loc[-1]), names, n=1, cutoff=0.6) if loc else []
    if close:
        return f"did you mean `{close[0]}`? (rename it; `{loc[-1]}` is not a field here)"
    if names:
        return f"remove or rename it: the fields here are {', '.join(names)}"
    return FIXES["extra_forbidden"]


def spec_error(
    exc: ValidationError, data: dict[str, Any], file: Path, model: type[BaseModel]
) -> SpecabError:
    """pydantic's first problem with the document as one line: file, field path and fix."""
    # Unknown fields first: a misspelt table explains the "missing" one it replaced.
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    err = errors[0]
    raw_loc = tuple(err["loc"])
    union = bool(raw_loc) and str(raw_loc[-1]) in UNION_TAGS
    if union:
        raw_loc = raw_loc[:-1]
        errors = [e for e in errors if tuple(e["loc"])[:-1] != raw_loc] + [err]
    loc = render_loc(raw_loc, data) or (
        "experiment.baseline" if err["msg"].startswith("Value error, baseline") else "(top level)"
    )
    msg = re.sub(r"^(Value error|Assertion failed), ", "", err["msg"])
    fix = FIXES.get(err["type"], "correct the value")
    if err["type"] == "extra_forbidden":
        msg, fix = "unknown field", unknown_field_fix(model, raw_loc)
    if union:
        msg = "a flag value must be a string, number or boolean"
        fix = 'write e.g. 1024, "auto" or true (false removes the flag)'
    if err["type"] == "value_error":
        msg, _, fix = msg.partition("; ") if "; " in msg else (msg, "", fix)
    extra = f" ({len(errors) - 1} more problem(s) after this one)" if len(errors) > 1 else ""
    return SpecabError(msg + extra, file=file, field=loc, fix=fix)
