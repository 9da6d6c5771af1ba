"""`specab lint`: known draft/target mismatch classes, found in config.json files before any
boot (the two seed bugs were both readable there).

For every arm: the effective target and draft configs after the arm's overlays (a local
model directory, or a hub id read from the local Hugging Face cache; config files only, no
weights), then the checks of `mismatches` (rotary geometry, layer-index overflow,
speculation length vs the draft's block, vocabulary). A hub model that is not cached here
gives a "note" (not checked), never a download.

Callers: `specab lint` and `specab validate` print `LintReport.lines()`; `run-ab` can print
the same at its start with `lint_spec(spec, spec_file)` and stop on `report.warnings` when
strict.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import SpecabError
from bench.experiment.history import load_experiment
from bench.experiment.launch import ResolvedArm, effective_config, resolve_arm
from bench.experiment.lint.aux_layers import block_rejection_note
from bench.experiment.lint.findings import Finding
from bench.experiment.lint.hub_cache import cached_config, hub_cache_dir, is_hub_id
from bench.experiment.lint.layer_overflow import offset_layer_keys
from bench.experiment.lint.mismatches import PairContext, check_pair
from bench.experiment.spec import Experiment


@dataclass(frozen=True)
class LintReport:
    arms: tuple[str, ...]
    findings: tuple[Finding, ...]

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "warning")

    @property
    def exit_code(self) -> int:
        """0: no findings; 1: findings (notes alone do not count)."""
        return 1 if self.warnings else 0

    def lines(self) -> list[str]:
        return [f.line() for f in self.findings]

    def summary(self) -> str:
        n, arms = len(self.warnings), len({f.arm for f in self.warnings})
        notes = len(self.findings) - n
        if n:
            head = f"{n} finding(s) in {arms} of {len(self.arms)} arm(s)"
            return head + (f"; {notes} thing(s) could not be checked" if notes else "")
        if notes:  # never a clean bill for what lint could not decide
            arms_n = len(self.arms)
            return f"{notes} thing(s) could not be checked in {arms_n} arm(s); no other findings"
        return f"no findings in {len(self.arms)} arm(s)"


def lint_file(path: str | Path, *, environ: Mapping[str, str] | None = None) -> LintReport:
    """Load an experiment file and lint every arm (SpecabError on bad input)."""
    return lint_spec(load_experiment(path), path, environ=environ)


def lint_spec(
    spec: Experiment, spec_file: str | Path, *, environ: Mapping[str, str] | None = None
) -> LintReport:
    """Lint every arm of an already loaded experiment, in file order."""
    findings: list[Finding] = []
    for a in spec.arms:
        if a.reference is not None:  # serves nothing: no config of it is read by vLLM
            continue
        arm = resolve_arm(spec, spec_file, a.name)
        own = tuple(Path(p).stem for p in a.patches)
        findings += lint_arm(arm, arm_patches=own, environ=environ)
    return LintReport(arms=tuple(a.name for a in spec.arms), findings=tuple(findings))


def _method(arm: ResolvedArm, draft: dict[str, Any] | None) -> str | None:
    """As vLLM picks it: the speculative_config's method, else a DSpark draft by its keys or
    name."""
    m = arm.speculative_config.get("method")
    if isinstance(m, str) and m:
        return m
    if draft is not None and any(k.startswith("dspark_") for k in draft):
        return "dspark"
    return "dspark" if "dspark" in str(arm.draft_model or "").lower() else None


def lint_arm(
    arm: ResolvedArm,
    *,
    arm_patches: tuple[str, ...] = (),
    environ: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Findings for one resolved arm; `arm_patches` are named in them (lint cannot see code)."""
    if not arm.speculative_config:
        return []  # no speculation, nothing to compare
    notes = block_rejection_note(arm.name, arm.speculative_config)
    if arm.draft_model is None and offset_layer_keys(_method(arm, None)) is None:
        return notes  # no draft model (n-gram, suffix): no config pair to read
    env = {**(os.environ if environ is None else environ), **arm.env}
    target = _config(arm, "target", env)
    if isinstance(target, Finding):
        return [target]
    draft: dict[str, Any] | None = None
    if arm.draft_model is not None:
        loaded = _config(arm, "draft", env)
        if isinstance(loaded, Finding):
            return [loaded]
        draft = loaded
    k = arm.speculative_config.get("num_speculative_tokens")
    ctx = PairContext(
        arm=arm.name,
        method=_method(arm, draft),
        num_speculative_tokens=k if isinstance(k, int) and not isinstance(k, bool) else None,
        arm_patches=arm_patches,
    )
    return check_pair(ctx, target, draft) + notes


def _config(arm: ResolvedArm, which: str, env: Mapping[str, str]) -> dict[str, Any] | Finding:
    """The effective config.json of the arm's target or draft (overlay applied)."""
    if which == "target":
        model, patch, field = arm.model, arm.target_config, "server.model"
        revision = arm.args.get("revision")
    else:
        model, patch, field = str(arm.draft_model), arm.draft_config, "speculative_config.model"
        revision = arm.speculative_config.get("revision")
    where = Path(model)  # resolve_arm made an existing local path absolute
    if not (where.is_absolute() and where.is_dir()):
        if not is_hub_id(model):
            raise SpecabError(
                f"model directory {model} not found",
                file=arm.spec_file or None,
                field=field,
                fix="correct the path (relative paths are relative to the experiment file)",
            )
        rev = revision if isinstance(revision, str) else None
        cached = cached_config(model, env, revision=rev)
        if cached is None:
            return Finding(
                arm.name,
                field,
                f"{model} is not in the local Hugging Face cache ({hub_cache_dir(env)}), so "
                f"its config.json was not checked",
                f"run lint where it is cached (HF_HUB_CACHE / HF_HOME), or fetch only its "
                f"config: hf download {model} config.json",
                "unchecked",
                severity="note",
            )
        where = cached.parent
    try:
        return effective_config(where, patch or {})
    except SpecabError as exc:  # name the experiment file and the arm's field too
        raise SpecabError(
            f"{exc.file}: {exc.problem}",
            file=arm.spec_file or None,
            field=f"arms({arm.name}).{which}_config" if patch else field,
            fix=exc.fix,
        ) from None
