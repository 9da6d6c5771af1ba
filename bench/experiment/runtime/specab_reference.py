"""specab's reference forward: a drafter's own forward (the training code's) driven through
speculative decoding offline, with the target in HF transformers, over an experiment's
probes: the served arms' counts as training would have them. Run as a script by the
reference arm's own interpreter (stdlib, torch and transformers only; specab need not be
installed there):

    python specab_reference.py JOB.json OUT.jsonl

JOB.json: {"target", "drafter", "forward": "MODULE:FUNCTION", "path": [dirs for sys.path],
"k", "temperature", "ignore_eos", "device", "dtype", "threads", "probes": [{"set", "id",
"prompt" | "messages", "max_tokens"}]}. OUT.jsonl: one line per probe (drafts, accepted per
position, per-step counts, prompt and output token ids), then {"done": true}.

**The protocol** (docs/reference.md). FUNCTION(step) -> logits [K, vocab] for the K drafted
slots, where `step` is a dict:
- "layer_outputs": tensor [L, T, H], the target's residual stream after each decoder layer
  (raw: the last layer's before the final norm) for the T tokens it has processed;
- "tokens": tensor [T + 1], those tokens' ids and the bonus token (the target's last
  prediction, not yet processed) at position T;
- "k": K; "drafter": the drafter checkpoint's directory; "target": the HF model (its
  embeddings and LM head, for a drafter that shares them).
At temperature 0 the runner drafts each row's argmax, verifies the block with the target
and accepts the drafted prefix that equals the target's greedy tokens, as vLLM's rejection
sampler does; the target's token after it is the next bonus token.
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


def _decode(job, torch, model, tok, propose, probe):
    """One probe, greedy: its counts as vLLM records them."""
    k, max_tokens = int(job["k"]), int(probe["max_tokens"])
    eos = set() if job.get("ignore_eos") else {tok.eos_token_id} - {None}
    prompt = _prompt_ids(tok, probe)
    target = _Target(model, torch)
    logits, layers = target.run(prompt)
    target.keep(len(prompt), layers)
    tokens = [*prompt, int(logits[-1].argmax())]  # the bonus token, from the prefill
    out = [tokens[-1]]
    per_pos, steps = [0] * k, []
    while len(out) < max_tokens and out[-1] not in eos:
        step = {"layer_outputs": target.outputs, "tokens": torch.tensor(tokens), "k": k,
                "drafter": job["drafter"], "target": model}  # fmt: skip
        draft = [int(x) for x in propose(step).float().argmax(-1)[:k]]
        logits, layers = target.run([tokens[-1], *draft])
        greedy = [int(x) for x in logits.argmax(-1)]
        accepted = 0
        while accepted < k and draft[accepted] == greedy[accepted]:
            accepted += 1
        for p in range(accepted):
            per_pos[p] += 1
        steps.append(accepted)
        target.keep(len(tokens) + accepted, layers)
        made = [*draft[:accepted], greedy[accepted]]
        tokens += made
        out += made
    out = out[:max_tokens]
    if eos and any(t in eos for t in out):
        out = out[: next(i for i, t in enumerate(out) if t in eos) + 1]
    return {"set": probe["set"], "id": probe["id"], "drafts": len(steps),
            "accepted_per_pos": per_pos, "step_accepted": steps, "prompt_ids": prompt,
            "output_ids": out, "text": tok.decode(out, skip_special_tokens=True)}  # fmt: skip


def main(job_path, out_path):
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    if float(job.get("temperature", 0.0)) != 0.0:
        raise SystemExit("specab reference: only temperature 0 (greedy) is driven here")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(int(job.get("threads") or 1))
    torch.manual_seed(int(job.get("seed") or 0))
    propose = _forward(job["forward"], job.get("path") or [])
    dtype = job.get("dtype") or "auto"  # auto: the config's, as vLLM serves it
    dtype = dtype if dtype == "auto" else getattr(torch, dtype)
    tok = AutoTokenizer.from_pretrained(job["target"])
    model = AutoModelForCausalLM.from_pretrained(job["target"], dtype=dtype)
    model.to(job.get("device") or "cpu").eval()
    with open(out_path, "w", encoding="utf-8") as out, torch.no_grad():
        for probe in job["probes"]:
            t0 = time.perf_counter()
            row = _decode(job, torch, model, tok, propose, probe)
            row["latency_s"] = time.perf_counter() - t0
            out.write(json.dumps(row) + "\n")
            out.flush()
        out.write(json.dumps({"done": True}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
