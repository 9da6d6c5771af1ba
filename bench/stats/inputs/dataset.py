"""From loaded results (`bench.store` frames) to per-arm count arrays on a common prompt axis.

Arms are compared on the (probe_set, probe_id) pairs that EVERY ok boot of every arm has, so
a prompt can never be confounded with an arm; what is left out is named in a note. Boots of
one arm that ran different probe sets, or no common prompt at all, are errors (they would
compare prompts, not arms); a speculative boot that drafted nothing is left out (`undrafted`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from bench.errors import SpecabError
from bench.records import METRIC, list_lengths, list_matrix
from bench.stats.inputs.co_runs import corun_groups
from bench.stats.inputs.probe_attributes import (
    add_cells,
    boot_slots,
    categories,
    cell_sums,
    concurrency,
    drafted_cells,
    histograms,
    prompt_lengths,
    rows_where,
    served,
    speculative_arms,
    undrafted_boots,
)  # fmt: skip

F = NDArray[np.float64]
C = NDArray[np.float32]  # whole counts held exactly (hist, drafted): sum with dtype=np.float64


@dataclass(frozen=True)
class ArmData:
    """Counts of one arm's ok boots (in boot order), cells (boots, prompts). A no-speculation
    arm (`speculative` False) has zero drafts and K = 0: only its speed is analyzed."""

    name: str
    boot_ids: list[str]
    drafts: F  # (B, P)
    accepted: F  # (B, P) total accepted tokens
    per_pos: F  # (B, P, K) cumulative accepted per position
    boot_index: list[int] = field(default_factory=list)
    order: list[int] = field(default_factory=list)
    completion: F | None = None  # (B, P) completion tokens
    latency: F | None = None  # (B, P) request seconds
    hist: C | None = None  # (B, P, K + 1) per-request accepted-length histogram, if complete
    drafted: C | None = None  # (B, P, K) steps drafting >= k + 1 tokens, if every row has it
    draft_tokens: F | None = None  # (B, P) draft tokens proposed
    speculative: bool = True
    concurrency: int = 1
    hosts: list[str] = field(default_factory=list)  # per boot, the host it ran on (head node)
    corun: list[str] = field(default_factory=list)  # per boot, its co-run group ("": alone)
    slots: list[str] = field(default_factory=list)  # per boot, its node's slot ("": unknown)
    timed: bool = True  # False: a reference arm (no server: its tokens/s is not a speed)

    @property
    def n_boots(self) -> int:
        return len(self.boot_ids)

    def has(self, metric: str) -> bool:
        """Acceptance when it speculates, speed when a server was timed."""
        return self.speculative if METRIC[metric].acceptance else self.timed

    def speed(self) -> F:
        """Each boot's output tokens/s: sum completion tokens / sum latency (ratio of sums
        within the boot, over the compared probes); NaN where a boot has no latency."""
        if self.completion is None or self.latency is None:
            return np.full(self.n_boots, np.nan)
        lat = self.latency.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out: F = np.where(lat > 0, self.completion.sum(axis=1) / lat, np.nan)
        return out

    def columns(self, idx: NDArray[np.int64]) -> ArmData:
        """These prompts only (a category's or a probe set's), every boot."""

        def cut(x: Any) -> Any:  # an optional cell array (float64, or float32 counts)
            return None if x is None else x[:, idx]

        return replace(self, drafts=self.drafts[:, idx], accepted=self.accepted[:, idx],
                       per_pos=self.per_pos[:, idx], completion=cut(self.completion),
                       latency=cut(self.latency), hist=cut(self.hist), drafted=cut(self.drafted),
                       draft_tokens=cut(self.draft_tokens))  # fmt: skip

    @property
    def positions(self) -> int:
        return int(self.per_pos.shape[2])

    def cells(self, metric: str) -> tuple[F, F]:
        """(numerator, denominator) cells of a count metric of the registry (its value less
        its offset), or of pos<k>: accepted at draft position k per draft."""
        m = METRIC.get(metric)
        if m is not None and m.counts is not None:
            pos0 = self.per_pos[:, :, 0] if self.positions else np.zeros_like(self.drafts)
            return m.counts(self.drafts, self.accepted, pos0)
        if metric.startswith("pos"):
            return self.per_pos[:, :, int(metric[3:])], self.drafts
        raise ValueError(metric)

    def totals(self, metric: str) -> tuple[F, F]:
        num, den = self.cells(metric)
        return num.sum(axis=1), den.sum(axis=1)

    def subset(self, idx: list[int], name: str | None = None) -> ArmData:
        """These boots only (sequential looks take the first n; the split check halves)."""

        def cut(x: Any) -> Any:  # an optional cell array (float64, or float32 counts)
            return None if x is None else x[idx]

        return replace(
            self,
            name=self.name if name is None else name,
            boot_ids=[self.boot_ids[i] for i in idx],
            drafts=self.drafts[idx],
            accepted=self.accepted[idx],
            per_pos=self.per_pos[idx],
            boot_index=[self.boot_index[i] for i in idx] if self.boot_index else [],
            hosts=[self.hosts[i] for i in idx] if self.hosts else [],
            corun=[self.corun[i] for i in idx] if self.corun else [],
            slots=[self.slots[i] for i in idx] if self.slots else [],
            order=[self.order[i] for i in idx] if self.order else [],
            completion=cut(self.completion),
            latency=cut(self.latency),
            hist=cut(self.hist),
            drafted=cut(self.drafted),
            draft_tokens=cut(self.draft_tokens),
        )

    def head(self, n: int) -> ArmData:
        return self.subset(list(range(min(n, self.n_boots))))


@dataclass(frozen=True)
class Dataset:
    """Every arm's data on the common prompts, and what selecting them left out."""

    arms: dict[str, ArmData]
    compared_probes: int
    notes: list[str]
    keys: list[str] = field(default_factory=list)  # "probe_set/probe_id" per prompt column
    categories: list[str | None] = field(default_factory=list)  # per prompt column
    prompt_tokens: list[float] = field(default_factory=list)  # per prompt column (NaN: unknown)
    undrafted: dict[str, list[str]] = field(default_factory=dict)  # arm -> boots left out


@dataclass(frozen=True)
class _Rows:
    """The compared probe rows, decoded once for every arm: each row's prompt column and
    boot (codes into `boots`), its per-position counts as a matrix and their length."""

    pr: pd.DataFrame
    p_codes: NDArray[np.int64]
    n_p: int
    per_pos: NDArray[np.int32]
    lengths: NDArray[np.int64]
    b_codes: NDArray[np.int64]
    boots: list[str]


def _prompt_keys(pr: pd.DataFrame) -> tuple[NDArray[np.int64], NDArray[Any]]:
    """Each row's prompt as a code into the distinct "probe_set/probe_id" keys: the text is
    built once per distinct prompt, not per row (10^6 rows: ~70 MB of strings)."""
    s_codes, s_uniques = pd.factorize(pr["probe_set"].astype(str))
    i_codes, i_uniques = pd.factorize(pr["probe_id"].astype(str))
    sets, ids = [str(x) for x in s_uniques], [str(x) for x in i_uniques]
    width = max(len(ids), 1)
    codes, pairs = pd.factorize(s_codes.astype(np.int64) * width + i_codes)
    keys = [f"{sets[int(p) // width]}/{ids[int(p) % width]}" for p in pairs]
    return codes.astype(np.int64), np.array(keys, dtype=object)


def _common_keys(
    pr: pd.DataFrame,
    key: NDArray[np.int64],
    key_names: NDArray[Any],
    ok: pd.DataFrame,
    source: str | None,
) -> tuple[NDArray[np.int64], list[str]]:
    """Key codes every ok boot with probes has; errors for sets that differ within an arm."""
    # each boot's probe sets, named "a+b": distinct (boot, set) pairs first, then one join
    # per boot (a lambda per boot over its rows cost 1.5 s at 1,000 boots x 1,000 probes)
    pairs = pr[["boot_id", "probe_set"]].astype(str).drop_duplicates()
    sets = pairs.sort_values(["boot_id", "probe_set"]).groupby("boot_id")["probe_set"].agg("+".join)
    arm_of = ok.set_index("boot_id")["arm"]
    per_arm: dict[str, set[str]] = {}
    for bid, names in sets.items():
        per_arm.setdefault(str(arm_of.get(bid, "?")), set()).add(str(names))
    for arm, found in per_arm.items():
        if len(found) > 1:
            raise SpecabError(
                f"boots of arm {arm!r} ran different probe sets: " + " vs ".join(sorted(found)),
                file=source,
                field="probes.probe_set",
                fix="rerun the arm's boots on one probe set (a resumed run must keep its sets)",
            )
    n_boots = sets.size
    # boots as codes: the ids as 10^6 Python strings cost ~100 MB at campaign scale
    per_key = pd.Series(pd.factorize(pr["boot_id"])[0]).groupby(key).nunique()
    common = per_key.index.to_numpy()[per_key.to_numpy() == n_boots]
    if len(common) == 0:
        what = "; ".join(f"{a}: {'/'.join(sorted(s))}" for a, s in sorted(per_arm.items()))
        raise SpecabError(
            f"no probe is common to every boot of every arm ({what})",
            file=source,
            field="probes.probe_set",
            fix="compare arms that ran the same probe set",
        )
    notes = []
    left = pd.Index(key_names[per_key.index.to_numpy()[per_key.to_numpy() < n_boots]])
    if len(left):
        by_set = pd.Series(left.str.split("/", n=1).str[0]).value_counts().sort_index()
        listed = ", ".join(f"{n} of {s}" for s, n in by_set.items())
        notes.append(
            f"compared on the {len(common)} (probe_set, probe_id) pairs every boot has; "
            f"left out {len(left)} that only some boots ran ({listed})"
        )
    return common, notes


def arm_data(
    probes: pd.DataFrame,
    boots: pd.DataFrame,
    arms: list[str],
    source: str | None,
    keep_undrafted: bool = False,
) -> Dataset:
    """Per-arm cell arrays on the common prompts from the probes of ok boots. A boot of a
    speculative arm without drafts there measured no drafter: it is left out (`undrafted`),
    unless `keep_undrafted` (its speed counts)."""
    ok = boots[boots["status"] == "ok"] if len(boots) else boots
    ok = ok[ok["arm"].isin(arms)] if len(ok) else ok
    pr = rows_where(probes, probes["boot_id"].isin(set(ok["boot_id"]))) if len(ok) else probes[:0]
    key, names = _prompt_keys(pr)
    notes: list[str] = []
    if len(pr):
        common, notes = _common_keys(pr, key, names, ok, source)
        keep = np.isin(key, common)
        pr, key = rows_where(pr, keep), key[keep]
    spec = speculative_arms(ok, arms, source)
    gone = {} if keep_undrafted else undrafted_boots(pr, spec)
    if ids := [b for v in gone.values() for b in v]:
        ok, keep = ok[~ok["boot_id"].isin(ids)], ~pr["boot_id"].isin(ids).to_numpy()
        pr, key = rows_where(pr, keep), key[keep]
    # the compared prompts in key order, each row's column among them
    used = np.unique(key)
    p_uniques = sorted(names[used].tolist())
    column_of = np.empty(len(names), dtype=np.int64)
    column_of[used] = pd.Index(p_uniques).get_indexer(names[used])
    p_codes = column_of[key]
    # the prompts' attributes first: their transients come before the cells exist
    cats = categories(pr, p_codes, len(p_uniques))
    lengths_in = prompt_lengths(pr, p_codes, len(p_uniques))
    if len(pr):
        lengths = list_lengths(pr["accepted_per_pos"])
        per_pos = list_matrix(pr["accepted_per_pos"], dtype=np.int32)  # counts: half the memory
    else:
        per_pos, lengths = np.zeros((0, 1), dtype=np.int32), np.zeros(0, dtype=np.int64)
    b_codes, b_uniques = pd.factorize(pr["boot_id"])
    rows = _Rows(pr, p_codes, len(p_uniques), per_pos, lengths, b_codes, list(b_uniques))
    groups = corun_groups(ok)
    out = {a: _one_arm(a, ok, rows, source, spec[a], groups) for a in arms}
    keys = [str(k) for k in p_uniques]
    return Dataset(out, len(p_uniques), notes, keys, cats, lengths_in, gone)


def _one_arm(
    arm: str,
    ok: pd.DataFrame,
    r: _Rows,
    source: str | None,
    speculative: bool = True,
    groups: dict[str, str] | None = None,
) -> ArmData:
    rows = ok[ok["arm"] == arm].sort_values(["boot", "attempt"]) if len(ok) else ok
    ids = [str(x) for x in rows["boot_id"]] if len(rows) else []
    b_index = {bid: i for i, bid in enumerate(ids)}
    pr, n_p = r.pr, r.n_p
    sel = (pr["arm"] == arm).to_numpy() if len(pr) else np.zeros(0, dtype=bool)
    bi = np.array([b_index.get(b, -1) for b in r.boots], dtype=np.int64)[r.b_codes[sel]]
    pi = r.p_codes[sel]
    k = int(r.lengths[sel].max()) if sel.any() else 1
    shape = (len(ids), n_p)
    d = cell_sums(pr, sel, bi, pi, shape, "num_drafts")  # the arm's rows converted, not all
    a = cell_sums(pr, sel, bi, pi, shape, "num_accepted_tokens")
    ak = add_cells(shape, bi, pi, r.per_pos[sel][:, :k].astype(np.float64))
    order = [int(x) for x in rows["order"]] if len(rows) else []
    boot = [int(x) for x in rows["boot"]] if len(rows) else []
    return ArmData(
        arm, ids, d, a, ak, boot, order,
        completion=cell_sums(pr, sel, bi, pi, shape, "completion_tokens"),
        latency=cell_sums(pr, sel, bi, pi, shape, "latency_s"),
        hist=histograms(pr, sel, bi, pi, shape, k) if speculative else None,
        drafted=drafted_cells(pr, sel, bi, pi, shape, k) if speculative else None,
        draft_tokens=cell_sums(pr, sel, bi, pi, shape, "num_draft_tokens"),
        speculative=speculative,
        concurrency=concurrency(rows),
        hosts=[str(h) for h in rows["host"]] if len(rows) and "host" in rows.columns else [],
        corun=[(groups or {}).get(b, "") for b in ids],
        slots=boot_slots(rows),
        timed=served(rows),
    )  # fmt: skip


def failed_counts(boots: pd.DataFrame, arms: list[str]) -> dict[str, int]:
    if not len(boots):
        return dict.fromkeys(arms, 0)
    failed = boots[boots["status"] != "ok"]
    return {a: int((failed["arm"] == a).sum()) for a in arms}


def boot_values(ad: ArmData, metric: str) -> F:
    """Per boot, the value a comparison of `metric` is made on (see the module docstring)."""
    m = METRIC.get(metric)
    if m is not None and m.counts is None:  # speed: compared as a ratio, on log boot values
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(np.log(ad.speed()), dtype=np.float64)
    num, den = ad.totals(metric)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(num / den, dtype=np.float64)
