"""The selection for a sweep (`Analysis.selection`): per group, replay the looks on the boots
in launch order with `mcb.look`, exactly as `run-ab` took them, and describe the outcome.

The manifest's `sweep` entry (`bench.experiment.sweep_cells`) gives each arm's group
and cost; its `arms[].definition.speculative_config` is what the user pastes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bench.records import METRIC, ManifestSweep, SweepCell
from bench.stats.inputs import ArmData, boot_values
from bench.stats.methods import interval
from bench.stats.schema import SelectionConfig
from bench.stats.select.mcb import Replay, replay_looks, spend

METHOD = (
    "constrained MCB (Hsu) on boot values, Welch pairwise SEs with Bonferroni t over the "
    "K - 1 comparisons with the best; alpha spent over the looks (O'Brien-Fleming type); "
    "configurations proven more than the margin worse are eliminated at a look"
)

# The experiment file's `[sweep]` floors, one field per floored metric (by design named here:
# a selected configuration must reach them, and its row reports each floored metric).
FLOORS = {
    "mean_accepted_length": "min_mean_accepted_length",
    "acceptance_pos0": "min_acceptance_pos0",
}


def objective_by_boot(ad: ArmData, objective: str) -> np.ndarray:
    """Per planned boot index (NaN where that boot has no ok attempt), the objective on the
    selection's scale (log tokens/s). Indexed by boot, not by finish time, so a look's
    first n boots never change once they exist (retries keep their index)."""
    if METRIC[objective].acceptance and (not ad.speculative or ad.n_boots == 0):
        v = np.full(ad.n_boots, np.nan)
    else:  # the comparisons' per-boot values (inputs.boot_values), on the metric's own scale
        v = boot_values(ad, objective) + METRIC[objective].offset
    return _by_index(ad, v, np.nan)


def _by_index(ad: ArmData, per_boot: np.ndarray, missing: object) -> np.ndarray:
    """A per-boot column placed at each boot's planned index, `missing` where a boot has no
    ok attempt (retries keep their index)."""
    index = np.asarray(ad.boot_index or range(ad.n_boots), dtype=np.int64)
    out = np.full(int(index.max(initial=-1)) + 1, missing, dtype=per_boot.dtype)
    out[index] = per_boot
    return out


def _corun(ad: ArmData) -> np.ndarray:
    """Each ok boot's co-run group ("" alone or unknown), as an object array."""
    return np.array(ad.corun or [""] * ad.n_boots, dtype=object)


def _ratio(ad: ArmData, metric: str) -> float | None:
    if not ad.speculative or ad.n_boots == 0:
        return None
    num, den = ad.totals(metric)
    r = float(num.sum() / den.sum()) if den.sum() > 0 else math.nan
    return r + METRIC[metric].offset


@dataclass(frozen=True)
class GroupReplay:
    """One group's looks replayed (`mcb.replay_looks` on a batch of one)."""

    arms: list[str]  # arms with 2+ finite boot values, in the group's order
    rep: Replay
    looks: tuple[int, ...]
    fixed: bool
    values: list[np.ndarray]  # per arm, by boot index

    def index(self, arm: str) -> int | None:
        return self.arms.index(arm) if arm in self.arms else None


def replay(
    values: Mapping[str, np.ndarray],
    cost: Mapping[str, float],
    looks: Sequence[int] | None,
    alpha: float,
    margin: float,
    cheapest: bool,
    groups: Mapping[str, list[str]] | None = None,
) -> GroupReplay:
    """The planned looks on each arm's boot values (launch order); without looks, a fixed
    design: one look over every boot at level alpha. `groups`: each arm's co-run group by
    boot index ("" alone), to compare within them (duets)."""
    arms = [a for a in values if np.isfinite(values[a]).sum() >= 2 or looks]
    width = max((len(values[a]) for a in arms), default=0)
    grid = np.full((len(arms), width), np.nan)
    for i, a in enumerate(arms):
        grid[i, : len(values[a])] = values[a]
    plan = tuple(looks) if looks else (width,)
    levels = spend(plan, alpha) if looks else (alpha,)
    c = np.array([cost[a] for a in arms], dtype=np.float64)
    codes = _codes(arms, width, groups) if groups else None
    rep = replay_looks(
        grid, c, plan, levels, margin=margin, cheapest=cheapest, fixed=not looks, groups=codes
    )
    return GroupReplay(arms, rep, plan, not looks, [values[a] for a in arms])


def _codes(arms: list[str], width: int, groups: Mapping[str, list[str]]) -> np.ndarray | None:
    """(arms, width) integer codes of the co-run groups, -1 alone; None without a group
    that holds two of these arms' boots."""
    labels = sorted({g for a in arms for g in groups.get(a, []) if g})
    index = {g: i for i, g in enumerate(labels)}
    out = np.full((len(arms), width), -1, dtype=np.int64)
    for i, a in enumerate(arms):
        for b, g in enumerate(groups.get(a, [])[:width]):
            out[i, b] = index.get(g, -1)
    shared = np.bincount(out[out >= 0], minlength=len(labels)) if len(labels) else np.zeros(0)
    return out if (shared >= 2).any() else None


def dropped_arms(
    data: Mapping[str, ArmData], sweep: ManifestSweep, looks: Sequence[int], alpha: float
) -> dict[str, str]:
    """Arms run-ab launches no more boots for, with why: eliminated at a look, or in a group
    whose choice is settled (the looks replayed on the boots so far)."""
    out: dict[str, str] = {}
    for g, cells in group_replays(data, sweep, looks, alpha):
        for a, at in zip(g.arms, g.rep.eliminated_at, strict=True):
            if at:
                out[a] = f"eliminated at look {int(at)} (clearly worse than another)"
        if g.arms and bool(g.rep.stopped):
            pick = int(g.rep.chosen)
            what = f"chose {g.arms[pick]}" if pick >= 0 else "no choice"
            taken = int(g.rep.taken)
            why = (
                f"group {cells[0].group}: the last planned look ({looks[-1]} boots) was "
                f"taken: {what}"
                if taken == len(looks)
                else f"group {cells[0].group} settled at look {taken}: {what}"
            )
            for a in g.arms:
                out.setdefault(a, why)
    return out


def _groups(sweep: ManifestSweep) -> dict[str, list[SweepCell]]:
    groups: dict[str, list[SweepCell]] = {}
    for cell in sweep.cells:
        groups.setdefault(cell.group, []).append(cell)
    return groups


def _feasible(ad: ArmData, sweep: ManifestSweep) -> bool:
    for metric, floor in FLOORS.items():
        bound = getattr(sweep, floor)
        if bound is None:
            continue
        value = _ratio(ad, metric)
        exempt = value is None and not METRIC[sweep.objective].acceptance
        if not exempt and (value is None or value < bound):
            return False
    return True


def margin_scale(sweep: ManifestSweep) -> tuple[float, bool]:
    """The margin on the computation's scale and whether it is relative (log scale)."""
    down, _ = METRIC[sweep.objective].margin_scale(float(sweep.margin))
    return down, METRIC[sweep.objective].relative


def group_replays(
    data: Mapping[str, ArmData],
    sweep: ManifestSweep,
    looks: Sequence[int] | None,
    alpha: float,
) -> list[tuple[GroupReplay, list[SweepCell]]]:
    """Per selection group, the looks replayed on its feasible configurations' boots."""
    margin, _ = margin_scale(sweep)
    cheapest = sweep.tie_break == "fewest_speculative_tokens"
    out = []
    for cells in _groups(sweep).values():
        ok = [c for c in cells if c.arm in data and _feasible(data[c.arm], sweep)]
        values = {c.arm: objective_by_boot(data[c.arm], sweep.objective) for c in ok}
        rank = {c.arm: float(i) for i, c in enumerate(sorted(ok, key=lambda c: c.cost))}
        paired = None  # speed is compared within co-run groups; acceptance never is
        if METRIC[sweep.objective].paired:
            paired = {c.arm: list(_by_index(data[c.arm], _corun(data[c.arm]), "")) for c in ok}
        out.append((replay(values, rank, looks, alpha, margin, cheapest, paired), cells))
    return out


def _t_interval(v: np.ndarray, alpha: float) -> tuple[float, float] | None:
    ok = v[np.isfinite(v)]
    if ok.size < 2:
        return None
    lo, hi = interval(ok.mean(), ok.std(ddof=1) / math.sqrt(ok.size), ok.size - 1, alpha)
    return float(lo), float(hi)


def config_rows(
    g: GroupReplay,
    cells: list[SweepCell],
    data: Mapping[str, ArmData],
    sweep: ManifestSweep,
    relative: bool,
    margin: float,
    alpha: float,
) -> list[SelectionConfig]:
    rep = g.rep
    out = []
    for cell in cells:
        arm = cell.arm
        ad = data.get(arm)
        j = g.index(arm)
        gone = int(rep.eliminated_at[j]) if j is not None else 0
        live = j is not None and int(rep.taken) > 0 and not gone
        lo = float(rep.lower[j]) if live and j is not None else None
        hi = float(rep.upper[j]) if live and j is not None else None
        n = int(rep.boots[j]) if j is not None else 0
        v = objective_by_boot(ad, sweep.objective) if ad is not None else np.zeros(0)
        v = v[:n] if j is not None else v
        est = float(np.nanmean(v)) if np.isfinite(v).any() else None
        ci = _t_interval(v, alpha)
        back = (lambda x: math.exp(x)) if relative else (lambda x: x)

        def shown(x: float | None) -> float | None:
            return None if x is None else (math.expm1(x) if relative else x)

        out.append(
            SelectionConfig(
                arm=arm,
                speculative_tokens=int(cell.cost[0]),
                boots=int(np.isfinite(v).sum()),
                estimate=back(est) if est is not None else None,
                ci_low=back(ci[0]) if ci else None,
                ci_high=back(ci[1]) if ci else None,
                mcb_low=shown(lo),
                mcb_high=shown(hi),
                in_subset=bool(live and j is not None and rep.subset[j]),
                within_margin=lo is not None and lo >= -margin,
                feasible=ad is not None and _feasible(ad, sweep),
                eliminated_at_look=gone or None,
                **{m: _ratio(ad, m) if ad else None for m in FLOORS},
            )
        )
    return out
