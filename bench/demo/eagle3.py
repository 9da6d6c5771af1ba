"""An EAGLE-3 head trained against the demo target, in PyTorch, with the forward of vLLM
0.32's `llama_eagle3.py` (Llama head layout) as `v1/spec_decode` drives it.

What vLLM computes for one request (checked against its source):
- first pass, at every position i the target processed: token x_{i+1} (the next one; the
  last is the bonus token) and the hidden state `fc(aux_i)` of the target's aux layers
  (residual stream after HF layers 0, 1, 2 = `eagle_aux_hidden_state_layer_ids` [1, 2, 3]);
  the one `midlayer` takes `[input_layernorm(embed), hidden_norm(hidden)]` (2 x hidden) into
  q/k/v, the residual is the un-normed hidden, attention is causal over the draft's cache;
  `norm` and the head's own `lm_head` at the last position propose the first token;
- each further step: the proposed token and the step's pre-norm output as the hidden, one
  position further, attending to the cache (the first pass's entries up to the anchor and
  the earlier steps' own).
Training unrolls those steps ("training-time test"), so steps 2..K see the head's own
hidden states as they will in vLLM. State dict names = the checkpoint's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from transformers.models.qwen3.modeling_qwen3 import Qwen3MLP, Qwen3RMSNorm

from bench.demo.dflash import gqa_attention, rope

if TYPE_CHECKING:
    from transformers import Qwen3Config


class _Attention(nn.Module):
    def __init__(self, cfg: Qwen3Config, theta: float) -> None:
        super().__init__()
        h, hd = int(cfg.hidden_size), int(cfg.head_dim or 0)
        self.heads, self.kv_heads = int(cfg.num_attention_heads), int(cfg.num_key_value_heads or 0)
        self.head_dim, self.theta = hd, theta
        self.q_proj = nn.Linear(2 * h, self.heads * hd, bias=False)
        self.k_proj = nn.Linear(2 * h, self.kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(2 * h, self.kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(self.heads * hd, h, bias=False)

    def qkv(self, x: torch.Tensor, pos: torch.Tensor) -> tuple[Any, Any, Any]:
        """Rotated q and k, and v of x [B, S, 2H] at positions pos [B, S]."""
        lead = x.shape[:-1]
        q = rope(self.q_proj(x).view(*lead, self.heads, self.head_dim), pos, self.theta)
        k = rope(self.k_proj(x).view(*lead, self.kv_heads, self.head_dim), pos, self.theta)
        return q, k, self.v_proj(x).view(*lead, self.kv_heads, self.head_dim)

    def attend(self, q: Any, k: Any, v: Any, mask: torch.Tensor) -> torch.Tensor:
        """q [B, Q, h, d] over k, v [B, S, kvh, d]; mask [B, Q, S] (True: see)."""
        return self.o_proj(gqa_attention(q, k, v, mask))


class _Midlayer(nn.Module):
    def __init__(self, cfg: Qwen3Config, theta: float) -> None:
        super().__init__()
        h = cfg.hidden_size
        self.self_attn = _Attention(cfg, theta)
        self.mlp = Qwen3MLP(cfg)
        self.input_layernorm = Qwen3RMSNorm(h, eps=cfg.rms_norm_eps)
        self.hidden_norm = Qwen3RMSNorm(h, eps=cfg.rms_norm_eps)
        self.post_attention_layernorm = Qwen3RMSNorm(h, eps=cfg.rms_norm_eps)


class Eagle3Head(nn.Module):
    """vLLM's Eagle3LlamaForCausalLM minus the shared embeddings (the target's)."""

    def __init__(self, cfg: Qwen3Config, *, aux_layers: list[int]) -> None:
        """aux_layers: the target's HF layer indices (vLLM's ids - 1)."""
        super().__init__()
        self.aux_layers = list(aux_layers)
        aux = len(aux_layers)
        h = cfg.hidden_size
        theta = float((cfg.rope_parameters or {}).get("rope_theta") or 10000.0)
        self.midlayer = _Midlayer(cfg, theta)
        self.fc = nn.Linear(aux * h, h, bias=False)
        self.norm = Qwen3RMSNorm(h, eps=cfg.rms_norm_eps)
        self.lm_head = nn.Linear(h, cfg.vocab_size, bias=False)

    def _inputs(self, embeds: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        m = self.midlayer
        return torch.cat((m.input_layernorm(embeds), m.hidden_norm(hidden)), dim=-1)

    def _finish(self, attn: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """Pre-norm output (the next step's hidden) of the attention output + residual."""
        m = self.midlayer
        residual = attn + residual
        return m.mlp(m.post_attention_layernorm(residual)) + residual

    def unroll(
        self, aux: torch.Tensor, embed: nn.Module, ids: torch.Tensor, anchors: torch.Tensor, k: int
    ) -> torch.Tensor:
        """Pre-norm outputs [B, A, K, H] of K steps from each anchor position i in `anchors`
        [B, A] (step 1 at i proposes x_{i+2}; step j at i+j-1 proposes x_{i+j+1}), fed the
        sequence's own tokens `ids` [B, T] (at T = 0 an accepted draft is that token)."""
        b, t = ids.shape
        a = anchors.shape[1]
        attn = self.midlayer.self_attn
        pos = torch.arange(t).expand(b, -1)
        nxt = torch.cat((ids[:, 1:], ids[:, -1:]), dim=1)  # token x_{i+1} at position i
        hidden = self.fc(aux)
        q, k0, v0 = attn.qkv(self._inputs(embed(nxt), hidden), pos)
        causal = torch.ones(t, t, dtype=torch.bool).tril().expand(b, -1, -1)
        first = self._finish(attn.attend(q, k0, v0, causal), hidden)
        outs = [first.gather(1, anchors[..., None].expand(-1, -1, first.shape[-1]))]
        ctx_ok = torch.arange(t)[None, None, :] <= anchors[..., None]  # [B, A, T]
        ks: list[torch.Tensor] = []
        vs: list[torch.Tensor] = []
        for j in range(1, k):
            p = anchors + j  # position of step j + 1
            tok = ids.gather(1, (p + 1).clamp(max=t - 1))  # x_{i+j+1}: what step j proposed
            x = self._inputs(embed(tok), outs[-1])  # [B, A, 2H]
            qj, kj, vj = attn.qkv(x, p)
            ks.append(kj)
            vs.append(vj)
            keys = torch.cat((k0[:, None].expand(-1, a, -1, -1, -1), torch.stack(ks, 2)), 2)
            vals = torch.cat((v0[:, None].expand(-1, a, -1, -1, -1), torch.stack(vs, 2)), 2)
            mask = torch.cat((ctx_ok, torch.ones(b, a, j, dtype=torch.bool)), dim=-1)
            o = attn.attend(
                qj.reshape(b * a, 1, *qj.shape[2:]),
                keys.flatten(0, 1),
                vals.flatten(0, 1),
                mask.reshape(b * a, 1, -1),
            ).view(b, a, -1)
            outs.append(self._finish(o, outs[-1]))
        return torch.stack(outs, dim=2)

    def logits(self, prenorm: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.norm(prenorm))
