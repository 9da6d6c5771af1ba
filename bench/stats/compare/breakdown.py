"""`analyze --by category|probe_set|prompt_tokens|output_position`: the analysis repeated on
each group of probes (prompt_tokens: bins of the prompts' lengths, quartiles or the edges
given after a colon, `prompt_tokens:128,256`; output_position: windows along the output, the
verify steps that start in each, from `inputs.output_windows`).

Each group gets the same boot-level statistics as the whole run, on that group's probes only:
a boot's acceptance and tokens/s are its ratios of sums over the group's probes; arms are
compared through boot-to-boot variation with the same families (Holm within the group's
primary family, and within each secondary metric's). Each arm and metric's p-values are also
Holm-adjusted across the groups (`across_groups`): a group that differs there differs after
the groups' own multiplicity.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise
from typing import TypeVar

import numpy as np

from bench.errors import SpecabError
from bench.records import METRIC
from bench.stats.compare.comparisons import build_comparison, explain
from bench.stats.compare.families import estimates, family_rows
from bench.stats.compare.primary import Primary
from bench.stats.compare.resampling import Extras
from bench.stats.describe import arm_metrics
from bench.stats.inputs import ArmData, Dataset, Prior, VerdictSettings
from bench.stats.methods import holm
from bench.stats.schema import AcrossGroups, Breakdown, Group, GroupArm

NONE = "(none)"
NOTE = (
    "groups are secondary: each is analyzed like the whole run on its own probes (a boot's "
    "ratios of sums over them); a group's verdicts use Holm within the group, and "
    "across_groups adjusts each arm and metric's p across the groups (Holm): a difference "
    "only the within-group verdict shows may be one of the groups' chance differences"
)
WINDOWS = "output_position"


def check_by(by: str | None) -> None:
    """A grouping `--by` knows, in one SpecabError line otherwise."""
    if by is not None and edges(by):
        given = [float(x) for x in by.partition(":")[2].split(",") if x.strip()]
        if any(b <= a for a, b in pairwise(given)):
            raise SpecabError(
                f"{by!r}: its bin edges {given} do not increase", field="by",
                fix=f"list them in increasing order, each once: {by.partition(':')[0]}:"
                + ",".join(f"{x:g}" for x in sorted(set(given))),
            )  # fmt: skip
    if by is None or by in ("category", "probe_set") or edges(by) is not None:
        return
    raise SpecabError(
        f"{by!r}", field="by", fix="group by category, probe_set, prompt_tokens[:E1,E2] or "
        "output_position[:E1,E2] (bin edges in tokens)",
    )  # fmt: skip


def windowed(by: str | None) -> bool:
    """Whether `by` groups along the output (a probe frame cut into windows)."""
    return by is not None and by.partition(":")[0] == WINDOWS


def edges(by: str) -> list[float] | None:
    """The bin edges of prompt_tokens|output_position[:E1,E2,...] ([] for quartiles), None
    for any other grouping."""
    name, colon, text = by.partition(":")
    if name not in ("prompt_tokens", WINDOWS):
        return None
    if not colon:
        return []
    try:
        edges = sorted({float(x) for x in text.split(",") if x.strip()})
    except ValueError:
        return None
    return edges or None


def labels(ds: Dataset, by: str) -> list[str]:
    """Each compared prompt's group."""
    if by == "category":
        return [NONE if c is None else c for c in ds.categories]
    if by == "probe_set":
        return [k.split("/", 1)[0] for k in ds.keys]
    if windowed(by):  # the windows' names are the cut rows' categories
        return [NONE if c is None else c for c in ds.categories]
    return length_bins(np.asarray(ds.prompt_tokens, dtype=np.float64), edges(by) or [])


def length_bins(tokens: np.ndarray, edges: list[float]) -> list[str]:
    """Each prompt's length bin, named by the lengths it holds ("2: 96–180 tokens"); by
    quartiles of the known lengths when no edges are given."""
    known = tokens[np.isfinite(tokens)]
    if not known.size:
        return [NONE] * tokens.size
    cuts = edges or sorted(set(np.quantile(known, [0.25, 0.5, 0.75]).tolist()))
    index = np.searchsorted(np.asarray(cuts), tokens, side="right")
    names: dict[int, str] = {}
    for i in np.unique(index[np.isfinite(tokens)]):
        held = tokens[(index == i) & np.isfinite(tokens)]
        names[int(i)] = f"{int(i) + 1}: {held.min():.0f}–{held.max():.0f} tokens"
    return [names[int(i)] if np.isfinite(t) else NONE for i, t in zip(index, tokens, strict=True)]


def breakdown(
    ds: Dataset,
    data: Mapping[str, ArmData],
    arms: list[str],
    s: VerdictSettings,
    by: str,
    power: float,
    windows: Dataset | None = None,
) -> Breakdown:
    """Per group of `ds`'s prompts, on the boots in `data` (the comparisons' boots: a
    sequential design's look). Along the output the groups are `windows`' (the probe rows
    cut by `inputs.output_windows`), on the same boots, acceptance only."""
    cut = windowed(by)
    if cut:
        assert windows is not None, "output_position needs the windowed dataset"
        arms = [a for a in arms if a in windows.arms]
        data = {a: _same_boots(windows.arms[a], data[a]) for a in arms}
        ds = windows
    lab = np.asarray(labels(ds, by), dtype=object)
    others = [a for a in arms if a != s.baseline] if s.baseline in arms else []
    groups = []
    for g in sorted(set(lab.tolist()), key=_in_order):
        idx = np.flatnonzero(lab == g)
        part = {a: data[a].columns(idx) for a in arms}
        est = {a: _shown(e, cut) for a, e in estimates(part, Prior()).items()}
        rows = family_rows(est, others, s, s.alpha, s.alpha)
        prim = Primary(part, est, others, rows, s.alpha, False)
        comps = [build_comparison(prim, r, s, power, Extras()) for r in rows]
        groups.append(
            Group(
                group=str(g),
                probes=idx.size,
                arms=[
                    GroupArm(
                        arm=a,
                        boots=ad.n_boots,
                        metrics=_shown(arm_metrics(ad, s.alpha, Prior()), cut),
                    )
                    for a, ad in part.items()
                ],
                comparisons=[c.model_copy(update={"why": explain(c, prim)}) for c in comps],
            )
        )
    return Breakdown.model_validate(
        {"by": by, "groups": groups, "note": NOTE, "across_groups": across_groups(groups, s.alpha)}
    )


def _same_boots(cut: ArmData, used: ArmData) -> ArmData:
    """The windows' data of an arm on the boots its comparisons used (a look's first n)."""
    at = {b: i for i, b in enumerate(cut.boot_ids)}
    return cut.subset([at[b] for b in used.boot_ids if b in at])


T = TypeVar("T")


def _shown(metrics: dict[str, T], cut: bool) -> dict[str, T]:
    """Along the output only acceptance: a window has no timing of its own."""
    return {m: v for m, v in metrics.items() if not cut or METRIC[m].acceptance}


def _in_order(name: str) -> tuple[int, str]:
    """Bins ("2: 96–180 tokens") by their number, other groups by name."""
    head = name.split(":", 1)[0]
    return (int(head), name) if head.isdigit() else (0, name)


def across_groups(groups: list[Group], alpha: float) -> list[AcrossGroups]:
    """Per arm and metric, each group's raw p Holm-adjusted across the groups."""
    keys = dict.fromkeys((c.arm, c.metric) for g in groups for c in g.comparisons)
    out = []
    for arm, metric in keys:
        found = [
            (g.group, c.p_value)
            for g in groups
            for c in g.comparisons
            if c.arm == arm and c.metric == metric
        ]
        p = np.array([np.nan if v is None else v for _, v in found], dtype=np.float64)
        adjusted = holm(p)
        out.append(
            AcrossGroups(
                arm=arm,
                metric=metric,
                groups=[g for g, _ in found],
                p_values=[None if np.isnan(v) else float(v) for v in p],
                p_holm=[None if np.isnan(v) else float(v) for v in adjusted],
                differ=[g for (g, _), v in zip(found, adjusted, strict=True) if v < alpha],
            )
        )
    return out
