"""specab's reference forward: a drafter's own forward (the training code's) driven through
speculative decoding offline, with the target in HF transformers, over an experiment's
probes: the served arms' counts as training would have them. Run as a script by the
reference arm's own interpreter (stdlib, torch and transformers only; specab need not be
installed there):

    python specab_reference.py JOB.json OUT.jsonl

JOB.json: {"target", "drafter", "forward": "MODULE:FUNCTION", "path": [dirs for sys.path],
"k", "temperature", "top_p", "draft_sample", "seed", "request_seed", "passes", "ignore_eos",
"device", "dtype", "threads", "probes": [{"set", "id", "prompt" | "messages", "max_tokens"}]}.
OUT.jsonl: one line per probe and pass (drafts, accepted per position, per-step counts,
prompt and output token ids), then {"done": true}.

**The protocol** (docs/reference.md). FUNCTION(step) -> logits [K, vocab] for the K drafted
slots, where `step` is a dict:
- "layer_outputs": tensor [L, T, H], the target's residual stream after each decoder layer
  (raw: the last layer's before the final norm) for the T tokens it has processed;
- "tokens": tensor [T + 1], those tokens' ids and the bonus token (the target's last
  prediction, not yet processed) at position T;
- "k": K; "drafter": the drafter checkpoint's directory; "target": the HF model (its
  embeddings and LM head, for a drafter that shares them).
The runner drafts each row's argmax (vLLM's default `draft_sample_method = "greedy"`; with
"draft_sample": "probabilistic" above temperature 0, a draw from each row's softmax at the
temperature, as vLLM samples a parallel drafter's block) and verifies the block with the
target as vLLM's standard rejection sampler does:
- temperature 0: the drafted prefix that equals the target's greedy tokens is accepted; the
  target's token after it is the next bonus token;
- temperature T > 0: the target's distribution p at each slot (logits / T, then top-p) and
  the draft's q (one-hot for greedy drafts): draft x is accepted with probability
  min(1, p(x) / q(x)); at the first rejection the token is drawn from the residual
  max(0, p - q) renormalized; with every draft accepted the bonus token is drawn from p.
  z-lab's `dflash` 0.1.0 verifies by this rule too. With greedy drafts it is also the
  distribution of the match-the-target-sample rule (draw y ~ p, accept while y = x).
Each request draws from its own generator: seeded by "request_seed" when the probes set one
(as vLLM seeds such a request), else by the boot's "seed", the pass and the probe's place.
"""

import importlib
import json
import sys
import time


def _forward(spec, paths):
    for p in reversed(paths):
        if p not in sys.path:
            sys.path.insert(0, p)
    module, _, name = spec.partition(":")
    fn = getattr(importlib.import_module(module), name, None)
    if not callable(fn):
        raise SystemExit(f"specab reference: {spec}: {module} has no function {name!r}")
    return fn


def _prompt_ids(tok, probe):
    """The prompt's token ids as vLLM's OpenAI server makes them: a completion's prompt
    with the tokenizer's special tokens, a chat's messages through the chat template."""
    if probe.get("messages") is not None:
        return list(tok.apply_chat_template(probe["messages"], add_generation_prompt=True,
                                            tokenize=True, return_dict=False))  # fmt: skip
    return list(tok(probe["prompt"], add_special_tokens=True)["input_ids"])


class _Target:
    """The target with its KV cache and every decoder layer's raw output, token by token."""

    def __init__(self, model, torch):
        self.model, self.torch = model, torch
        self.grabbed = {}
        for i, layer in enumerate(model.model.layers):
            layer.register_forward_hook(self._hook(i))
        self.cache = None
        self.outputs = None  # [L, T, H] for the processed tokens

    def _hook(self, i):
        def grab(_module, _args, out):
            self.grabbed[i] = out[0] if isinstance(out, tuple) else out

        return grab

    def run(self, ids):
        """Process `ids` after the cached ones; their logits [n, V] and layer outputs."""
        t = self.torch.tensor([ids], device=self.model.device)
        out = self.model(input_ids=t, past_key_values=self.cache, use_cache=True)
        self.cache = out.past_key_values
        layers = self.torch.stack([self.grabbed[i][0] for i in range(len(self.grabbed))])
        return out.logits[0].float(), layers

    def keep(self, processed, layers):
        """Keep the first `processed` tokens in the cache; append their layer outputs."""
        drop = self.cache.get_seq_length() - processed
        if drop > 0:  # a negative length removes that many (transformers 4.4x and 5.x alike)
            self.cache.crop(-drop)
        n = processed - (0 if self.outputs is None else self.outputs.shape[1])
        new = layers[:, :n]
        self.outputs = new if self.outputs is None else self.torch.cat((self.outputs, new), 1)


def _distribution(logits, job, torch):
    """The target's sampling distribution per row: softmax(logits / T), then top-p (the
    smallest set of most likely tokens whose mass reaches top_p, renormalized)."""
    probs = torch.softmax(logits.cpu() / float(job["temperature"]), dim=-1)
    top_p = float(job.get("top_p") or 1.0)
    if top_p < 1.0:
        ordered, order = probs.sort(dim=-1, descending=True)
        drop = ordered.cumsum(-1) - ordered >= top_p  # the mass before it already reaches top_p
        probs = probs.scatter(-1, order, ordered.masked_fill(drop, 0.0))
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def _draft(draft_logits, job, torch, gen):
    """(K drafted ids, their distributions q [K, V] or None for one-hot): each row's argmax,
    or with "draft_sample": "probabilistic" above temperature 0 a draw from softmax(row / T),
    row by row, as vLLM samples a parallel drafter's block (temperature only, no top-p)."""
    rows = draft_logits.float().cpu()[: int(job["k"])]
    t = float(job.get("temperature") or 0.0)
    if t == 0.0 or job.get("draft_sample", "greedy") != "probabilistic":
        return [int(x) for x in rows.argmax(-1)], None
    q = torch.softmax(rows / t, dim=-1)
    return [int(x) for x in torch.multinomial(q, 1, generator=gen)[:, 0]], q


def _verify(logits, draft, job, torch, gen, q=None):
    """(accepted, the token after them) for one verify step: logits [K + 1, V]; q the drafts'
    distributions (None: one-hot, greedy drafts)."""
    if float(job.get("temperature") or 0.0) == 0.0:
        greedy = [int(x) for x in logits.argmax(-1)]
        accepted = 0
        while accepted < len(draft) and draft[accepted] == greedy[accepted]:
            accepted += 1
        return accepted, greedy[accepted]
    probs = _distribution(logits, job, torch)
    for i, x in enumerate(draft):
        q_row = torch.nn.functional.one_hot(torch.tensor(x), probs.shape[-1]).float() \
            if q is None else q[i]  # fmt: skip
        if float(torch.rand((), generator=gen)) * float(q_row[x]) < float(probs[i, x]):
            continue  # accepted with probability min(1, p(x) / q(x))
        residual = (probs[i] - q_row).clamp(min=0.0)
        if float(residual.sum()) <= 0.0:  # p = q within rounding: nothing left over
            residual = probs[i]
        return i, int(torch.multinomial(residual / residual.sum(), 1, generator=gen))
    return len(draft), int(torch.multinomial(probs[len(draft)], 1, generator=gen))


def _decode(job, torch, model, tok, propose, probe, gen):
    """One probe: its counts as vLLM records them."""
    k, max_tokens = int(job["k"]), int(probe["max_tokens"])
    eos = set() if job.get("ignore_eos") else {tok.eos_token_id} - {None}
    prompt = _prompt_ids(tok, probe)
    target = _Target(model, torch)
    logits, layers = target.run(prompt)
    target.keep(len(prompt), layers)
    _, first = _verify(logits[-1:], [], job, torch, gen)  # the bonus token, from the prefill
    tokens = [*prompt, first]
    out = [tokens[-1]]
    per_pos, steps = [0] * k, []
    while len(out) < max_tokens and out[-1] not in eos:
        step = {"layer_outputs": target.outputs, "tokens": torch.tensor(tokens), "k": k,
                "drafter": job["drafter"], "target": model}  # fmt: skip
        draft, q = _draft(propose(step), job, torch, gen)
        logits, layers = target.run([tokens[-1], *draft])
        accepted, after = _verify(logits, draft, job, torch, gen, q)
        for p in range(accepted):
            per_pos[p] += 1
        steps.append(accepted)
        target.keep(len(tokens) + accepted, layers)
        made = [*draft[:accepted], after]
        tokens += made
        out += made
    out = out[:max_tokens]
    if eos and any(t in eos for t in out):
        out = out[: next(i for i, t in enumerate(out) if t in eos) + 1]
    return {"set": probe["set"], "id": probe["id"], "drafts": len(steps),
            "accepted_per_pos": per_pos, "step_accepted": steps, "prompt_ids": prompt,
            "output_ids": out, "text": tok.decode(out, skip_special_tokens=True)}  # fmt: skip


def _generator(job, torch, pass_index, place):
    """The request's own random stream (module docstring)."""
    seed = job.get("request_seed")
    if seed is None:
        seed = (int(job.get("seed") or 0) * 1_000_003 + pass_index) * 1_000_003 + place
    return torch.Generator().manual_seed(int(seed) % (2**63))


def main(job_path, out_path):
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(int(job.get("threads") or 1))
    torch.manual_seed(int(job.get("seed") or 0) % (2**63))
    propose = _forward(job["forward"], job.get("path") or [])
    dtype = job.get("dtype") or "auto"  # auto: the config's, as vLLM serves it
    dtype = dtype if dtype == "auto" else getattr(torch, dtype)
    tok = AutoTokenizer.from_pretrained(job["target"])
    model = AutoModelForCausalLM.from_pretrained(job["target"], dtype=dtype)
    model.to(job.get("device") or "cpu").eval()
    with open(out_path, "w", encoding="utf-8") as out, torch.no_grad():
        for pass_index in range(int(job.get("passes") or 1)):
            for place, probe in enumerate(job["probes"]):
                t0 = time.perf_counter()
                gen = _generator(job, torch, pass_index, place)
                row = _decode(job, torch, model, tok, propose, probe, gen)
                row["latency_s"], row["pass"] = time.perf_counter() - t0, pass_index
                out.write(json.dumps(row) + "\n")
                out.flush()
        out.write(json.dumps({"done": True}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
