"""The sequential decision at the look reached (`decide`, `run-ab` with looks) and the primary
family that `analyze` reports: with looks set, both are the same computation (the look's
boots at the look's nominal level), so the comparisons table agrees with the decision."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from bench import release_freed_memory
from bench.errors import SpecabError
from bench.records import ALL_METRICS, Results
from bench.stats.compare.duets import duet_pairs
from bench.stats.compare.families import Row, estimates, family_rows
from bench.stats.compare.hosts import host_adjusted_pairs
from bench.stats.inputs import (
    AnalysisOptions,
    ArmData,
    Dataset,
    Prior,
    VerdictSettings,
    arm_data,
    resolve_settings,
)
from bench.stats.methods import (
    STATUSES,
    VERDICTS,
    Est,
    design_stops,
    look_index,
    look_status,
    obf_boundaries,
)
from bench.stats.schema import Decision, SequentialRow


def prepare(
    results: Results,
    options: AnalysisOptions,
    source: str | None = None,
) -> tuple[list[str], VerdictSettings, Dataset]:
    """Arms, resolved settings and the per-arm data on the common prompts."""
    arms = results.arms()
    settings = resolve_settings(results.manifest, arms, options, source)
    data = arm_data(results.probes, results.boots, arms, source)
    release_freed_memory()  # the per-row temporaries, before the resampling's weights
    return arms, settings, data


def decide(
    results: Results,
    options: AnalysisOptions = AnalysisOptions(),
    source: str | None = None,
) -> Decision:
    """Sequential decision at the current look (`options.looks`, else the manifest's):
    stop (decided) or continue (add boots)."""
    arms, s, ds = prepare(results, options, source)
    if not s.looks:
        raise SpecabError("no sequential looks planned", field="looks", fix="plan e.g. 3,6,10")
    _, decision = primary(ds.arms, arms, s, options.prior or Prior())
    assert decision is not None  # looks are set
    return decision


@dataclass(frozen=True)
class Primary:
    """The comparisons as analyzed: on which boots, at which level, and their families."""

    data: dict[str, ArmData]  # the boots the families used (the look's under a design)
    est: dict[str, dict[str, Est]]
    others: list[str]  # non-baseline arms
    rows: list[Row]  # the primary family first, then one family per secondary metric
    level: float  # the primary family's alpha (nominal at a look)
    sequential: bool
    before_first_look: bool = False  # a design not yet at its first look decides nothing
    paired: frozenset[tuple[str, str]] = frozenset()  # (arm, metric) compared within duets


def _adjusted(
    data: Mapping[str, ArmData], baseline: str, others: list[str], est: dict[str, dict[str, Est]]
) -> tuple[dict[tuple[str, str], tuple[Est, Est]], frozenset[tuple[str, str]]]:
    """The comparisons made within blocks: hosts where arms ran on them unequally, and speed
    within co-run groups (duets; nested in hosts, so it replaces the host adjustment)."""
    duets = duet_pairs(data, baseline, others, est)
    return {**host_adjusted_pairs(data, baseline, others, ALL_METRICS, est), **duets}, frozenset(
        duets
    )


def primary(
    data: Mapping[str, ArmData], arms: list[str], s: VerdictSettings, prior: Prior
) -> tuple[Primary, Decision | None]:
    """The families on every boot at alpha, or, with looks set, on the look's boots (the
    primary family at the look's nominal level, secondary ones at alpha) together with the
    design's decision, which rests on the primary family only."""
    others = [a for a in arms if a != s.baseline]
    if not s.looks:
        est = estimates(data, prior)
        adj, paired = _adjusted(data, s.baseline, others, est)
        rows = family_rows(est, others, s, s.alpha, s.alpha, adj)
        return Primary(dict(data), est, others, rows, s.alpha, False, paired=paired), None
    looks = s.looks
    b_now = min(data[a].n_boots for a in arms)
    idx = look_index(looks, b_now)
    _, nominal = obf_boundaries(looks, s.alpha)
    n = looks[0] if idx is None else looks[idx]
    level = nominal[0] if idx is None else nominal[idx]
    head = {a: data[a].head(n) for a in arms}
    est = estimates(head, prior)
    adj, paired = _adjusted(head, s.baseline, others, est)
    rows = family_rows(est, others, s, level, s.alpha, adj)
    prim = Primary(head, est, others, rows, level, True, idx is None, paired)
    if idx is None:
        reason = f"{b_now} boots per arm; the first planned look is at {looks[0]}"
        return prim, Decision(
            action="continue",
            reason=reason,
            boots_per_arm=b_now,
            look=None,
            looks=looks,
            next_look=looks[0],
            nominal_alpha=None,
        )
    first = [r for r in rows if r.primary]
    status = look_status(first[0].fam) if first else np.zeros(0, dtype=np.int64)
    stop = bool(design_stops(status, idx == len(looks) - 1))
    table = [
        SequentialRow(
            arm=r.arm,
            metric=r.metric,
            difference=r.fam.diff[r.i],
            p_adjusted=r.fam.p_adj[r.i],
            status=STATUSES[int(status[r.i])],
            verdict=VERDICTS[int(r.fam.code[r.i])],
        )
        for r in first
    ]
    where = f"look {idx + 1} of {len(looks)} ({n} boots/arm, nominal alpha {level:.3g})"
    undecided = [r for r in table if r.status == "undecided"]
    if not undecided:
        action, reason, nxt = "stop", f"every comparison decided at {where}", None
    elif stop:
        action, reason, nxt = "stop", f"final {where}: verdicts stand as analyzed", None
    else:
        names = ", ".join(f"{r.arm}/{r.metric}" for r in undecided)
        action, reason, nxt = "continue", f"{names} undecided at {where}", looks[idx + 1]
    return prim, Decision(
        action=action,
        reason=reason,
        boots_per_arm=b_now,
        look=idx + 1,
        looks=looks,
        next_look=nxt,
        nominal_alpha=level,
        comparisons=table,
    )
