"""A results directory as a history: the arms in the manifest's order are the points, each
ok boot one value of the searched metric (the comparisons' per-boot value: a ratio of sums,
or log tokens/s), in boot order. The search's next step from them (`history_step`: what the
run-ab driver boots next) and the `bisection` of `analyze --json`."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from bench.records import METRIC, ManifestBisect, Results
from bench.stats.bisect.changepoint import between_levels
from bench.stats.bisect.search import Confirmation, Step, replay
from bench.stats.bisect.search_settings import BisectSettings
from bench.stats.inputs import arm_data, boot_values
from bench.stats.methods import interval
from bench.stats.schema import BisectConfirmation, Bisection, BisectPoint

F = np.ndarray


def settings_of(
    section: ManifestBisect, n_points: int, alpha: float, slots: int = 1
) -> BisectSettings:
    """The search's settings from the manifest's [bisect]."""
    return BisectSettings(
        n_points=n_points,
        alpha=alpha,
        endpoint_looks=tuple(section.endpoint_looks),
        cap=section.boots_per_point,
        slots=slots,
        max_boots=n_points * max(section.boots_per_point, *section.endpoint_looks),
        margin=None
        if section.margin is None
        else METRIC[section.metric].margin_scale(section.margin),
    )


def history_values(results: Results, metric: str) -> tuple[list[str], list[F]]:
    """The points (arms, in order) and each one's ok boots' values, boot order."""
    arms = results.arms()
    if results.ok_boots().empty:
        return arms, [np.zeros(0) for _ in arms]
    data = arm_data(results.probes, results.boots, arms, None).arms
    out = []
    for a in arms:
        v = boot_values(data[a], metric) if data[a].n_boots else np.zeros(0)
        out.append(np.asarray(v, dtype=np.float64)[np.isfinite(v)])
    return arms, out


# The most points a driver boots at once in a search (its slots); a history read back
# without its slots is replayed at each and read where its replay uses the most boots.
MOST_SLOTS = 8


def history_step(
    results: Results,
    alpha: float,
    slots: int | None = None,
    unavailable: frozenset[int] = frozenset(),
) -> tuple[list[str], list[F], Step]:
    """The search's next step on the boots so far (the manifest's [bisect]), with the points
    and their values it rests on. `slots`: the points the driver boots a round; None (a
    results directory read back) replays the rounds at each slot count and keeps the one that
    reaches the most boots on disk, the rounds the driver ran (the smallest, on a tie)."""
    section = results.manifest.bisect
    assert section is not None, "a history needs its [bisect] section"
    arms, values = history_values(results, section.metric)
    same = [i for i, a in enumerate(arms) if (section.commits.get(a) or {}).get("same_as")]
    cannot = unavailable | unbootable(results, arms) | _spent(results, arms, section.most_boots)
    tried = [slots] if slots is not None else range(1, MOST_SLOTS + 1)
    steps = [replay(values, settings_of(section, len(arms), alpha, k), cannot, same) for k in tried]
    return arms, values, max(steps, key=lambda st: st.used)


def unbootable(results: Results, arms: list[str]) -> frozenset[int]:
    """Inner points passed over as `git bisect skip` does: their attempts failed (a build
    that fails, a point that fails the same way twice) and none booted ok."""
    boots = results.boots
    failed = set(boots.loc[boots["status"] != "ok", "arm"]) - set(results.ok_boots()["arm"])
    return frozenset(i for i, a in enumerate(arms) if a in failed and 0 < i < len(arms) - 1)


def _spent(results: Results, arms: list[str], planned: int) -> frozenset[int]:
    """Points whose planned boots were all launched (failed attempts use one up too): the
    driver has none left to give them, so the search is replayed without them."""
    boots = results.boots
    launched = {str(a): int(n) for a, n in boots.groupby("arm")["boot"].nunique().items()}
    return frozenset(i for i, a in enumerate(arms) if launched.get(a, 0) >= planned)


def bisection(results: Results, alpha: float) -> Bisection:
    """Where the metric changed along the history, with the evidence of every point."""
    section = results.manifest.bisect
    assert section is not None
    arms, values, step = history_step(results, alpha)
    skipped = unbootable(results, arms)
    metric = METRIC[section.metric]
    show = (lambda x: math.expm1(x)) if metric.relative else (lambda x: x + metric.offset)
    post = step.posterior
    cdf = np.cumsum(post) if post is not None else None
    points = []
    for i, (arm, v) in enumerate(zip(arms, values, strict=True)):
        est = lo = hi = None
        if v.size:
            est = show(float(v.mean()))
        if v.size >= 2:
            se = float(v.std(ddof=1)) / math.sqrt(v.size)
            lo, hi = (show(float(x)) for x in interval(float(v.mean()), se, v.size - 1, alpha))
        changed = float(cdf[i - 1]) if cdf is not None and 0 < i < len(arms) - 1 else None
        culprit = float(post[i - 1]) if post is not None and i > 0 else None
        points.append(
            BisectPoint(
                arm=arm, index=i, boots=int(v.size), estimate=est, ci_low=lo, ci_high=hi,
                p_changed=changed, p_culprit=culprit,
                decision="skipped" if i in skipped
                else _decision(i, len(arms), int(v.size), changed, alpha),
                same_as=(section.commits.get(arm) or {}).get("same_as"),
                subject=(section.commits.get(arm) or {}).get("subject"),
            )
        )  # fmt: skip
    answer = _answer(section.metric, arms, step, points, alpha)
    if step.outcome in ("culprit", "range"):
        answer = _second_change(answer, values, alpha, step.posterior)
    if answer.culprit is not None and answer.culprit in section.commits:
        return answer.model_copy(update={"culprit_commit": section.commits[answer.culprit]})
    return answer


def _second_change(
    answer: Bisection, values: list[F], alpha: float, posterior: F | None
) -> Bisection:
    """Points between the two levels: decided "neither", left for a search on each side."""
    pts = np.concatenate([np.full(v.size, i, dtype=np.int64) for i, v in enumerate(values)])
    flagged = between_levels(pts, np.concatenate(values), len(values), alpha, posterior)
    if not flagged:
        return answer
    points = [
        p.model_copy(update={"decision": "neither"}) if p.index in flagged else p
        for p in answer.points
    ]
    return answer.model_copy(update={"points": points})


def _decision(i: int, n: int, boots: int, changed: float | None, alpha: float) -> str:
    """The point's decision (a point running its neighbour's code says so: `same_as`)."""
    if i == 0:
        return "good end"
    if i == n - 1:
        return "bad end"
    if not boots or changed is None:
        return "no boots"
    return "like bad" if changed >= 1 - alpha else "like good" if changed <= alpha else "undecided"


def _answer(
    metric: str, arms: list[str], step: Step, points: list[BisectPoint], alpha: float
) -> Bisection:  # fmt: skip
    rel = METRIC[metric].relative
    as_diff: Callable[[float], float] = math.expm1 if rel else (lambda x: x)
    diff = lo = hi = None
    if step.endpoints is not None:
        d, lo_, hi_, _ = step.endpoints
        diff, lo, hi = as_diff(d), as_diff(lo_), as_diff(hi_)
    outcome = "searching" if step.outcome == "boot" else step.outcome
    culprit = arms[step.first] if step.outcome == "culprit" and step.first is not None else None
    first = arms[step.first] if step.first is not None else None
    last = arms[step.last] if step.last is not None else None
    conf = _confirmation(step.confirmation, arms, as_diff)
    smallest = as_diff(step.smallest_change) if step.smallest_change is not None else None
    return Bisection(
        metric=metric,
        outcome=outcome,
        culprit=culprit,
        last_good=conf.point if culprit is not None and conf is not None else None,
        range_first=first,
        range_last=last,
        alpha=alpha,
        difference=diff,
        difference_ci_low=lo,
        difference_ci_high=hi,
        boots=sum(p.boots for p in points),
        why=step.why,
        blocked_point=arms[step.blocked] if step.blocked is not None else None,
        points=points,
        confirmation=conf,
        boots_to_pin=step.boots_to_pin if outcome == "range" else None,
        smallest_change=smallest,
    )


def _confirmation(
    c: Confirmation | None, arms: list[str], as_diff: Callable[[float], float]
) -> BisectConfirmation | None:
    if c is None:
        return None
    t = c.test
    return BisectConfirmation(
        point=arms[c.partner], culprit=arms[c.culprit], attempt=c.attempt + 1, level=c.level,
        boots_each=t.boots, named=t.outcome == "named",
        difference=as_diff(t.difference) if t.difference is not None else None,
        bound=as_diff(t.ci_low) if t.ci_low is not None else None,
    )  # fmt: skip
