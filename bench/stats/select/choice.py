"""`selection`: the sweep's choice per group, what to paste, and a dynamic-speculation schedule
across concurrency levels (vLLM's `num_speculative_tokens_per_batch_size`)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bench.records import Manifest, ManifestSweep, Results, SweepCell
from bench.stats.inputs import AnalysisOptions, ArmData, arm_data, resolve_settings
from bench.stats.schema import Selection, SelectionConfig, SelectionGroup
from bench.stats.select.best_guess import best_guess, more_boots
from bench.stats.select.mcb import boots_to_select
from bench.stats.select.replay import (
    METHOD,
    GroupReplay,
    config_rows,
    dropped_arms,
    group_replays,
    margin_scale,
)


def _pct(x: float, relative: bool) -> str:
    return f"{x:.0%}" if relative else f"{x:g}"


def _reason(
    chosen: str | None,
    subset: list[str],
    sweep: ManifestSweep,
    level: float,
    needed: int | None = None,
) -> str:
    delta = _pct(float(sweep.margin), margin_scale(sweep)[1])
    rule = (
        "fewest speculative tokens"
        if sweep.tie_break == "fewest_speculative_tokens"
        else "best estimate"
    )
    if chosen is None:
        return (
            f"no configuration is proven within {delta} of the best yet; "
            f"{', '.join(subset) or 'none'} cannot be told from the best at one-sided level "
            f"{level:.3g}: run more boots (longer looks) or accept a larger margin"
            + (
                f" (about {needed} boots per configuration)"
                if needed and needed < 1000
                else " (more than 1000 boots per configuration at this noise)"
                if needed
                else ""
            )
        )
    if subset == [chosen]:
        return f"{chosen} is the best: every other configuration is shown worse (level {level:.3g})"
    return (
        f"{len(subset)} configuration(s) cannot be told from the best ({', '.join(subset)}); "
        f"{chosen} is proven within {delta} of the best and chosen by the tie-break ({rule})"
    )


def _empty(rep: GroupReplay, looks: Sequence[int] | None) -> str:
    if not looks or not rep.arms:
        return "no feasible configuration has 2 or more boots"
    n = looks[0]
    short = [a for a, v in zip(rep.arms, rep.values, strict=True) if np.isfinite(v[:n]).sum() < n]
    return f"look 1 ({n} boots per configuration) not reached: {', '.join(short)} lack boots"


def _paste(definition: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
    if definition.get("speculative") is False:
        return None, "(no --speculative-config: serve without speculative decoding)"
    cfg = dict(definition.get("speculative_config") or {})
    return cfg, f"--speculative-config {shlex.quote(json.dumps(cfg))}"


def _bet(
    rep: GroupReplay,
    configs: list[SelectionConfig],
    margin: float,
    relative: bool,
    sweep: ManifestSweep,
    needed: int | None,
) -> tuple[str, float, str] | None:
    """An undecided group's bet: the best estimate among the configurations still in (on the
    boots the last look used), P(it is within the margin of the true best), and the sentence."""
    live = {c.arm: c for c in configs if c.eliminated_at_look is None and c.boots >= 2}
    arms = [a for a in rep.arms if a in live]
    if len(arms) < 2:
        return None
    width = max(live[a].boots for a in arms)
    grid = np.full((len(arms), width), np.nan)
    for i, a in enumerate(arms):
        v = rep.values[rep.arms.index(a)][: live[a].boots]
        grid[i, : v.size] = v
    guess = best_guess(grid, margin)
    if int(guess.best) < 0:
        return None
    arm, p = arms[int(guess.best)], float(guess.probability)
    k = live[arm].speculative_tokens
    more = more_boots(needed, min(live[a].boots for a in arms))
    delta = _pct(float(sweep.margin), relative)
    text = (
        f"best estimate: {arm} (k = {k}), within {delta} of the best with probability "
        f"{p:.2f} (a bet on these boots, not the guarantee)"
    )
    if more:
        text += f"; about {more} more boots per configuration would prove a choice"
    return arm, p, text


def _group(
    rep: GroupReplay,
    cells: list[SweepCell],
    data: Mapping[str, ArmData],
    manifest: Manifest,
    sweep: ManifestSweep,
    looks: Sequence[int] | None,
    alpha: float,
) -> SelectionGroup:
    margin, relative = margin_scale(sweep)
    configs = config_rows(rep, cells, data, sweep, relative, margin, alpha)
    taken = int(rep.rep.taken)
    pick = int(rep.rep.chosen)
    chosen = rep.arms[pick] if taken and pick >= 0 else None
    subset = [c.arm for c in configs if c.in_subset]
    live = [c for c in configs if c.estimate is not None and c.eliminated_at_look is None]
    best = max(live, key=lambda c: c.estimate or 0.0).arm if live else None
    level = float(rep.rep.level) if taken else 0.0
    cfg, paste = _paste(manifest.definition(chosen)) if chosen else (None, None)
    levels = dict(cells[0].levels) if cells else {}
    planned = looks[-1] if looks else max((c.boots for c in configs), default=0)
    sds = [float(np.nanstd(rep.values[i], ddof=1)) for i in range(len(rep.arms))]
    sd = max((x for x in sds if np.isfinite(x)), default=float("nan"))
    needed = (
        boots_to_select(sd, margin, len(rep.arms), level) if taken and np.isfinite(sd) else None
    )
    bet = _bet(rep, configs, margin, relative, sweep, needed) if taken and not chosen else None
    reason = _reason(chosen, subset, sweep, level, needed) if taken else _empty(rep, looks)
    return SelectionGroup(
        group=cells[0].group if cells else "all",
        levels=levels,
        status="empty" if not taken else ("chosen" if chosen else "undecided"),
        chosen=chosen,
        subset=subset,
        reason=f"{reason}; {bet[2]}" if bet else reason,
        look=taken if looks and taken else None,
        level=level if taken else None,
        speculative_config=cfg,
        paste=paste,
        boots_needed=needed,
        best_estimate=bet[0] if bet else best,
        best_estimate_probability=bet[1] if bet else None,
        boots_more=more_boots(needed, min(c.boots for c in configs)) if bet else None,
        boots_used=sum(c.boots for c in configs),
        boots_fixed=planned * len(cells),
        configs=configs,
    )


def _schedule(
    groups: list[SelectionGroup],
    sweep: ManifestSweep,
    manifest: Manifest,
    notes: list[str],
) -> tuple[list[list[int]] | None, dict[str, Any] | None]:
    if list(sweep.group_by) != ["concurrency"] or len(groups) < 2:
        return None, None
    if any(g.chosen is None for g in groups):
        notes.append("schedule: not every concurrency level has a choice yet")
        return None, None
    rows = sorted((int(g.levels.get("concurrency", 0)), g) for g in groups)
    ks = [next(c.speculative_tokens for c in g.configs if c.arm == g.chosen) for _, g in rows]
    base = [g.speculative_config for _, g in rows if g.speculative_config]
    if not base:
        return None, None
    strip = [{k: v for k, v in b.items() if k != "num_speculative_tokens"} for b in base]
    if any(s != strip[0] for s in strip):
        notes.append("schedule: the chosen configurations differ beyond num_speculative_tokens")
        return None, None
    if len(set(ks)) == 1:
        notes.append(f"schedule: the same k ({ks[0]}) is chosen at every concurrency level")
        return None, None
    entries, start = [], 1
    for (c, _), k in zip(rows, ks, strict=True):
        entries.append([start, c, k])
        start = c + 1
    cfg = {
        **strip[0],
        "num_speculative_tokens": max(ks),
        "num_speculative_tokens_per_batch_size": entries,
    }
    notes.append(
        "schedule: batch sizes between two swept concurrency levels take the higher level's "
        "k; above the highest, vLLM keeps its k"
    )
    return entries, cfg


def sweep_looks(manifest: Manifest) -> tuple[int, ...] | None:
    """The planned looks of a sweep (they drive elimination, not the A/B comparisons)."""
    looks = manifest.experiment_section().looks or manifest.looks
    return tuple(int(x) for x in looks) if looks else None


def selection(
    data: Mapping[str, ArmData],
    manifest: Manifest,
    alpha: float,
    looks: Sequence[int] | None,
) -> Selection | None:
    """The sweep's selection (None without a manifest `sweep` entry)."""
    sweep = manifest.sweep
    if sweep is None or not sweep.cells:
        return None
    groups = [
        _group(rep, cells, data, manifest, sweep, looks, alpha)
        for rep, cells in group_replays(data, sweep, looks, alpha)
    ]
    notes = [
        f"guarantee: per group, with probability >= {1 - alpha:.0%} the chosen configuration "
        f"is within {_pct(float(sweep.margin), margin_scale(sweep)[1])} of the true best "
        "(boot-to-boot noise; the probes and machine as run)"
    ]
    for g in groups:
        if any(not c.feasible for c in g.configs):
            out = [c.arm for c in g.configs if not c.feasible]
            notes.append(f"{g.group}: excluded by the constraints: {', '.join(out)}")
    schedule, schedule_cfg = _schedule(groups, sweep, manifest, notes)
    used, fixed = sum(g.boots_used for g in groups), sum(g.boots_fixed for g in groups)
    early = any(c.eliminated_at_look for g in groups for c in g.configs) or any(
        g.look is not None and looks and g.look < len(looks) for g in groups
    )
    if looks and early and fixed > used:
        notes.append(
            f"elimination: {used} boots instead of {fixed} ({1 - used / fixed:.0%} saved: "
            "clearly worse configurations and settled groups got no more boots)"
        )
    return Selection(
        objective=sweep.objective,
        margin=float(sweep.margin),
        margin_scale="relative" if margin_scale(sweep)[1] else "absolute",
        alpha=alpha,
        tie_break=sweep.tie_break,
        method=METHOD,
        looks=list(looks) if looks else None,
        groups=groups,
        schedule=schedule,
        schedule_speculative_config=schedule_cfg,
        boots_used=used,
        boots_fixed_design=fixed,
        notes=notes,
    )


def selection_dropped(results: Results) -> dict[str, str]:
    """Arms of a sweep with looks that need no more boots, with why: eliminated at a look,
    or in a group whose choice is settled (run-ab launches nothing more for them). At the
    level `analyze` resolves (the manifest's, else the experiment's alpha), so the driver's
    eliminations are the ones the analysis reports."""
    manifest = results.manifest
    sweep, looks = manifest.sweep, sweep_looks(manifest)
    if sweep is None or not looks:
        return {}
    arms = results.arms()
    alpha = resolve_settings(manifest, arms, AnalysisOptions(looks=())).alpha
    data = arm_data(results.probes, results.boots, arms, None).arms
    return dropped_arms(data, sweep, looks, alpha)
