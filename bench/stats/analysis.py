"""The statistics engine: `analyze` returns the typed `analyze --json` object (`Analysis`).

Pure functions of the loaded frames (no I/O, no printing). Method: docs/statistics.md. The boot
is the unit of replication; ratio of sums within boot; Welch intervals on jackknife
(leverage-robust) boot SEs; Holm across the primary family (each arm vs baseline x the
experiment's `primary_metrics`, default {pos0, mean length}); every other metric (output
tokens/s by default: Welch on log boot values, reported as a ratio) is secondary, its own
Holm family; each verdict rests on the Holm-compatible interval it quotes (`verdict_ci`).
With sequential looks the family is the one the design decided at the look reached, and
everything else (secondary families, speedups, `--by` groups) uses the same boots.
Additive keys beyond the contract are described on the models (`bench.stats.schema.arm_result`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from bench.errors import SpecabError
from bench.records import ALL_METRICS, SPEED_METRIC, Results, replication_advice
from bench.stats.bisect import bisection
from bench.stats.compare import (
    breakdown,
    check_by,
    comparisons,
    edges,
    group_share,
    host_summary,
    order_notes,
    parity_at,
    position_comparisons,
    prepare,
    primary,
    speed_notes,
    speedups,
    windowed,
)
from bench.stats.describe import (
    arm_result,
    boot_metrics,
    components,
    draft_length_notes,
    drift,
    low_drafting_boots,
    modes_note,
    shared_machine,
    sharing_note,
    speed_of_every_boot,
    two_modes,
)
from bench.stats.inputs import (
    PROBE_COLUMNS,
    STEP_COLUMNS,
    AnalysisOptions,
    Dataset,
    Prior,
    VerdictSettings,
    arm_data,
    failed_counts,
    output_windows,
)
from bench.stats.methods import CLAIMED
from bench.stats.own_references import analyze_by_reference, own_reference, reference_groups
from bench.stats.schema import (
    Analysis,
    AnalysisSettings,
    ArmResult,
    BootMetrics,
    Comparison,
    PriorInfo,
    Selection,
)
from bench.stats.screen import same_code_candidates, screening
from bench.stats.select import selection, sweep_looks

BEFF_WARN = 0.75  # warn when Kish effective boots fall below this share of the boots


def analyze(
    results: Results,
    options: AnalysisOptions = AnalysisOptions(),
    *,
    source: str | None = None,
) -> Analysis:
    """The analysis of loaded results (only status == "ok" boots count)."""
    results = _without(results, options.exclude_boots)
    probes, boots, manifest = results.probes, results.boots, results.manifest
    if manifest.sweep is not None and options.looks is None:
        # a sweep's looks are the selection's, not the A/B design's
        options = replace(options, looks=())
    check_by(options.by)
    arms, s, ds = prepare(results, options, source)
    low, said = low_drafting_boots(ds, options.min_drafting_share)
    if low:  # acceptance on the boots that drafted; speed on every boot
        every_boot = arm_data(probes, boots, arms, source, keep_undrafted=True)
        results = _without(results, tuple(b.boot_id for v in low.values() for b in v))
        if any(b.share > 0 for v in low.values() for b in v):  # share 0: out of `ds` already
            _, _, ds = prepare(results, options, source)
    windows = along_output(results, ds, options.by, source)
    failed = failed_counts(boots, arms)
    own = reference_groups(manifest, s.baseline, arms)  # each drafter's own training forward
    result = analyze_by_reference(analyze_data, ds, arms, s, own, options=options, failed=failed,
                                  experiment=manifest.experiment, windows=windows)  # fmt: skip
    if low:  # timed on every boot: acceptance (none where a boot drafted nothing) left aside
        timed = {a: replace(ad, speculative=False) for a, ad in every_boot.arms.items()}
        speed = analyze_by_reference(
            analyze_data, replace(every_boot, arms=timed), arms, s, own,
            options=replace(options, by=None), failed=failed,
        )  # fmt: skip
        ups, _ = speedups(every_boot.arms, s.alpha, s.margins[SPEED_METRIC])
        result = speed_of_every_boot(result, speed.model_copy(update={"speedups": ups}), low)
    if said:
        result = result.model_copy(update={"notes": [*result.notes, *said]})
    within = drift(probes, boots, arms, dict(s.margins), s.alpha, manifest.reference_arms())
    update: dict[str, Any] = {"drift": within} if within else {}
    notes = list(result.notes)
    temperature = manifest.spec.probes.temperature if manifest.spec is not None else None
    pairs = own_reference(own, s.baseline, arms)
    parity, said = parity_at(probes, arms, manifest.reference_arms(), temperature, pairs)
    update |= {"parity": parity} if parity else {}
    notes += said
    if options.exclude_boots:
        update["excluded_boots"] = list(options.exclude_boots)
        notes.insert(0, f"boots left out by --exclude-boot: {', '.join(options.exclude_boots)}; "
                     "every verdict rests on the others")  # fmt: skip
    if manifest.sweep is not None:
        update["selection"] = sel = selection(ds.arms, manifest, s.alpha, sweep_looks(manifest))
        notes += _chosen_apart(sel, result)
    if manifest.bisect is not None:
        update["bisection"] = bisection(results, s.alpha)
    if manifest.screen is not None:
        section, given = manifest.screen, options.margins.get(manifest.screen.metric)
        if given is not None and given != section.margin:  # re-decided at the margin given
            notes.append(
                f"screening re-decided at --margin {section.metric}={given:g} (the run "
                f"screened at {section.margin:g}, and its boots followed that)"
            )
            section = section.model_copy(update={"margin": given})
        same = same_code_candidates(manifest, s.baseline)
        update["screening"] = screening(ds.arms, arms, s.baseline, section, s.alpha, same)
    sharing = shared_machine(boots)
    if sharing is not None and (share := group_share(ds.arms, arms)) is not None:
        carried, df = share
        sharing = sharing.model_copy(update={"groups_share": carried, "groups_residual_df": df})
    if sharing is not None:
        update["shared_machine"] = sharing
        notes.append(sharing_note(sharing))
    if notes != result.notes:
        update["notes"] = notes
    return result.model_copy(update=update) if update else result


def _chosen_apart(sel: Selection | None, result: Analysis) -> list[str]:
    """A sweep never picks an arm whose boots are not one population without saying so."""
    if sel is None:
        return []
    apart = {e.arm for e in result.arms if two_modes(e)}
    chosen = [g.chosen for g in sel.groups if g.chosen in apart]
    return [
        f"the sweep chose {c}, whose boots are not one population (its 2 modes are named "
        "above): a start-up that differs between boots can decide a choice"
        for c in chosen
    ]


def _without(results: Results, boot_ids: tuple[str, ...]) -> Results:
    """The results without the named boots (each must exist: a typo is refused)."""
    if not boot_ids:
        return results
    known = set(results.boots["boot_id"])
    if unknown := [b for b in boot_ids if b not in known]:
        near = ", ".join(sorted(known)[:4])
        raise SpecabError(
            f"no boot {unknown[0]!r} in these results", field="--exclude-boot",
            fix=f"give a boot id as analyze --json lists it under arms[].per_boot (e.g. {near})",
        )  # fmt: skip
    keep_b = ~results.boots["boot_id"].isin(boot_ids)
    keep_p = ~results.probes["boot_id"].isin(boot_ids)
    return results.with_frames(
        results.boots[keep_b].reset_index(drop=True), results.probes[keep_p].reset_index(drop=True)
    )


def probe_columns(by: str | None) -> tuple[str, ...]:
    """The probe columns `analyze` reads: the ordered step counts only along the output
    (10^6 rows of them are the largest column)."""
    return (*PROBE_COLUMNS, *STEP_COLUMNS) if windowed(by) else PROBE_COLUMNS


def along_output(
    results: Results, ds: Dataset, by: str | None, source: str | None
) -> Dataset | None:
    """For `--by output_position`: the speculative arms' probe rows cut into windows along
    the output, as a dataset on the same boots (None for any other grouping)."""
    if not windowed(by):
        return None
    assert by is not None
    frame, said = output_windows(results.probes, edges(by) or [], source)
    spec = [a for a, ad in ds.arms.items() if ad.speculative]
    cut = arm_data(frame, results.boots, spec, source)
    return replace(cut, notes=[*said, *cut.notes])


def per_boot(results: Results) -> dict[str, list[BootMetrics]]:
    """Each arm's per-boot values exactly as `analyze` reports them in `arms[].per_boot`
    (on the prompts every ok boot has), without the estimates: what a live tracker logs as
    boots land."""
    arms, _, ds = prepare(results, AnalysisOptions())
    return {a: boot_metrics(ds.arms[a]) for a in arms}


def analyze_data(
    ds: Dataset,
    arms: list[str],
    s: VerdictSettings,
    options: AnalysisOptions,
    *,
    failed: Mapping[str, int],
    experiment: str = "",
    windows: Dataset | None = None,
) -> Analysis:
    """Everything `analyze` reports, from per-arm count arrays (`windows`: the dataset along
    the output, for `--by output_position`)."""
    prior, power, by = options.prior or Prior(), options.power, options.by
    n_resamples, seed = options.n_resamples, options.seed
    data = ds.arms
    notes = list(ds.notes) + (windows.notes if windows is not None else [])
    prim, decision = primary(data, arms, s, prior)
    arm_entries = [arm_result(data[a], s.alpha, prior, failed.get(a, 0)) for a in arms]
    notes += speed_notes(data, s)
    notes += draft_length_notes(data, arms, s.baseline)
    comps, said = comparisons(prim, s, power, n_resamples, np.random.default_rng(seed))
    repeated = bool(comps) and all(c.deterministic for c in comps if c.metric != SPEED_METRIC)
    notes += arm_notes(arm_entries, prior, repeated=repeated)
    notes += [modes_note(e.arm, m[0], e.boots) for e in arm_entries if (m := two_modes(e))]
    notes += said
    comps = [_say_prior(c, prior) for c in comps]
    faster_or_slower = [c.arm for c in comps if c.metric == SPEED_METRIC and c.verdict in CLAIMED]
    notes += order_notes(prim.data, s.baseline, faster_or_slower)
    if decision is not None:
        n = decision.looks[(decision.look or 1) - 1]
        notes.append(
            f"sequential design: comparisons use the first {n} boots per arm at the look's "
            f"nominal alpha {prim.level:.3g} ({decision.action})"
        )
    ups, said = speedups(prim.data, s.alpha, s.margins[SPEED_METRIC])
    notes += said
    hosts, said = host_summary(prim.data, s.baseline, ALL_METRICS)
    notes += said
    return Analysis(
        experiment=experiment,
        alpha=s.alpha,
        arms=arm_entries,
        comparisons=comps,
        variance_components=components(data, arms),
        baseline=s.baseline,
        margins=s.margins,
        compared_probes=ds.compared_probes,
        per_position_comparisons=position_comparisons(data, arms, s),
        sequential=decision,
        settings=AnalysisSettings(
            n_resamples=n_resamples,
            seed=seed,
            power=power,
            prior=_prior_info(prior, arm_entries),
        ),
        notes=list(dict.fromkeys(notes)),
        primary_metrics=list(s.primary),
        speedups=ups,
        breakdown=breakdown(ds, prim.data, arms, s, by, power, windows) if by else None,
        hosts=hosts,
    )


def arm_notes(arm_entries: list[ArmResult], prior: Prior, *, repeated: bool = False) -> list[str]:
    """What the arms' boots say about every interval: unreplicated or empty arms, unequal work
    per boot, too few boots (`repeated`: every acceptance comparison's boots repeated
    exactly), one speculative token."""
    notes = []
    for e in arm_entries:
        if e.boots == 1:
            notes.append(f"arm {e.arm}: 1 boot (unreplicated): no between-boot variance")
        elif e.boots == 0:
            notes.append(f"arm {e.arm}: no ok boots")
        elif e.effective_boots is not None and e.effective_boots < BEFF_WARN * e.boots:
            notes.append(
                f"arm {e.arm}: unequal work per boot: {e.effective_boots:.1f} effective boots "
                f"of {e.boots} (Kish, by drafts); its intervals use a jackknife SE and "
                f"{max(e.effective_boots - 1, 0):.1f} df, so they are wider: rerun boots with "
                "the same probes and max_tokens to recover the power"
            )
    fewest = min((e.boots for e in arm_entries if e.boots), default=0)
    if fewest and not prior.sd and (advice := replication_advice(fewest, may_repeat=repeated)):
        notes.append(advice)
    if {e.positions for e in arm_entries if e.boots and e.speculative} == {1}:
        notes.append(
            "one speculative token: mean accepted length is 1 + pos0, so the two primary "
            "comparisons are one test counted twice (Holm is conservative here)"
        )
    return notes


def _prior_info(prior: Prior, arms: list[ArmResult]) -> PriorInfo | None:
    if not prior.sd:
        return None
    return PriorInfo(
        between_boot_sd=dict(prior.sd),
        df=dict(prior.df),
        source=prior.source,
        boots=prior.boots,
        requests_per_boot=prior.requests_per_boot,
        supplied=[a.arm for a in arms if any(m.prior_sd_used for m in a.metrics.values())],
    )


def _say_prior(c: Comparison, prior: Prior) -> Comparison:
    """A verdict that rests on a prior SD says whose: the spread is not this run's."""
    if not c.method.startswith("welch_prior_sd"):
        return c
    whence = prior.source or "the option"
    boots = f", {prior.boots} boots" if prior.boots else ""
    df = prior.df.get(c.metric)
    said = (
        f"; the between-boot SD is a prior from {whence} ({f'{df:g} df' if df else 'df ?'}{boots})"
    )
    return c.model_copy(update={"why": c.why + said})
