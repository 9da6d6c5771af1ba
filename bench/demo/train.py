"""The fixed training recipe of the demo models (`specab demo-models --train`).

Deterministic by construction: fixed seeds, fixed step counts (never a wall-clock budget),
a fixed thread count, sorted corpus order. The target learns the CPython stdlib; the draft
starts as the target's embeddings + first layer and is distilled (0.3·CE + 0.7·KL) to it.
Both are trained with full-head rotary embeddings; the demo's *shipped* draft config then
declares `partial_rotary_factor: 0.25`, the train/serve mismatch the demo is about.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.demo.tiny_models import EOS, SEED, corpus_files, draft_from_target, model_config

if TYPE_CHECKING:
    import torch
    from tokenizers import Tokenizer
    from transformers import Qwen3ForCausalLM

THREADS = 1  # fixed: reductions depend on it; one thread also copes best with busy cores
BATCH = 16
SEQ = 256
TARGET_STEPS = 300
TARGET_LR = 3e-3
TARGET_BATCH_SEED = SEED + 1
DRAFT_STEPS = 150
DRAFT_LR = 2e-3
WARMUP = 30
KL_WEIGHT = 0.7
VAL_FRACTION = 1 / 32
VAL_WINDOWS = 64


@dataclass
class TrainRecord:
    """What the recipe measured; saved next to the models as train_record.json."""

    corpus_sha256: str = ""
    corpus_tokens: int = 0
    target_losses: list[float] = field(default_factory=list)
    draft_losses: list[float] = field(default_factory=list)
    target_val_loss: float = math.nan
    draft_val_loss: float = math.nan
    top1_agreement: float = math.nan
    seconds: dict[str, float] = field(default_factory=dict)


def encode_corpus(tok: Tokenizer) -> tuple[torch.Tensor, str]:
    """All corpus files as one token stream (EOS between files) and the corpus sha256."""
    import torch

    digest = hashlib.sha256()
    texts = []
    for path in corpus_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        digest.update(text.encode("utf-8", errors="replace"))
        texts.append(text)
    eos = tok.token_to_id(EOS)
    assert eos is not None, "the demo tokenizer always has EOS"
    ids: list[int] = []
    for enc in tok.encode_batch(texts, add_special_tokens=False):
        ids.extend(enc.ids)
        ids.append(eos)
    return torch.tensor(ids, dtype=torch.long), digest.hexdigest()


def split(data: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    cut = int(len(data) * (1 - VAL_FRACTION))
    return data[:cut], data[cut:]


def batches(data: torch.Tensor, seed: int) -> Iterator[torch.Tensor]:
    """Endless random windows of SEQ+1 tokens from a seeded generator."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    while True:
        starts = torch.randint(0, len(data) - SEQ - 1, (BATCH,), generator=gen)
        yield torch.stack([data[s : s + SEQ + 1] for s in starts.tolist()])


def _lr_at(step: int, total: int, peak: float) -> float:
    if step < WARMUP:
        return peak * (step + 1) / WARMUP
    progress = (step - WARMUP) / max(1, total - WARMUP)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def _optimizer(model: torch.nn.Module, lr: float) -> torch.optim.Optimizer:
    import torch

    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)


def _run(
    model: torch.nn.Module,
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    data: torch.Tensor,
    *,
    steps: int,
    lr: float,
    seed: int,
    label: str,
) -> list[float]:
    import torch

    opt = _optimizer(model, lr)
    losses = []
    t0 = time.monotonic()
    model.train()
    for step, batch in zip(range(steps), batches(data, seed), strict=False):
        for group in opt.param_groups:
            group["lr"] = _lr_at(step, steps, lr)
        with _bf16():
            loss = loss_fn(batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % 25 == 0 or step == steps - 1:
            rate = (time.monotonic() - t0) / (step + 1)
            print(
                f"{label} step {step}/{steps} loss {losses[-1]:.4f} ({rate:.2f} s/step)",
                file=sys.stderr,
                flush=True,
            )
    model.eval()
    return losses


def lm_loss(model: Qwen3ForCausalLM, batch: torch.Tensor) -> torch.Tensor:
    import torch.nn.functional as F

    logits = model(input_ids=batch[:, :-1]).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


def _bf16() -> contextlib.AbstractContextManager[None]:
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16)  # AMX/AVX512-bf16: ~4x fp32 speed


def _initial_target(tok: Tokenizer) -> Qwen3ForCausalLM:
    import torch
    from transformers import Qwen3ForCausalLM

    torch.set_num_threads(THREADS)
    torch.manual_seed(SEED)
    return Qwen3ForCausalLM(model_config(layers=4, tok=tok))


def train_target(
    tok: Tokenizer, train: torch.Tensor, *, steps: int = TARGET_STEPS
) -> tuple[Qwen3ForCausalLM, list[float]]:
    target = _initial_target(tok)
    losses = _run(
        target,
        lambda b: lm_loss(target, b),
        train,
        steps=steps,
        lr=TARGET_LR,
        seed=TARGET_BATCH_SEED,
        label="target",
    )
    return target, losses


def first_target_loss(tok: Tokenizer, train: torch.Tensor) -> float:
    """The target's loss at step 0 of the recipe (its seeded init on its first seeded batch)
    without training: a 1-forward check that the recipe still starts where it did."""
    import torch

    target = _initial_target(tok)
    with torch.no_grad(), _bf16():
        return float(lm_loss(target, next(batches(train, TARGET_BATCH_SEED))).item())


def distill_draft(
    target: Qwen3ForCausalLM, tok: Tokenizer, train: torch.Tensor, *, steps: int = DRAFT_STEPS
) -> tuple[Qwen3ForCausalLM, list[float]]:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(THREADS)
    draft = draft_from_target(target, tok)
    target.eval()

    def loss_fn(batch: torch.Tensor) -> torch.Tensor:
        inputs, labels = batch[:, :-1], batch[:, 1:].reshape(-1)
        with torch.no_grad():
            teacher = F.log_softmax(target(input_ids=inputs).logits.float(), dim=-1)
        logits = draft(input_ids=inputs).logits
        student = F.log_softmax(logits, dim=-1)
        vocab = logits.shape[-1]
        ce = F.nll_loss(student.reshape(-1, vocab), labels)
        kl = F.kl_div(
            student.reshape(-1, vocab),
            teacher.reshape(-1, vocab),
            log_target=True,
            reduction="batchmean",
        )
        return (1 - KL_WEIGHT) * ce + KL_WEIGHT * kl

    losses = _run(draft, loss_fn, train, steps=steps, lr=DRAFT_LR, seed=SEED + 2, label="draft")
    return draft, losses


def _val_windows(val: torch.Tensor) -> torch.Tensor:
    import torch

    stride = max(1, (len(val) - SEQ - 1) // VAL_WINDOWS)
    return torch.stack([val[i * stride : i * stride + SEQ + 1] for i in range(VAL_WINDOWS)])


def evaluate(
    target: Qwen3ForCausalLM, draft: Qwen3ForCausalLM, val: torch.Tensor
) -> dict[str, float]:
    """Validation loss of both and teacher-forced top-1 agreement of the draft with the target."""
    import torch

    windows = _val_windows(val)
    out: dict[str, list[float]] = {"target": [], "draft": [], "agree": []}
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        for chunk in windows.split(BATCH):
            out["target"].append(float(lm_loss(target, chunk)))
            out["draft"].append(float(lm_loss(draft, chunk)))
            t = target(input_ids=chunk[:, :-1]).logits.argmax(-1)
            d = draft(input_ids=chunk[:, :-1]).logits.argmax(-1)
            out["agree"].append(float((t == d).float().mean()))
    return {k: sum(v) / len(v) for k, v in out.items()}


def train_pair(tok: Tokenizer) -> tuple[Qwen3ForCausalLM, Qwen3ForCausalLM, dict[str, Any]]:
    """The whole recipe: encode, train the target, distill the draft, evaluate."""
    from dataclasses import asdict

    rec = TrainRecord()
    t0 = time.monotonic()
    data, rec.corpus_sha256 = encode_corpus(tok)
    rec.corpus_tokens = len(data)
    train, val = split(data)
    rec.seconds["encode"] = time.monotonic() - t0
    t0 = time.monotonic()
    target, rec.target_losses = train_target(tok, train)
    rec.seconds["target"] = time.monotonic() - t0
    t0 = time.monotonic()
    draft, rec.draft_losses = distill_draft(target, tok, train)
    rec.seconds["draft"] = time.monotonic() - t0
    scores = evaluate(target, draft, val)
    rec.target_val_loss, rec.draft_val_loss = scores["target"], scores["draft"]
    rec.top1_agreement = scores["agree"]
    print(
        f"val loss target {scores['target']:.3f} draft {scores['draft']:.3f} "
        f"top-1 agreement {scores['agree']:.3f}",
        file=sys.stderr,
        flush=True,
    )
    return target, draft, asdict(rec)
