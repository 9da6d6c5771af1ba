"""How many boots an arm needs before its intervals say something: one rule, read by
`validate` before a run and by `analyze`, the report and run-ab after it.

An arm's between-boot SD rests on (boots - 1) degrees of freedom. With 1 boot there is none
(every verdict "unreplicated"); with 2 boots it rests on 1 df, where t = 12.7 at 95 %, so
intervals span most of the metric's range. Such intervals are printed, but marked "too few
boots". The rule counts boots, not the fractional df that unequal work per boot gives
(Kish's effective boots: the demo's 3 boots are 2.998 effective), so one design is labelled
alike for every metric. A prior between-boot SD from an A/A run supplies the spread and its
df, so an arm that uses one is not marked."""

from __future__ import annotations

MIN_BOOTS = 2  # fewer: no between-boot variance, every verdict "unreplicated"
MIN_USEFUL_BOOTS = 3  # fewer: intervals are printed and marked "too few boots"
FEW_BOOTS_LABEL = "too few boots"


def too_few_boots(*boots: int, prior: bool = False) -> bool:
    """An interval resting on an arm with fewer than MIN_USEFUL_BOOTS ok boots, without a
    prior SD (the arms it rests on: one for an arm's estimate, two for a comparison)."""
    return not prior and any(0 < b < MIN_USEFUL_BOOTS for b in boots)


def replication_advice(boots: int, *, may_repeat: bool = False) -> str | None:
    """What `boots` per arm can and cannot tell, in the words `validate` and `analyze` share
    (None at MIN_USEFUL_BOOTS or more). `may_repeat`: greedy decoding one request at a time,
    where boots on one CPU repeat exactly and are compared without a spread."""
    if boots >= MIN_USEFUL_BOOTS:
        return None
    if may_repeat and boots == MIN_BOOTS:
        return (
            f"{boots} boots per arm at temperature 0, one request at a time: boots that repeat "
            "exactly (one CPU) are compared as 'deterministic', the exact difference against "
            "the margin, and the second boot shows that they repeat; where they do not (a "
            f"GPU's kernels), intervals rest on 1 degree of freedom: run {MIN_USEFUL_BOOTS} or "
            "more boots per arm there"
        )
    if boots < MIN_BOOTS:
        return (
            f"{boots} boot per arm: no between-boot variance, so every verdict will be "
            "'unreplicated' (inconclusive) and `specab plan` has no spread to size from; "
            "`analyze --prior-from A_A_RUN` can supply the spread from an earlier run of the same "
            f"design (same probe sets and requests per boot). Run {MIN_USEFUL_BOOTS} or more "
            "boots per arm"
        )
    return (
        f"{boots} boots per arm: each arm's between-boot SD rests on {boots - 1} degree of "
        "freedom, so intervals span most of the metric's range (printed, marked "
        f"'{FEW_BOOTS_LABEL}') and most verdicts stay inconclusive. Run {MIN_USEFUL_BOOTS} or "
        "more boots per arm (speed questions need 6+; `specab plan` on this run sizes the next)"
    )
