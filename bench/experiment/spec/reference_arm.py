"""A reference arm (`[[arms]] reference = { ... }`): an arm whose boot starts no server. It
drives the drafter's own forward (the training code's, `forward = "MODULE:FUNCTION"`)
through speculative decoding offline, with the target in HF transformers, over the
experiment's probes: what the served arms would count if vLLM served the drafter as it was
trained (docs/reference-forward.md). `check_reference_arms` refuses, in one line each, what
such an arm cannot honour."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from bench.experiment.spec.experiment_file import ArmSpec, Experiment

FORWARD_RE = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"


class ReferenceForward(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    forward: str = Field(
        pattern=FORWARD_RE,
        description="The drafter's reference forward, MODULE:FUNCTION: called once per verify "
        "step with the target's layer outputs, the tokens and K, it returns the K drafted "
        "slots' logits (docs/reference-forward.md).",
    )
    path: list[str] = Field(
        default_factory=list,
        description="Directories put first on the reference's sys.path (relative to the "
        "experiment file): the checkout of the training code that defines `forward`.",
    )
    python: str | None = Field(
        None,
        description="Interpreter that runs the reference (the training framework's venv, with "
        "its own torch and transformers); default: the one running specab.",
    )
    device: Literal["cpu", "cuda"] = Field(
        "cpu", description="Where the target and the forward run."
    )
    trace_map: dict[str, str] = Field(
        default_factory=dict,
        description="For `specab trace`: trace name -> module path in the forward's module "
        "(`FUNCTION.module(drafter)`), 'config.FIELD' -> attribute path; extends or overrides "
        "the built-in map of a forward specab ships (docs/trace.md). Not part of the arm's "
        "definition: it changes what a trace hooks, not what the arm measures.",
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="The target's dtype in HF transformers; auto: its config's, as vLLM serves "
        "it (a float32 reference beside a bf16 server parts from it at every near-tie).",
    )


# An arm's own fields that set up a server, which a reference arm does not start.
_SERVER_FIELDS = ("args", "env", "patches", "python", "container", "target_config", "commit")


def _refusal(arm: ArmSpec, spec: Experiment) -> tuple[str, str] | None:
    """(field, what is wrong and the fix) for the first thing this reference arm cannot do."""
    for field in _SERVER_FIELDS:
        if getattr(arm, field):
            return field, (
                f"a reference arm starts no server, so its {field} would do nothing; remove "
                f"it (the reference's own interpreter is reference.python)"
            )
    if arm.draft_config is not None:
        return "draft_config", (
            "the reference forward loads the drafter as it was trained, not through a config "
            "overlay; remove draft_config (the served arms keep theirs)"
        )
    speculative: dict[str, Any] | Literal[False] = arm.speculative_config
    merged = {**spec.server.speculative_config, **(speculative or {})}
    if speculative is False or not isinstance(merged.get("model"), str):
        return "speculative_config", (
            "a reference forward drives a drafter checkpoint: set speculative_config.model "
            "(in [server] or the arm) to the drafter the served arms load"
        )
    k = merged.get("num_speculative_tokens")
    if not str(k).isdigit():
        return "speculative_config.num_speculative_tokens", (
            "the reference drafts K tokens a step as the served arms do: set "
            "num_speculative_tokens in [server].speculative_config"
        )
    if others := _other_k(spec, merged["model"], int(str(k))):
        return "speculative_config.num_speculative_tokens", (
            f"the reference drafts K = {k}, served arm(s) {', '.join(others)} of the same "
            "drafter another K: their acceptance would not compare; give them one K"
        )
    if rule := _other_rule(spec, merged):
        return rule
    if spec.resources.nodes > 1:
        return "resources.nodes", "a reference arm runs on one node; set [resources] nodes = 1"
    return None


def _served_of(spec: Experiment, drafter: str) -> list[tuple[str, dict[str, Any]]]:
    """(name, merged speculative config) of each served arm of this drafter."""
    out = []
    for arm in spec.arms:
        own = arm.speculative_config
        if arm.reference is not None or own is False:
            continue
        cfg = {**spec.server.speculative_config, **own}
        if cfg.get("model") == drafter:
            out.append((arm.name, cfg))
    return out


def _other_k(spec: Experiment, drafter: str, k: int) -> list[str]:
    """Served arms of the same drafter that draft another K."""
    return [n for n, cfg in _served_of(spec, drafter)
            if str(cfg.get("num_speculative_tokens")) != str(k)]  # fmt: skip


# Drafters that draft a step's K slots in one forward, each slot's distribution its own: a
# draw per slot is then exactly how vLLM samples their drafts. An autoregressive head's later
# slots depend on the drawn earlier ones, which one call of the forward per step cannot give.
_PARALLEL_DRAFTERS = ("dflash", "dspark")


def _other_rule(spec: Experiment, merged: dict[str, Any]) -> tuple[str, str] | None:
    """A served arm of this drafter that accepts by a rule the reference does not drive: the
    reference verifies with vLLM's standard rejection sampler (at temperature 0, greedy;
    above it, min(1, p/q)) and drafts as the served arms do: each slot's argmax, or above
    temperature 0 with draft_sample_method "probabilistic" (parallel drafters) a draw."""
    hot = spec.probes.temperature > 0
    drafts = merged.get("draft_sample_method", "greedy")
    if hot and drafts != "greedy" and merged.get("method") not in _PARALLEL_DRAFTERS:
        return "speculative_config.draft_sample_method", (
            f"a {merged.get('method')} head drafts slot by slot, so its sampled drafts need "
            "each earlier draw, which the reference protocol does not hand its forward; "
            'measure with draft_sample_method = "greedy" (vLLM\'s default)'
        )
    for name, cfg in _served_of(spec, merged["model"]):
        rejection = cfg.get("rejection_sample_method", "standard")
        if rejection == "synthetic" or (hot and rejection != "standard"):
            return f"arms({name}).speculative_config.rejection_sample_method", (
                f"served arm {name} accepts by the {rejection!r} rule, the reference by vLLM's "
                "standard rejection sampler: their acceptance would not compare; remove it"
            )
        if hot and cfg.get("draft_sample_method", "greedy") != drafts:
            return f"arms({name}).speculative_config.draft_sample_method", (
                f"served arm {name} drafts by another rule than the reference "
                f"({drafts!r}): their acceptance would not compare; give both one rule"
            )
    return None


def check_reference_arms(spec: Experiment) -> None:
    """ValueError (one line: the arm, the field and the fix) for a reference arm that sets
    up a server or asks what the reference cannot drive."""
    for arm in spec.arms:
        if arm.reference is None:
            continue
        refused = _refusal(arm, spec)
        if refused is not None:
            field, why = refused  # a served arm's own field comes named already
            where = field if field.startswith("arms(") else f"arms({arm.name}).{field}"
            raise ValueError(f"{where}: {why}")
