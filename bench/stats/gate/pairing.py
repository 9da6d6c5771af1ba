"""The gate's rules beside its statistics: which new arm is gated against which reference
arm, when two arms are comparable at all, and the checks of every pair (`gate`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np

from bench.errors import SpecabError
from bench.records import ACCEPTANCE_METRICS, REGISTRY, Reference, ReferenceArm, short_name
from bench.stats.describe import mode_split
from bench.stats.gate.noninferiority import gate_check
from bench.stats.schema import GateCheck, GateResult

CAVEAT = (
    "A stored reference cannot rule out drift of everything else between the two runs "
    "(vLLM build, drivers, host, machine load): it moves the difference as much as the patch "
    "does. To compare free of it, re-run a few reference boots in the same run: an A/B with "
    "the reference configuration as the baseline (`specab run-ab`)."
)


def arm_pairs(
    new_arms: Sequence[str], ref_arms: Sequence[str], requested: Sequence[str] | None
) -> list[tuple[str, str]]:
    """(new arm, reference arm) pairs: as requested (`NEW=REFERENCE`, or `NAME` for both),
    else every new arm that has a reference arm of its name."""
    if requested:
        pairs = [tuple(x.split("=", 1)) if "=" in x else (x, x) for x in requested]
    else:
        pairs = [(a, a) for a in new_arms if a in ref_arms]
    for new, ref in pairs:
        if new not in new_arms or ref not in ref_arms:
            raise SpecabError(
                f"no arm pair {new}={ref}",
                field="--arm",
                fix=f"new arms: {', '.join(new_arms)}; reference arms: {', '.join(ref_arms)}",
            )
    if not pairs:
        raise SpecabError(
            "no arm of the new run has a reference arm of the same name",
            field="--arm",
            fix="pair them: --arm NEW=REFERENCE",
        )
    return [(str(a), str(b)) for a, b in pairs]


def check_comparable(arm: str, ref_arm: str, new: ReferenceArm, ref: ReferenceArm) -> None:
    """Only runs of the same probe sets and K can be gated against each other."""
    for key, what in (("probe_sets_sha256", "probe sets"), ("num_speculative_tokens", "K")):
        mine, theirs = getattr(new, key), getattr(ref, key)
        if mine != theirs:
            raise SpecabError(
                f"arm {arm!r} ran {what} {mine} but reference arm {ref_arm!r} ran {theirs}",
                field=key,
                fix="gate only runs of the same probe sets and num_speculative_tokens (or save "
                "a new reference)",
            )


def pair_checks(
    arm: str,
    ref_arm: str,
    new: ReferenceArm,
    ref: ReferenceArm,
    margins: Mapping[str, float],
    alpha: float,
    also: Collection[str] = (),
) -> list[GateCheck]:
    """One check per gated metric (and each metric in `also`) both arms have with >= 2
    boots: acceptance when both speculate, speed (as a ratio) always."""
    both = new.speculative and ref.speculative
    metrics = [
        (m.name, m.relative)
        for m in REGISTRY
        if (m.gated or m.name in also) and (both or not m.acceptance)
    ]
    out = []
    for metric, relative in metrics:
        a = [v for b in new.boots if (v := getattr(b, metric)) is not None]
        b = [v for x in ref.boots if (v := getattr(x, metric)) is not None]
        if len(a) < 2 or len(b) < 2:
            continue
        out.append(
            gate_check(a, b, arm=arm, reference_arm=ref_arm, metric=metric,
                       margin=margins[metric], alpha=alpha, relative=relative)
        )  # fmt: skip
    return out


def gate(
    new_arms: Mapping[str, ReferenceArm],
    reference: Reference,
    *,
    margins: Mapping[str, float],
    alpha: float,
    requested: Sequence[str] | None = None,
    source: str | None = None,
    also: Collection[str] = (),
) -> GateResult:
    """Non-inferiority of every paired arm against the reference (the module docstring of
    `noninferiority` says what it means and what it cannot rule out), on the gated metrics
    and those in `also` (the ones a caller gave a margin for)."""
    if not 0 < alpha < 0.5:
        raise SpecabError(f"{alpha!r} is out of range", field="--alpha", fix="use e.g. 0.05")
    checks: list[GateCheck] = []
    for a, r in arm_pairs(list(new_arms), list(reference.arms), requested):
        check_comparable(a, r, new_arms[a], reference.arms[r])
        checks += pair_checks(a, r, new_arms[a], reference.arms[r], margins, alpha, also)
    if not checks:
        raise SpecabError("nothing to gate: fewer than 2 boots", file=source, fix="run more boots")
    said = []
    for a, r in arm_pairs(list(new_arms), list(reference.arms), requested):
        said += _modes(f"new run's {a}", new_arms[a], alpha)
        said += _modes(f"reference's {r}", reference.arms[r], alpha)
    return GateResult(
        reference=reference.name,
        passed=all(c.verdict == "pass" for c in checks),
        alpha=alpha,
        caveat=CAVEAT,
        checks=checks,
        modes=said,
    )


def _modes(who: str, arm: ReferenceArm, alpha: float) -> list[str]:
    """A sentence per acceptance metric whose boots lie apart in two modes (`boot_modes`'s
    rule), naming the boots apart."""
    out = []
    for metric in ACCEPTANCE_METRICS if arm.speculative else ():
        pairs = [(b.boot_id, v) for b in arm.boots if (v := getattr(b, metric)) is not None]
        apart, p = mode_split(np.asarray([v for _, v in pairs]), alpha)
        if apart.any():
            names = ", ".join(i for (i, _), f in zip(pairs, apart, strict=True) if f)
            out.append(f"{who}: 2 modes across boots in {short_name(metric)} (p = {p:.2g}): "
                       f"{names} apart from the other boots; the gate used every boot")  # fmt: skip
    return out
