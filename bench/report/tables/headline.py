"""What the report says first: one sentence per compared arm and primary metric (verdict,
effect, interval, margin), an arm that runs the baseline's own definition named as the A/A
control it is, then what an arm's boots say beside its verdicts (two modes, boots that
drafted on few requests); and the notes said once per kind, with the arms each applies to."""

from __future__ import annotations

import re

from bench.records import METRIC, Results
from bench.report.tables.bisection_table import bisection_reason
from bench.report.tables.screening_table import screening_headlines
from bench.report.tables.verdict_tables import ab_comparisons
from bench.stats import Analysis, ArmResult, Comparison, low_drafting_note, modes_note, two_modes

_WORDS = {
    "improved": "improved beyond the ±{m} margin",
    "regressed": "regressed beyond the ±{m} margin",
    "small_improvement": "improved, by less than the ±{m} margin",
    "small_regression": "regressed, by less than the ±{m} margin",
    "equivalent": "equivalent: within the ±{m} margin",
    "inconclusive": "inconclusive: the interval holds no change and a change beyond ±{m}",
}


def _fmt(metric: str, x: float | None) -> str:
    m = METRIC[metric]
    if x is None:
        return "—"
    return f"{x:+.1%}" if m.relative else f"{x:+.{m.digits}f}"


def headline(c: Comparison, aa: bool) -> str:
    m = METRIC[c.metric]
    lo, hi = c.verdict_ci if c.verdict_ci is not None else (c.ci_low, c.ci_high)
    margin = f"{c.margin:.1%}" if m.relative else f"{c.margin:g}"
    said = _WORDS[c.verdict].format(m=margin)
    control = ""
    if aa:  # the same definition as the baseline: any claimed difference is a false one
        claimed = c.verdict not in ("inconclusive", "equivalent")
        control = f" — an A/A control (it runs {c.baseline}'s own definition)" + (
            ": a claimed difference here is a false positive" if claimed else ", as expected"
        )
    return (
        f"**{c.arm}** vs {c.baseline}, {m.short}: {_fmt(c.metric, c.difference)} "
        f"[{_fmt(c.metric, lo)}, {_fmt(c.metric, hi)}]: {said}{control}."
    )


def against_training(c: Comparison, analysis: Analysis, *, offline: bool = False) -> str:
    """A served arm against a reference arm (its drafter's training forward) in the words
    the question asks: does vLLM serve the drafter as it was trained? (`offline`: the arm is
    another reference, a second framework's forward of the same drafter.)"""
    m, est = METRIC[c.metric], {a.arm: a.metrics.get(c.metric) for a in analysis.arms}
    lo, hi = c.verdict_ci if c.verdict_ci is not None else (c.ci_low, c.ci_high)
    served, trained = (getattr(est.get(a), "estimate", None) for a in (c.arm, c.baseline))
    value = f"{m.short} {_value(c.metric, served)}"
    where = f"where its training forward ({c.baseline}) gives {_value(c.metric, trained)}"
    delta = f"{_fmt(c.metric, c.difference)} [{_fmt(c.metric, lo)}, {_fmt(c.metric, hi)}]"
    margin = f"{c.margin:.1%}" if m.relative else f"{c.margin:g}"
    who, what = (f"**{c.arm}** (offline) gives", "forwards part") if offline else (
        f"**{c.arm}** serves", "serving departs from training")  # fmt: skip
    if c.verdict in ("improved", "regressed"):
        return f"{who} {value} {where}: {what}, {delta}."
    if c.verdict == "equivalent":
        return f"{who} {value} {where}: equivalent to training within ±{margin}."
    return f"{who} {value} {where}: {delta}, {_WORDS[c.verdict].format(m=margin)}."


def _value(metric: str, x: float | None) -> str:
    return "—" if x is None else f"{x:.{METRIC[metric].digits}f}"


def headlines(results: Results, analysis: Analysis) -> list[str]:
    """One sentence per primary comparison, in the analysis' order, then one per arm whose
    boots are not one population or drafted on few requests. A history leads with the
    search's answer, and its points never booted (by design) are no A/B rows."""
    sha = {a.name: a.definition_sha256 for a in results.manifest.arms}
    base = sha.get(analysis.baseline)
    if analysis.screening is not None:  # its own rule, margin and words, not A/B verdicts
        said = screening_headlines(analysis.screening)
        return said + _arm_notes(analysis)
    history = analysis.bisection
    said = (
        [f"**{history.outcome.replace('_', ' ')}**: {bisection_reason(history)}."]
        if history
        else []
    )
    refs = results.manifest.reference_arms()
    trained = analysis.baseline in refs
    said += [
        against_training(c, analysis, offline=c.arm in refs)
        if trained
        else headline(c, base is not None and sha.get(c.arm) == base)
        for c in ab_comparisons(analysis)
        if c.family == "primary"
    ]
    return said + _arm_notes(analysis)


def _arm_notes(analysis: Analysis) -> list[str]:
    """One sentence per arm whose boots are not one population or drafted on few requests."""
    return [
        re.sub(rf"^(arm )?{re.escape(arm.arm)}:", f"**{arm.arm}**:", note) + "."
        for arm in analysis.arms
        for _, note in boots_said(arm)
    ]


def boots_said(arm: ArmResult) -> list[tuple[str, str]]:
    """What an arm's boots say beside its verdicts, as (label, sentence): its two modes and
    its boots that drafted on few requests (the end of a run prints the label, the report's
    answer bolds the arm)."""
    said = [("two modes", modes_note(arm.arm, m, arm.boots)) for m in two_modes(arm)[:1]]
    if arm.low_drafting:
        said.append(("few drafts", low_drafting_note(arm.arm, arm.low_drafting)))
    return said


def grouped_notes(notes: list[str], arms: list[str]) -> list[str]:
    """Notes that differ only in the one arm they name, said once with every arm listed."""
    names = sorted(arms, key=len, reverse=True)
    pattern = re.compile(r"\barm (" + "|".join(map(re.escape, names)) + r")\b") if names else None
    groups: dict[str, list[str]] = {}
    for note in notes:
        found = pattern.findall(note) if pattern else []
        key = pattern.sub("arm {ARM}", note) if pattern and len(found) == 1 else note
        groups.setdefault(key, []).extend(found if len(found) == 1 else [])
    out = []
    for key, who in groups.items():
        if len(who) > 1:
            out.append(key.replace("arm {ARM}", f"arms {', '.join(who)}", 1))
        else:
            out.append(key.replace("arm {ARM}", f"arm {who[0]}") if who else key)
    return out
