"""Self-distillation of the demo's DFlash drafter and EAGLE-3 head against the trained
target (`--train`).

Data: prompts cut from the corpus (the target's own training text), continued greedily by
the target: at T = 0 vLLM accepts a drafted token exactly when it is the target's greedy
next token, so every label is one. Loss per block position k (1..K): cross-entropy on the
target's token plus KL to the target's distribution there (what T > 0 acceptance needs),
weighted towards early positions (a later one counts only when all before it are accepted).
Deterministic like the demo recipe: fixed seeds, step counts and thread count; float32
throughout (CPU bf16 autocast measured 10x slower at these sizes).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from bench.demo.dflash import DFlashDraft, block_inputs
from bench.demo.eagle3 import Eagle3Head
from bench.demo.tiny_models import SEED

if TYPE_CHECKING:
    from transformers import Qwen3ForCausalLM

THREADS = 2  # fixed (reductions depend on it)
K = 4  # the block the drafter is trained for (num_speculative_tokens of the demo)
PROMPT_LENS = (8, 24, 48, 96)  # the probes' prompts are 8 to ~150 tokens
GEN = 80  # probes generate 64 tokens
GEN_BATCH = 64
SEQS_PER_LEN = 256
TRAIN_STEPS = 600
BATCH = 16
ANCHORS = 12  # blocks per sequence and step
LR = 2e-3
WARMUP = 40
POS_WEIGHTS = (1.0, 0.7, 0.5, 0.35)
KL_WEIGHT = 0.5
VAL_SEQS = 32  # per prompt length, held out


@dataclass
class DistillRecord:
    """What a drafter's recipe measured; saved beside its checkpoint as train_record.json."""

    losses: list[float] = field(default_factory=list)
    val_accept: list[float] = field(default_factory=list)  # teacher-forced, per position
    seconds: dict[str, float] = field(default_factory=dict)


def aux_states(target: Qwen3ForCausalLM, ids: torch.Tensor, layers: list[int]) -> Any:
    """The target's logits and its residual stream after each HF layer in `layers` (vLLM's
    aux hidden state ids are these + 1), concatenated in layer order."""
    grabbed: dict[int, torch.Tensor] = {}
    hooks = [
        target.model.layers[i].register_forward_hook(
            lambda _m, _a, out, i=i: grabbed.__setitem__(
                i, out[0] if isinstance(out, tuple) else out
            )
        )
        for i in layers
    ]
    try:
        logits = target(input_ids=ids).logits
    finally:
        for hook in hooks:
            hook.remove()
    return logits, torch.cat([grabbed[i] for i in layers], dim=-1)


def greedy_data(target: Qwen3ForCausalLM, corpus: torch.Tensor) -> dict[int, torch.Tensor]:
    """Per prompt length: SEQS_PER_LEN corpus prompts + GEN greedy target tokens each."""
    gen = torch.Generator().manual_seed(SEED + 11)
    data: dict[int, torch.Tensor] = {}
    for plen in PROMPT_LENS:
        starts = torch.randint(0, len(corpus) - plen, (SEQS_PER_LEN,), generator=gen)
        seqs = torch.stack([corpus[s : s + plen] for s in starts.tolist()])
        out = []
        for chunk in seqs.split(GEN_BATCH):
            out.append(_greedy(target, chunk))
        data[plen] = torch.cat(out)
        print(f"dflash data: {len(data[plen])} x ({plen} + {GEN})", file=sys.stderr, flush=True)
    return data


@torch.no_grad()
def _greedy(target: Qwen3ForCausalLM, prompt: torch.Tensor) -> torch.Tensor:
    ids = prompt
    out = target(input_ids=ids, use_cache=True)
    past = out.past_key_values
    for _ in range(GEN):
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat((ids, nxt), dim=1)
        out = target(input_ids=nxt, past_key_values=past, use_cache=True)
        past = out.past_key_values
    return ids


def _distill_loss(
    student_logits: torch.Tensor, logits: torch.Tensor, ids: torch.Tensor, lab_pos: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted CE + KL of student logits [B, A, K, V] for the tokens at lab_pos [B, A, K]
    (the target's at lab_pos - 1 is the teacher) and the top-1 hits [B, A, K]."""
    b, a, k = lab_pos.shape
    student = F.log_softmax(student_logits.float(), dim=-1)
    labels = ids.gather(1, lab_pos.view(b, -1)).view(b, a, k)
    teacher = F.log_softmax(
        logits.gather(1, (lab_pos - 1).view(b, -1, 1).expand(-1, -1, logits.shape[-1])).float(),
        dim=-1,
    ).view(b, a, k, -1)
    ce = F.nll_loss(student.flatten(0, 2), labels.flatten(), reduction="none").view(b, a, k)
    kl = (teacher.exp() * (teacher - student)).sum(-1)
    w = torch.tensor(POS_WEIGHTS[:k])
    loss = (((1 - KL_WEIGHT) * ce + KL_WEIGHT * kl) * w).sum(-1).mean() / w.sum()
    return loss, student.argmax(-1) == labels


def dflash_loss(
    draft: DFlashDraft, target: Qwen3ForCausalLM, ids: torch.Tensor, anchors: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Blocks at `anchors` [B, A] (the bonus token's position n): slots n+1 .. n+K."""
    b, a = anchors.shape
    with torch.no_grad():
        logits, aux = aux_states(target, ids, draft.aux_layers)
    pos, mask = block_inputs(anchors, K, ids.shape[1])
    slot = torch.arange(K + 1).repeat(a)
    tokens = torch.where(slot == 0, ids.gather(1, pos.clamp(max=ids.shape[1] - 1)), draft.mask_id)
    embed = target.get_input_embeddings()
    hidden = draft(aux, embed(tokens).detach(), pos, mask).view(b, a, K + 1, -1)[:, :, 1:]
    lab_pos = anchors[..., None] + torch.arange(1, K + 1)  # tokens n+1 .. n+K
    return _distill_loss(target.lm_head(hidden), logits, ids, lab_pos)


def eagle3_loss(
    head: Eagle3Head, target: Qwen3ForCausalLM, ids: torch.Tensor, anchors: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """K steps from `anchors` [B, A] (here the last context position, n - 1): x_{n+1}.."""
    with torch.no_grad():
        logits, aux = aux_states(target, ids, head.aux_layers)
    prenorm = head.unroll(aux, target.get_input_embeddings(), ids, anchors, K)
    lab_pos = anchors[..., None] + torch.arange(2, K + 2)
    return _distill_loss(head.logits(prenorm), logits, ids, lab_pos)


def _anchors(plen: int, total: int, gen: torch.Generator, n: int) -> torch.Tensor:
    """Block anchors n in [plen, total - 1 - K]: the bonus token is a generated one."""
    return torch.stack(
        [torch.randperm(total - K - plen, generator=gen)[:ANCHORS] + plen for _ in range(n)]
    )


def _lr(step: int, steps: int) -> float:
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    progress = (step - WARMUP) / max(1, steps - WARMUP)
    return LR * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


LossFn = Callable[[Any, "Qwen3ForCausalLM", torch.Tensor, torch.Tensor], tuple[Any, Any]]


def _loss_of(model: nn.Module) -> LossFn:
    return dflash_loss if isinstance(model, DFlashDraft) else eagle3_loss


def _anchors_for(model: nn.Module, plen: int, ids: torch.Tensor, gen: torch.Generator) -> Any:
    """DFlash's anchor is the bonus token's position n, EAGLE-3's the one before (n - 1)."""
    anchors = _anchors(plen, ids.shape[1], gen, len(ids))
    return anchors if isinstance(model, DFlashDraft) else anchors - 1


def distill(
    model: nn.Module,
    target: Qwen3ForCausalLM,
    data: dict[int, torch.Tensor],
    *,
    label: str,
    steps: int = TRAIN_STEPS,
) -> dict[str, Any]:
    """Train `model` (a DFlashDraft or an Eagle3Head) on the greedy data; its record."""
    from dataclasses import asdict

    rec = DistillRecord()
    loss_fn = _loss_of(model)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.95), weight_decay=0.01)
    gen = torch.Generator().manual_seed(SEED + 13)
    t0 = time.monotonic()
    model.train()
    for step in range(steps):
        plen = PROMPT_LENS[step % len(PROMPT_LENS)]
        pool = data[plen][VAL_SEQS:]
        ids = pool[torch.randint(0, len(pool), (BATCH,), generator=gen)]
        for group in opt.param_groups:
            group["lr"] = _lr(step, steps)
        loss, _ = loss_fn(model, target, ids, _anchors_for(model, plen, ids, gen))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        rec.losses.append(loss.item())
        if step % 50 == 0 or step == steps - 1:
            rate = (time.monotonic() - t0) / (step + 1)
            print(f"{label} step {step}/{steps} loss {rec.losses[-1]:.4f} ({rate:.2f} s/step)",
                  file=sys.stderr, flush=True)  # fmt: skip
    rec.seconds["train"] = time.monotonic() - t0
    model.eval()
    rec.val_accept = validate(model, target, data)
    print(f"{label} teacher-forced acceptance per position {rec.val_accept}",
          file=sys.stderr, flush=True)  # fmt: skip
    return asdict(rec)


def train_drafters(
    target: Qwen3ForCausalLM,
    corpus: torch.Tensor,
    *,
    dflash_layers: list[int],
    eagle3_layers: list[int],
    mask_id: int,
) -> tuple[DFlashDraft, Eagle3Head, dict[str, Any], dict[str, Any]]:
    """Generate the data once, then train the DFlash drafter and the EAGLE-3 head on it.
    Layer ids are HF layer indices (vLLM's aux ids minus 1)."""
    target.eval()
    t0 = time.monotonic()
    data = greedy_data(target, corpus)
    data_s = time.monotonic() - t0
    torch.manual_seed(SEED + 12)
    dflash = DFlashDraft(target.config, layers=1, aux_layers=dflash_layers, mask_id=mask_id)
    d_rec = distill(dflash, target, data, label="dflash")
    torch.manual_seed(SEED + 15)
    eagle = Eagle3Head(target.config, aux_layers=eagle3_layers)
    with torch.no_grad():  # the head's own LM head starts as the target's (tied embeddings)
        eagle.lm_head.weight.copy_(target.lm_head.weight)
    e_rec = distill(eagle, target, data, label="eagle3")
    for rec in (d_rec, e_rec):
        rec["seconds"]["data"] = data_s
    return dflash, eagle, d_rec, e_rec


@torch.no_grad()
def validate(
    model: nn.Module, target: Qwen3ForCausalLM, data: dict[int, torch.Tensor]
) -> list[float]:
    """Held-out acceptance at T = 0 per position, as vLLM counts it (position k is
    accepted when it and all before it hit the target's greedy token)."""
    gen = torch.Generator().manual_seed(SEED + 14)
    hits = []
    for plen, seqs in data.items():
        ids = seqs[:VAL_SEQS]
        _, hit = _loss_of(model)(model, target, ids, _anchors_for(model, plen, ids, gen))
        hits.append(hit.cumprod(-1).flatten(0, 1).float())
    return [round(float(x), 4) for x in torch.cat(hits).mean(0)]
