"""A DFlash drafter trained against the demo target, in PyTorch, with exactly the forward of
vLLM 0.32's `qwen3_dflash.py` + `v1/spec_decode/dflash.py` (what `--train` ships).

What vLLM computes for one request, per decoding step (checked against its source):
- context: the target's aux hidden states (residual stream after layers 2 and 4, i.e. HF
  layers 1 and 3: `target_layer_ids` + 1) of every token the target has processed,
  concatenated and projected by `fc`; then `hidden_norm`, and each draft layer's k/v
  projection, `k_norm` and rope at the token's own position make that layer's context K/V;
- query block: `[bonus token, mask x K]` at positions n .. n+K (n = the bonus token's
  position), embedded by the target's embeddings (shared), through the decoder layers with
  *non-causal* attention over the context (positions < n) and the whole block;
- the final `norm` and the target's LM head at the K mask slots propose tokens n+1 .. n+K.
The module below keeps vLLM's checkpoint names, so its state dict is the checkpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from transformers.models.qwen3.modeling_qwen3 import Qwen3MLP, Qwen3RMSNorm

if TYPE_CHECKING:
    from transformers import Qwen3Config


def rope(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Neox-style rotary over the whole head (vLLM's default rope, rotary_dim = head_dim):
    x [..., seq, heads, head_dim], pos [..., seq]."""
    half = x.shape[-1] // 2
    inv = 1.0 / theta ** (torch.arange(0, half, dtype=torch.float32) / half)
    ang = pos.float()[..., None] * inv  # [..., seq, half]
    cos, sin = ang.cos()[..., None, :], ang.sin()[..., None, :]
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)


def gqa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> Any:
    """Softmax attention (scale head_dim^-0.5, vLLM's) of q [B, Q, h, d] over k, v
    [B, S, kvh, d], the KV heads shared by h / kvh query heads; mask [B, Q, S] (True: see).
    Returns [B, Q, h * d]."""
    rep = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
    out = nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask[:, None]
    )
    return out.transpose(1, 2).flatten(2)


def partial_rope(x: torch.Tensor, pos: torch.Tensor, theta: float, dims: int) -> torch.Tensor:
    """`rope` over the first `dims` of each head, the rest passed through (vLLM's neox
    partial rotary: rotary_dim = head_dim x partial_rotary_factor)."""
    if dims >= x.shape[-1]:
        return rope(x, pos, theta)
    return torch.cat((rope(x[..., :dims], pos, theta), x[..., dims:]), dim=-1)


class Rotary(nn.Module):
    """`partial_rope` as a module, so a trace can hook what it rotates (context K, the
    block's q, the block's k, in that order per layer)."""

    def __init__(self, theta: float, dims: int) -> None:
        super().__init__()
        self.theta, self.dims = theta, dims

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        return partial_rope(x, pos, self.theta, self.dims)


class _Attention(nn.Module):
    def __init__(self, cfg: Qwen3Config, theta: float) -> None:
        super().__init__()
        self.theta = theta
        # trained full-head; fewer: as vLLM reads 0.25
        self.rotary = Rotary(theta, int(cfg.head_dim or 0))
        h, hd = int(cfg.hidden_size), int(cfg.head_dim or 0)
        self.heads, self.kv_heads = int(cfg.num_attention_heads), int(cfg.num_key_value_heads or 0)
        self.head_dim = hd
        self.q_proj = nn.Linear(h, self.heads * hd, bias=False)
        self.k_proj = nn.Linear(h, self.kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(h, self.kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(self.heads * hd, h, bias=False)
        self.q_norm = Qwen3RMSNorm(hd, eps=cfg.rms_norm_eps)
        self.k_norm = Qwen3RMSNorm(hd, eps=cfg.rms_norm_eps)

    @property
    def rotary_dims(self) -> int:
        """The dims of each head the rotary embedding rotates."""
        return self.rotary.dims

    @rotary_dims.setter
    def rotary_dims(self, dims: int) -> None:
        self.rotary.dims = dims

    def kv(self, x: torch.Tensor, pos: torch.Tensor) -> tuple[Any, Any]:
        """K (normed, rotated) and V of x [B, S, H] at positions pos [B, S]."""
        shape = (*x.shape[:-1], self.kv_heads, self.head_dim)
        k = self.rotary(self.k_norm(self.k_proj(x).view(shape)), pos)
        return k, self.v_proj(x).view(shape)

    def forward(
        self, x: torch.Tensor, pos: torch.Tensor, ctx_kv: tuple[Any, Any], mask: torch.Tensor
    ) -> torch.Tensor:
        """x [B, Q, H] queries; ctx_kv ([B, T, kvh, hd] x 2); mask [B, Q, T + Q] (True: see)."""
        q = self.q_norm(self.q_proj(x).view(*x.shape[:-1], self.heads, self.head_dim))
        q = self.rotary(q, pos)
        k_q, v_q = self.kv(x, pos)
        k = torch.cat((ctx_kv[0], k_q), dim=1)
        v = torch.cat((ctx_kv[1], v_q), dim=1)
        return self.o_proj(gqa_attention(q, k, v, mask))


class _Layer(nn.Module):
    def __init__(self, cfg: Qwen3Config, theta: float) -> None:
        super().__init__()
        self.self_attn = _Attention(cfg, theta)
        self.mlp = Qwen3MLP(cfg)
        self.input_layernorm = Qwen3RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.post_attention_layernorm = Qwen3RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)


class DFlashDraft(nn.Module):
    """vLLM's DFlashQwen3Model minus the shared embeddings and LM head (the target's)."""

    def __init__(
        self, cfg: Qwen3Config, *, layers: int, aux_layers: list[int], mask_id: int
    ) -> None:
        """aux_layers: the target's HF layer indices (vLLM's ids - 1); mask_id: the token
        that fills the block's masked slots (`dflash_config.mask_token_id`)."""
        super().__init__()
        self.aux_layers, self.mask_id = list(aux_layers), mask_id
        aux = len(aux_layers)
        h = cfg.hidden_size
        theta = float((cfg.rope_parameters or {}).get("rope_theta") or 10000.0)
        self.layers: list[_Layer] = nn.ModuleList(  # type: ignore[assignment]
            _Layer(cfg, theta) for _ in range(layers)
        )
        self.fc = nn.Linear(aux * h, h, bias=False)
        self.hidden_norm = Qwen3RMSNorm(h, eps=cfg.rms_norm_eps)
        self.norm = Qwen3RMSNorm(h, eps=cfg.rms_norm_eps)

    def forward(
        self,
        aux: torch.Tensor,
        query_embeds: torch.Tensor,
        query_pos: torch.Tensor,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        """Hidden states (after `norm`) of the query slots.

        aux [B, T, aux x H]: the target's aux states at positions 0..T-1 (the context);
        query_embeds [B, Q, H] and query_pos [B, Q]: every block's slots side by side;
        mask [B, Q, T + Q]: which context positions and which slots each slot attends to.
        """
        ctx = self.hidden_norm(self.fc(aux))
        ctx_pos = torch.arange(aux.shape[1]).expand(aux.shape[0], -1)
        hidden, residual = query_embeds, query_embeds
        for i, layer in enumerate(self.layers):
            if i:  # vLLM's fused add + norm: the residual stream carries on
                residual = hidden + residual
            normed = layer.input_layernorm(residual)
            ctx_kv = layer.self_attn.kv(ctx, ctx_pos)
            hidden = layer.self_attn(normed, query_pos, ctx_kv, mask)
            residual = hidden + residual
            hidden = layer.mlp(layer.post_attention_layernorm(residual))
        return self.norm(hidden + residual)


def block_inputs(anchors: torch.Tensor, k: int, ctx_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions [B, A*(K+1)] of the blocks anchored at `anchors` [B, A] and their attention
    mask [B, A*(K+1), T + A*(K+1)]: context positions < anchor, and the block's own slots."""
    b, a = anchors.shape
    offs = torch.arange(k + 1)
    pos = (anchors[..., None] + offs).reshape(b, a * (k + 1))
    ctx_ok = torch.arange(ctx_len)[None, None, :] < anchors.repeat_interleave(k + 1, 1)[..., None]
    block_id = torch.arange(a).repeat_interleave(k + 1)
    own = (block_id[:, None] == block_id[None, :]).expand(b, -1, -1)
    return pos, torch.cat((ctx_ok, own), dim=-1)
