"""`analyze --by category|probe_set|prompt_tokens`: the analysis repeated on each group of
probes (prompt_tokens: bins of the prompts' lengths, quartiles or the edges given after a
colon, `prompt_tokens:128,256`).

Each group gets the same boot-level statistics as the whole run, on that group's probes only:
a boot's acceptance and tokens/s are its ratios of sums over the group's probes; arms are
compared through boot-to-boot variation with the same families (Holm within the group's
primary family, and within each secondary metric's). Groups are secondary: nothing is
adjusted ACROSS groups, so with many categories some "differences" are expected by chance.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from bench.errors import SpecabError
from bench.stats.compare.comparisons import build_comparison, explain
from bench.stats.compare.families import estimates, family_rows
from bench.stats.compare.primary import Primary
from bench.stats.compare.resampling import Extras
from bench.stats.describe import arm_metrics
from bench.stats.inputs import ArmData, Dataset, Prior, VerdictSettings
from bench.stats.schema import Breakdown, Group, GroupArm

NONE = "(none)"
NOTE = (
    "groups are secondary: each is analyzed like the whole run on its own probes (a boot's "
    "ratios of sums over them), with Holm within the group only — nothing is adjusted across "
    "groups, so with many groups expect some chance differences; read them as where to look"
)


def check_by(by: str | None) -> None:
    """A grouping `--by` knows, in one SpecabError line otherwise."""
    if by is None or by in ("category", "probe_set") or _edges(by) is not None:
        return
    if by == "output_position":
        raise SpecabError(
            "acceptance by output position needs counts per output window; the stored counts "
            "are per request (vLLM's per-request metrics and /metrics give no per-step counts)",
            field="by",
            fix="use --by prompt_tokens (acceptance along the prompt's length), or category",
        )
    raise SpecabError(
        f"{by!r}", field="by", fix="group by category, probe_set, prompt_tokens or "
        "prompt_tokens:E1,E2 (bin edges in tokens)",
    )  # fmt: skip


def _edges(by: str) -> list[float] | None:
    """The bin edges of prompt_tokens[:E1,E2,...] ([] for quartiles), None otherwise."""
    name, colon, text = by.partition(":")
    if name != "prompt_tokens":
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
    return length_bins(np.asarray(ds.prompt_tokens, dtype=np.float64), _edges(by) or [])


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
) -> Breakdown:
    """Per group of `ds`'s prompts, on the boots in `data` (the comparisons' boots: a
    sequential design's look)."""
    lab = np.asarray(labels(ds, by), dtype=object)
    others = [a for a in arms if a != s.baseline]
    groups = []
    for g in sorted(set(lab.tolist())):
        idx = np.flatnonzero(lab == g)
        part = {a: data[a].columns(idx) for a in arms}
        est = estimates(part, Prior())
        rows = family_rows(est, others, s, s.alpha, s.alpha)
        prim = Primary(part, est, others, rows, s.alpha, False)
        comps = [build_comparison(prim, r, s, power, Extras()) for r in rows]
        groups.append(
            Group(
                group=str(g),
                probes=idx.size,
                arms=[
                    GroupArm(arm=a, boots=ad.n_boots, metrics=arm_metrics(ad, s.alpha, Prior()))
                    for a, ad in part.items()
                ],
                comparisons=[c.model_copy(update={"why": explain(c, prim)}) for c in comps],
            )
        )
    return Breakdown.model_validate({"by": by, "groups": groups, "note": NOTE})
