"""The comparison: each captured tensor against the reference's, step by step, in the order
the engine computes them (pure: arrays in, records out). Relative error, the norm of the
difference over the reference's norm, decides; cosine is only shown, since it misses a pure
scale error (an embedding times 50 reads cosine 1). A context row is compared only where it
is context at that step: before the block's first position and holding the request's own
token there (a rejected draft's row is rewritten by the next step)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from bench.records import TensorDiff
from bench.trace.name_maps import engine_module, forward_order

Array = NDArray[np.float64]
Pairs = dict[str, tuple[Array, Array]]  # trace name -> (engine rows, reference rows), one step
_CONTEXT = ("target.aux", "context.fc")
_WORDS = {
    "target.aux": "target aux features",
    "context.fc": "context features (fc)",
    "context_k_norm": "context K after k-norm",
    "context_k": "context K after rope",
    "block.embeds": "block embeddings",
    "input_norm": "input norm",
    "q_rope": "q after rope",
    "k_rope": "k after rope",
    "attn_out": "attention output",
    "mlp_out": "MLP output",
    "final.norm": "final norm",
    "draft.logits": "draft logits",
}


def words(name: str) -> str:
    """A trace name as a reader says it: layers.0.q_rope -> draft layer 0 q after rope."""
    parts = name.split(".")
    if parts[0] == "layers" and len(parts) > 2:
        return f"draft layer {parts[1]} {_WORDS.get('.'.join(parts[2:]), name)}"
    return _WORDS.get(name, name)


def rows(t: NDArray[np.generic]) -> Array:
    """A tensor as [rows, features]: leading axes of one dropped, the rest flattened."""
    a = np.asarray(t, dtype=np.float64)
    while a.ndim >= 3 and a.shape[0] == 1:
        a = a[0]
    return a.reshape(a.shape[0], -1) if a.ndim > 1 else a.reshape(-1, 1)


def engine_tensors(cap: Mapping[str, NDArray[np.generic]], layers: int) -> dict[str, Array]:
    """The capture's tensors under trace names (each layer's context K split out)."""
    out = {k: rows(v) for k, v in cap.items() if not k.startswith(("inputs.", "context.k_"))}
    for i in range(layers):
        for kind, key in (("context_k_norm", "context.k_norm"), ("context_k", "context.k_rope")):
            if key in cap:
                out[f"layers.{i}.{kind}"] = rows(np.asarray(cap[key])[i])
    return out


def context_rows(
    cap: Mapping[str, NDArray[np.generic]], tokens: Sequence[int]
) -> NDArray[np.bool_]:
    """Which captured context rows are context at this step (module docstring)."""
    pos = np.asarray(cap["inputs.context_positions"]).astype(np.int64)
    ids = np.asarray(cap["inputs.context_token_ids"]).astype(np.int64)
    first = int(np.asarray(cap["block.positions"])[0])
    known = np.asarray(tokens, dtype=np.int64)
    inside = pos < min(first, len(known))
    same = np.zeros_like(inside)
    same[inside] = known[pos[inside]] == ids[inside]
    return inside & same


def step_pairs(
    cap: Mapping[str, NDArray[np.generic]],
    reference: Mapping[str, NDArray[np.generic]],
    tokens: Sequence[int],
    layers: int,
) -> Pairs:
    """(engine rows, reference rows) of every trace name both sides have at one step."""
    engine = engine_tensors(cap, layers)
    keep = context_rows(cap, tokens)
    pos = np.asarray(cap["inputs.context_positions"]).astype(np.int64)[keep]
    pairs = {}
    for name, ref in reference.items():
        if name not in engine:
            continue
        a, b = engine[name], rows(ref)
        if name in _CONTEXT or name.endswith(("context_k", "context_k_norm")):
            a, b = a[keep], b[pos] if len(b) > int(pos.max(initial=-1)) else b[:0]
        pairs[name] = (a, b)
    return pairs


def _measure(a: Array, b: Array) -> tuple[float, float, float]:
    """(max |a - b|, relative error, cosine); a shape that differs departs outright."""
    if a.shape != b.shape or not a.size:
        return float("inf"), float("inf"), float("nan")
    d = a - b
    norm_a, norm_b = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    rel = float(np.linalg.norm(d)) / norm_b if norm_b > 0 else (0.0 if not d.any() else np.inf)
    cos = float((a * b).sum()) / (norm_a * norm_b) if norm_a and norm_b else float("nan")
    return float(np.abs(d).max()), rel, cos


def tensor_diffs(
    steps: Sequence[Pairs],
    layers: int,
    reference_modules: Mapping[str, str],
    threshold: float,
) -> list[TensorDiff]:
    """Every trace name any step compared, in forward order, worst over the steps."""
    out = []
    for name in forward_order(layers):
        seen = [s[name] for s in steps if name in s]
        if not seen:
            continue
        measured = [_measure(a, b) for a, b in seen]
        rel = max(m[1] for m in measured)
        cosines = [m[2] for m in measured if np.isfinite(m[2])]
        out.append(
            TensorDiff(
                name=name, engine_module=engine_module(name),
                reference_module=reference_modules.get(name, "(the forward's return)"),
                shape=list(seen[0][0].shape), steps=len(seen),
                max_abs=max(m[0] for m in measured), rel=rel,
                cosine=min(cosines) if cosines else float("nan"), agrees=rel <= threshold,
            )
        )  # fmt: skip
    return out


def first_divergence(recomputed: Sequence[TensorDiff], tensors: Sequence[TensorDiff]) -> str | None:
    """The first tensor that departs: the target's features against an independent run of
    the target first, then the drafter's tensors fed the captured features."""
    aux = [d for d in recomputed if d.name == "target.aux" and not d.agrees]
    if aux:
        return aux[0].name
    return next((d.name for d in tensors if not d.agrees), None)


def verdict(
    recomputed: Sequence[TensorDiff], tensors: Sequence[TensorDiff], first: str | None
) -> str:
    """One line: what agrees, and the first tensor that departs."""
    aux = next((d for d in recomputed if d.name == "target.aux"), None)
    said = [] if aux is None else [
        f"target aux features {'agree' if aux.agrees else 'depart'} (rel {aux.rel:.2g})"
    ]  # fmt: skip
    if first == "target.aux":
        return "; ".join(said) + ": serving hands the drafter other features than the target's"
    if first is None:
        n = len(tensors)
        return "; ".join([*said, f"every one of the drafter's {n} traced tensors agrees"])
    at = next(d for d in tensors if d.name == first)
    before = [words(d.name) for d in tensors[: tensors.index(at)]]
    agree = f", after {_listed(before)} agree" if before else ""
    return "; ".join([*said, f"{words(first)} departs (rel {at.rel:.2g}){agree}"])


def _listed(names: list[str]) -> str:
    """The last three names before a divergence ("x, y and z"; more: "n tensors up to ...")."""
    if len(names) > 3:
        return f"{len(names)} tensors up to {names[-1]}"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
