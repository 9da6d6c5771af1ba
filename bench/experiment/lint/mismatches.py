"""Known draft/target mismatch classes, checked on two effective config.json dicts.

Pure functions: no I/O, no weights. Each check returns `Finding`s, one per mismatch, whose
`line()` is what `specab lint` prints:
`ARM: warning: FIELD: what differs (values). Fix: the overlay or setting that would align it`.
Lint reads configs only: a code patch that compensates for a mismatch is invisible to it, so
an arm with its own patches gets the finding plus a sentence saying so (the boot-time patch
report, not lint, proves what a patch changed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.experiment.lint.aux_layers import aux_layers
from bench.experiment.lint.findings import Finding, overlay, rope_overlay, text_config, toml_value
from bench.experiment.lint.layer_overflow import layer_overflow


@dataclass(frozen=True)
class PairContext:
    """What an arm runs, beside the two configs."""

    arm: str
    method: str | None
    num_speculative_tokens: int | None
    arm_patches: tuple[str, ...] = ()  # the arm's own patches, named in its findings


def check_pair(
    ctx: PairContext, target: dict[str, Any], draft: dict[str, Any] | None
) -> list[Finding]:
    """Every check, in a fixed order. `draft` None: no separate draft model (MTP heads live in
    the target checkpoint; n-gram and suffix methods have no model at all)."""
    found: list[Finding] = []
    if draft is not None:
        found += rotary(ctx, target, draft)
    found += layer_overflow(ctx.arm, ctx.method, target, draft)
    found += aux_layers(ctx.arm, ctx.method, target, draft)
    if draft is not None:
        found += speculation_length(ctx, draft)
        found += vocabulary(ctx, target, draft)
    if ctx.arm_patches:
        names = ", ".join(ctx.arm_patches)
        note = f"; the arm also runs code patch(es) {names}, which lint cannot see (configs only)"
        found = [f.with_problem(f.problem + note) for f in found]
    return found


@dataclass(frozen=True)
class Rope:
    """The rotary settings vLLM uses, and where each was declared."""

    factor: float
    factor_at: str
    theta: float | None
    rope_type: str
    block: dict[str, Any]  # the rope_parameters (or legacy rope_scaling) table, if any
    block_key: str


def rope_of(cfg: dict[str, Any]) -> Rope:
    """transformers >= 5 (what vLLM 0.32 loads configs with) copies top-level
    partial_rotary_factor / rope_theta into rope_parameters with setdefault, and vLLM's
    get_rope reads rope_parameters: a value there wins over the top level. Per-layer-type
    rope_parameters (e.g. Gemma's) are read for full attention."""
    c = text_config(cfg)
    rp, key = c.get("rope_parameters"), "rope_parameters"
    if not isinstance(rp, dict):
        rp, key = c.get("rope_scaling"), "rope_scaling"
    rp = rp if isinstance(rp, dict) else {}
    if any(isinstance(v, dict) for v in rp.values()):
        rp = rp.get("full_attention") or next(v for v in rp.values() if isinstance(v, dict))

    def pick(name: str) -> tuple[Any, str]:
        if rp.get(name) is not None:
            return rp[name], f"in {key}"
        if c.get(name) is not None:
            return c[name], "top-level field"
        return None, "not declared, default"

    factor, factor_at = pick("partial_rotary_factor")
    theta, _ = pick("rope_theta")
    rope_type = rp.get("rope_type") or rp.get("type") or "default"
    return Rope(
        factor=float(factor) if isinstance(factor, int | float) else 1.0,
        factor_at=factor_at,
        theta=float(theta) if isinstance(theta, int | float) else None,
        rope_type=str(rope_type),
        block=rp,
        block_key=key,
    )


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def rotary(ctx: PairContext, target: dict[str, Any], draft: dict[str, Any]) -> list[Finding]:
    """Seed report 002: the draft's rotary geometry differs from the target's."""
    t, d = rope_of(target), rope_of(draft)
    out: list[Finding] = []
    if not _close(t.factor, d.factor):
        head = text_config(draft).get("head_dim")
        dims = (
            f" ({round(head * d.factor)} of {head} dims)"
            if isinstance(head, int) and not isinstance(head, bool)
            else ""
        )
        out.append(
            Finding(
                ctx.arm,
                "partial_rotary_factor",
                f"the draft rotates {d.factor!r} of each head{dims}, the target {t.factor!r} "
                f"(draft: {d.factor_at}; target: {t.factor_at})",
                f"{rope_overlay('draft', draft, 'partial_rotary_factor', t.factor)} if the draft "
                "was trained with the target's rotary (seed report 002: trained full-head, "
                "shipped declaring 0.25)",
                "rotary",
            )
        )
    if t.theta is not None and d.theta is not None and not _close(t.theta, d.theta):
        out.append(
            Finding(
                ctx.arm,
                "rope_theta",
                f"draft {d.theta!r}, target {t.theta!r}",
                f"{rope_overlay('draft', draft, 'rope_theta', t.theta)} if the draft was trained "
                "with the target's rope base",
                "rotary",
            )
        )
    if t.rope_type != d.rope_type:
        extra = {k: v for k, v in t.block.items() if k not in ("rope_theta",)}
        extra.setdefault("rope_type", t.rope_type)
        out.append(
            Finding(
                ctx.arm,
                f"{d.block_key}.rope_type",
                f"the draft's rope is {d.rope_type!r}, the target's {t.rope_type!r} "
                f"(target {t.block_key}: {toml_value(t.block) if t.block else '(none)'})",
                f"{overlay('draft', draft, {d.block_key: extra})} if the draft was trained "
                "with the target's rope scaling",
                "rotary",
            )
        )
    return out


# Drafters that propose a whole trained block per step (vLLM reads its size from the draft).
BLOCK_METHODS = ("dspark", "dflash")


def block_size(draft: dict[str, Any], method: str | None) -> tuple[int, str] | None:
    """The block the draft was trained to propose, with the key that declares it. For the
    DSpark method vLLM reads dflash_config, then eagle_config, then the top level, then
    dspark_block_size; any draft's dspark_block_size counts."""
    d = text_config(draft)
    places: list[tuple[Any, str]] = []
    if method in BLOCK_METHODS:
        for section in ("dflash_config", "eagle_config"):
            sub = d.get(section)
            if isinstance(sub, dict):
                places.append((sub.get("block_size"), f"{section}.block_size"))
        places.append((d.get("block_size"), "block_size"))
    places.append((d.get("dspark_block_size"), "dspark_block_size"))
    for value, key in places:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, key
    return None


def speculation_length(ctx: PairContext, draft: dict[str, Any]) -> list[Finding]:
    k = ctx.num_speculative_tokens
    declared = block_size(draft, ctx.method)
    if k is not None and declared is None and ctx.method in BLOCK_METHODS:
        return [
            Finding(
                ctx.arm,
                "num_speculative_tokens",
                f"cannot check {k} against the draft's block: the draft config declares no "
                "block_size (dflash_config, eagle_config, top level) nor dspark_block_size, "
                "and no default is known",
                "check the draft's training block size; declare it with a draft_config overlay",
                "speculation_length",
                severity="note",
            )
        ]
    if k is None or declared is None or k >= declared[0]:
        return []
    size, key = declared
    return [
        Finding(
            ctx.arm,
            "num_speculative_tokens",
            f"{k} is below the draft's {key} {size}: the draft was trained to propose blocks of "
            f"{size}; vLLM 0.32 accepts a smaller k but defaults to the block size",
            f"speculative_config = {{ num_speculative_tokens = {size} }} (in [server] or the arm)",
            "speculation_length",
        )
    ]


def vocabulary(ctx: PairContext, target: dict[str, Any], draft: dict[str, Any]) -> list[Finding]:
    tv, dv = text_config(target).get("vocab_size"), text_config(draft).get("vocab_size")
    if not isinstance(tv, int) or not isinstance(dv, int) or tv == dv:
        return []
    return [
        Finding(
            ctx.arm,
            "vocab_size",
            f"draft {dv}, target {tv}: draft token ids must name the target's tokens (padding "
            "rows excepted)",
            "check that both use the same tokenizer, else use a draft trained on the target's "
            "(no overlay can change an embedding size)",
            "vocabulary",
        )
    ]
