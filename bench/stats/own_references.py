"""Each served arm against its own drafter's training forward. An experiment whose baseline
is a reference arm may hold reference arms of other drafters too (the demo's DFlash story
beside its EAGLE-3 control): a served arm is then compared with the reference of the drafter
it serves, not with another drafter's. The baseline's reference keeps every arm of its own
drafter and every arm no other reference drives (a no-speculation arm, another drafter
without a reference); each other reference takes the served arms of its drafter, and each
reference's comparisons are their own Holm family (one question per drafter: does vLLM
serve it as it was trained?)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from bench.records import Manifest
from bench.stats.describe import components
from bench.stats.inputs import Dataset, VerdictSettings
from bench.stats.schema import Analysis, Breakdown, Group


def _drafter(definition: dict[str, Any]) -> str | None:
    """The drafter checkpoint an arm serves or its reference drives (None: no speculation)."""
    if definition.get("speculative") is False:
        return None
    model = (definition.get("speculative_config") or {}).get("model")
    return model if isinstance(model, str) else None


def reference_groups(
    manifest: Manifest, baseline: str, arms: Sequence[str]
) -> dict[str, list[str]]:
    """Reference arm -> the served arms of `arms` it is the baseline of, for each reference
    arm but the baseline (empty when the baseline is not a reference arm). A drafter with
    several references goes to the first in manifest order; the baseline's drafter stays
    with the baseline."""
    refs = manifest.reference_arms()
    if baseline not in refs:
        return {}
    own = _drafter(manifest.definition(baseline))
    groups: dict[str, list[str]] = {}
    taken: set[str | None] = {own, None}
    for ref in refs:
        drafter = _drafter(manifest.definition(ref))
        if ref == baseline or ref not in arms or drafter in taken:
            continue
        taken.add(drafter)
        served = [a for a in arms if a not in refs and _drafter(manifest.definition(a)) == drafter]
        groups[ref] = served
    return groups


def own_reference(
    groups: dict[str, list[str]], baseline: str, arms: Sequence[str]
) -> dict[str, str]:
    """Served arm -> the one reference it is compared with, where `groups` split the arms by
    drafter ({} without groups: every served arm against every reference)."""
    if not groups:
        return {}
    inside = {a: ref for ref, served in groups.items() for a in served}
    return {a: inside.get(a, baseline) for a in arms if a not in groups and a != baseline}


def analyze_by_reference(
    analyze_data: Callable[..., Analysis],
    ds: Dataset,
    arms: list[str],
    s: VerdictSettings,
    groups: dict[str, list[str]],
    **kwargs: Any,
) -> Analysis:
    """`analyze_data` on the baseline's arms and on each other reference's group (its own
    baseline, its own Holm family), merged into one analysis in `arms`' order."""
    inside = {a for ref, served in groups.items() for a in (ref, *served)}
    main = analyze_data(ds, [a for a in arms if a not in inside], s, **kwargs)
    if not groups:
        return main
    parts = [
        analyze_data(ds, [a for a in arms if a == ref or a in served], replace(s, baseline=ref),
                     **kwargs)
        for ref, served in groups.items()
    ]  # fmt: skip
    notes = [
        f"arm{'s' if len(served) > 1 else ''} {', '.join(served)} compared with {ref}, the "
        f"reference of the drafter {'they serve' if len(served) > 1 else 'it serves'} (a Holm "
        "family of its own), not with the baseline"
        for ref, served in groups.items()
        if served
    ]
    return _merged(main, parts, ds, arms, notes)


def _merged(
    main: Analysis, parts: list[Analysis], ds: Dataset, arms: list[str], said: list[str]
) -> Analysis:
    every = [main, *parts]
    entries = {e.arm: e for a in every for e in a.arms}
    notes = [n for a in every for n in a.notes] + said
    return main.model_copy(
        update={
            "arms": [entries[a] for a in arms if a in entries],
            "comparisons": [c for a in every for c in a.comparisons],
            "per_position_comparisons": [c for a in every for c in a.per_position_comparisons],
            "speedups": [u for a in every for u in a.speedups],
            "variance_components": components(ds.arms, arms),
            "breakdown": _breakdown(main.breakdown, [p.breakdown for p in parts]),
            "notes": list(dict.fromkeys(notes)),
        }
    )


def _breakdown(main: Breakdown | None, parts: list[Breakdown | None]) -> Breakdown | None:
    """The groups' rows of every part under the main breakdown's groups, each arm once."""
    if main is None:
        return None
    extra: dict[str, list[Group]] = {}
    for part in parts:
        for g in part.groups if part is not None else []:
            extra.setdefault(g.group, []).append(g)
    groups = []
    for g in main.groups:
        more = extra.pop(g.group, [])
        seen = {a.arm for a in g.arms}
        arms = [*g.arms, *(a for x in more for a in x.arms if a.arm not in seen)]
        comps = [*g.comparisons, *(c for x in more for c in x.comparisons)]
        groups.append(g.model_copy(update={"arms": arms, "comparisons": comps}))
    across = [*main.across_groups, *(c for p in parts if p is not None for c in p.across_groups)]
    return main.model_copy(update={"groups": groups, "across_groups": across})
