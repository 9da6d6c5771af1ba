"""Sweeps: a `[sweep]` grid over arm fields generates the experiment's arms.

`expand_sweep` runs on the parsed TOML before validation and appends one ordinary `[[arms]]`
entry per grid cell, so generated arms are validated, resolved, preflighted and hashed exactly
like hand-written ones (resume never mixes versions). Hand-written arms, if any, are each
crossed with the grid (`eagle3-k3-c4`); without them a cell is its own arm (`k3-c4`).
`no_speculation = true` adds one speed-only arm per level of the non-speculative axes
(`nospec-c4`). `sweep_cells` describes every generated arm for the manifest (what the
selection statistics group and tie-break on).
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bench.errors import SpecabError
from bench.records import REGISTRY, SPEED_METRIC

Level = str | int | float | bool
# Where a grid axis may point, and the arm table it writes into (None: the field itself).
_ROOTS = ("speculative_config", "args", "env", "draft_config", "target_config")
_SPECULATIVE_ROOTS = ("speculative_config", "draft_config")
_LABELS = {"speculative_config.num_speculative_tokens": "k", "concurrency": "c"}
_VALUE_ONLY = {"speculative_config.method"}  # the value is label enough: ngram-k3
OBJECTIVES = tuple(m.name for m in REGISTRY if m.selectable)
# The registry's selectable names as a Literal, so the file's schema and reference list them
if TYPE_CHECKING:
    Objective = str
else:
    Objective = Literal[OBJECTIVES]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SweepSection(_Model):
    grid: dict[str, list[Level]] = Field(
        description='Arm field -> its levels; one arm per combination, e.g. { "speculative_'
        'config.num_speculative_tokens" = [1, 2, 4], concurrency = [1, 4] }. A field is '
        "concurrency, or speculative_config.*, args.*, env.*, draft_config.* or "
        "target_config.* (dotted: the table, then the key)."
    )
    no_speculation: bool = Field(
        False,
        description="Also generate one no-speculation arm per level of the grid's "
        "non-speculative fields (concurrency, args.*, env.*, target_config.*), named "
        "nospec-<levels>: speculation competes with running without it.",
    )
    names: dict[str, str] = Field(
        default_factory=dict,
        description="Grid field -> short label in generated arm names (defaults: k for "
        "num_speculative_tokens, c for concurrency, the value alone for method, else the "
        "field's last part).",
    )
    objective: Objective = Field(
        SPEED_METRIC,
        description="What the selection maximizes, per boot: output tokens/s (log scale, "
        "relative margin) or an acceptance metric (absolute margin); any metric of "
        "`analyze --json`.",
    )
    margin: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="Indifference zone delta: a configuration within this of the best counts "
        "as best (relative for a ratio metric such as output_tokens_per_s: 0.05 = within 5 %, "
        "absolute otherwise).",
    )
    group_by: list[str] | None = Field(
        None,
        description="Grid fields whose levels are selected separately; default: "
        '["concurrency"] when concurrency is swept (the best k per concurrency level).',
    )
    min_mean_accepted_length: float | None = Field(
        None,
        ge=1,
        description="Constraint: only configurations whose estimated mean accepted length is "
        "at least this compete (no-speculation arms are exempt when the objective is speed).",
    )
    min_acceptance_pos0: float | None = Field(
        None, ge=0, le=1, description="Constraint: the same for acceptance at position 0."
    )
    tie_break: Literal["fewest_speculative_tokens", "best_estimate"] = Field(
        "fewest_speculative_tokens",
        description="Which configuration to ship among those proven within the margin of the "
        "best: the cheapest (fewest speculative tokens per step, none for no speculation; "
        "then grid order) or the one with the best estimate.",
    )

    @model_validator(mode="after")
    def _group_by_in_grid(self) -> SweepSection:
        for axis in self.group_by or []:
            if axis not in self.grid:
                raise ValueError(
                    f"group_by {axis!r} is not a grid field; list fields of sweep.grid, e.g. "
                    '["concurrency"]'
                )
        return self


def _fail(msg: str, file: Path, field: str, fix: str) -> SpecabError:
    return SpecabError(msg, file=file, field=field, fix=fix)


def _label(axis: str, value: Level, names: dict[str, str]) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if axis in names:
        return f"{names[axis]}{text}"
    if axis in _VALUE_ONLY:
        return text.replace("_", "-")
    return f"{_LABELS.get(axis, axis.rsplit('.', 1)[-1])}{text}"


def _check_grid(sweep: Any, file: Path) -> dict[str, list[Any]]:
    if not isinstance(sweep, dict) or not isinstance(sweep.get("grid"), dict) or not sweep["grid"]:
        raise _fail(
            "a sweep needs a grid of fields and their levels",
            file,
            "sweep.grid",
            'write e.g. grid = { "speculative_config.num_speculative_tokens" = [1, 2, 4] }',
        )
    grid: dict[str, list[Any]] = sweep["grid"]
    for axis, levels in grid.items():
        where = f"sweep.grid.{axis}"
        root = axis.split(".", 1)[0]
        if axis != "concurrency" and (root not in _ROOTS or "." not in axis):
            raise _fail(
                f"cannot sweep {axis!r}",
                file,
                where,
                "sweep concurrency or a key of speculative_config, args, env, draft_config or "
                'target_config, e.g. "args.max-num-seqs"',
            )
        if not isinstance(levels, list) or not levels:
            raise _fail("levels must be a non-empty list", file, where, "write e.g. [1, 2, 4]")
        if any(isinstance(v, dict | list) for v in levels):
            raise _fail(
                "levels must be strings, numbers or booleans",
                file,
                where,
                "write one scalar per level; cross hand-written [[arms]] for tables",
            )
        if len({repr(v) for v in levels}) != len(levels):
            raise _fail("a level is listed twice", file, where, "list each level once")
    return grid


def _apply(
    arm: dict[str, Any], axis: str, value: Any, file: Path, cell: str, hand: str = ""
) -> None:
    """Write one grid level into an arm table; refuse to override what the arm sets itself."""
    if axis == "concurrency":
        root, key = "concurrency", None
    else:
        root, key = axis.split(".", 1)
    if root == "speculative_config" and arm.get("speculative_config") is False:
        raise _fail(
            f"cell {cell}: the arm turns speculation off, so {axis} cannot apply",
            file,
            f"sweep.grid.{axis}",
            "remove the no-speculation arm from [[arms]] (use no_speculation = true)",
        )
    table = arm if key is None else arm.setdefault(root, {})
    slot = root if key is None else key
    if slot in table:
        raise _fail(
            f"cell {cell}: arm {hand!r} already sets {axis}",
            file,
            f"sweep.grid.{axis}",
            "set the field either in the arm or in the grid, not both",
        )
    table[slot] = value


def _cell_arms(
    base: list[dict[str, Any]], grid: dict[str, list[Any]], names: dict[str, str], file: Path
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    out = []
    for combo in itertools.product(*grid.values()):
        values = dict(zip(grid, combo, strict=True))
        label = "-".join(_label(a, v, names) for a, v in values.items())
        for hand in base:
            arm = {k: (dict(v) if isinstance(v, dict) else v) for k, v in hand.items()}
            name = f"{hand['name']}-{label}" if hand.get("name") else label
            cell = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
            arm["name"] = cell
            for axis, value in values.items():
                _apply(arm, axis, value, file, cell, str(hand.get("name", "")))
            out.append((arm, values))
    return out


def _nospec_arms(
    grid: dict[str, list[Any]], names: dict[str, str], file: Path
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    plain = {a: v for a, v in grid.items() if a.split(".", 1)[0] not in _SPECULATIVE_ROOTS}
    out = []
    for combo in itertools.product(*plain.values()):
        values = dict(zip(plain, combo, strict=True))
        label = "-".join(["nospec", *(_label(a, v, names) for a, v in values.items())])
        arm: dict[str, Any] = {"name": label, "speculative_config": False}
        arm["description"] = "No speculation (generated by [sweep] no_speculation)."
        for axis, value in values.items():
            _apply(arm, axis, value, file, label)
        out.append((arm, values))
    return out


def expand_sweep(data: dict[str, Any], file: Path) -> dict[str, Any]:
    """The document with the sweep's arms in place of the hand-written ones (unchanged
    without a [sweep] table). Errors name the sweep field and the cell."""
    sweep = data.get("sweep")
    if sweep is None:
        return data
    grid = _check_grid(sweep, file)
    names = sweep.get("names") if isinstance(sweep.get("names"), dict) else {}
    hand = data.get("arms", [{}]) or [{}]
    if not isinstance(hand, list) or not all(isinstance(a, dict) for a in hand):
        return data  # the model reports the malformed [[arms]]
    cells = _cell_arms(hand, grid, names, file)
    if sweep.get("no_speculation") is True:
        cells += _nospec_arms(grid, names, file)
    arms = [arm for arm, _ in cells]
    seen: set[str] = set()
    for arm in arms:
        if arm["name"] in seen:
            raise _fail(
                f"two cells are both named {arm['name']!r}",
                file,
                "sweep.names",
                "give the fields distinct labels in sweep.names",
            )
        seen.add(arm["name"])
    return {**data, "arms": arms}


def sweep_cells(spec: Any) -> dict[str, Any] | None:
    """The manifest's `sweep` entry: the selection settings and, per arm, its grid levels,
    its selection group and its cost (speculative tokens per step; 0 without speculation)."""
    sweep: SweepSection | None = spec.sweep
    if sweep is None:
        return None
    group_by = (
        sweep.group_by
        if sweep.group_by is not None
        else (["concurrency"] if "concurrency" in sweep.grid else [])
    )
    k_default = spec.server.speculative_config.get("num_speculative_tokens", 0)
    cells = []
    for order, arm in enumerate(spec.arms):
        own = arm.speculative_config
        speculative = own is not False
        k = (own.get("num_speculative_tokens", k_default) if speculative else 0) or 0
        level: dict[str, Any] = {"concurrency": arm.concurrency or spec.probes.concurrency}
        for axis in group_by:
            if axis != "concurrency":
                root, key = axis.split(".", 1)
                table = getattr(arm, root, None)
                level[axis] = table.get(key) if isinstance(table, dict) else None
        group = "-".join(_label(a, level[a], sweep.names) for a in group_by) or "all"
        cells.append(
            {
                "arm": arm.name,
                "group": group,
                "levels": level if group_by else {},
                "cost": [int(k), order],
                "speculative": speculative,
            }
        )
    return {**sweep.model_dump(mode="json"), "group_by": group_by, "cells": cells}
