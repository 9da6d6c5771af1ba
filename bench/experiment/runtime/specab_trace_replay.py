"""specab trace's replay (docs/trace.md): the steps the engine captured, replayed through the
reference forward, run as a script by the reference arm's own interpreter (stdlib, torch,
transformers and safetensors; specab need not be installed there):

    python specab_trace_replay.py JOB.json OUT_DIR

JOB.json: {"target", "drafter", "forward": "MODULE:FUNCTION", "path": [...], "capture": the
capture directory, "steps", "tokens": the request's prompt and output token ids, "k",
"dtype", "threads", "map": {trace name: "module.path" or "module.path#N"}, "config":
{field: "module.path.attr"}}.

Per captured step, the reference forward (FUNCTION.module(drafter) is its module, hooked by
the map: a path's output, or with #N its N-th call within the step) runs twice on the same
token ids and positions:
- captured/: fed the aux features vLLM handed its drafter (each captured row at its position,
  split over the reference's own aux layers), to localize a departure inside the drafter;
- hf/: fed the target's layer outputs from an HF transformers run over the request's tokens,
  which also gives `target.aux` (the reference's aux layers at the captured positions), to
  catch corrupted features, an aux index off by one or a normed last layer.
OUT_DIR/reference.json: what the reference resolved (the map's `config` fields)."""

import json
import os
import sys

import specab_reference  # beside this script: its forward import and the target's layers


def _forward(job):
    """The forward and its module getter (specab_reference's import of MODULE:FUNCTION)."""
    fn = specab_reference._forward(job["forward"], job.get("path") or [])
    getter = getattr(fn, "module", None)
    if not callable(getter):
        raise SystemExit(f"specab trace: {job['forward']} has no .module(drafter) to hook; "
                         "see docs/trace.md")  # fmt: skip
    return fn, getter


def _module(getter, drafter, target):
    """FUNCTION.module(drafter), or (drafter, target) for a forward whose module needs the
    target (speculators' takes its embedding and LM head from it)."""
    import inspect

    if len(inspect.signature(getter).parameters) >= 2:
        return getter(drafter, target)
    return getter(drafter)


def _attr(root, path):
    for part in path.split("."):
        root = root[int(part)] if part.isdigit() else getattr(root, part)
    return root


class _Hooks:
    """The map's modules hooked (a path in the drafter's module, or with "target:" in the
    target's); `taken` collects one step's outputs by trace name."""

    def __init__(self, module, target, mapping, torch):
        self.torch, self.taken, self.calls = torch, {}, {}
        by_path = {}
        for name, where in mapping.items():
            path, _, nth = where.partition("#")
            by_path.setdefault(path, []).append((int(nth or 0), name))
        for path, names in by_path.items():
            inner = path.removeprefix("target:")
            hooked = _attr(target, inner) if inner != path else _attr(module, path)
            hooked.register_forward_hook(self._grab(path, dict(names)))

    def _grab(self, path, names):
        def hook(_module, _args, out):
            n = self.calls.get(path, 0)
            self.calls[path] = n + 1
            if n in names:
                t = out[0] if isinstance(out, tuple) else out
                self.taken[names[n]] = t.detach().float().cpu().contiguous().clone()

        return hook

    def start(self):
        self.taken, self.calls = {}, {}


def _step(job, fn, hooks, target, layers, tokens, torch):
    hooks.start()
    logits = fn({"layer_outputs": layers, "tokens": torch.tensor(tokens), "k": int(job["k"]),
                 "drafter": job["drafter"], "target": target})  # fmt: skip
    out = dict(hooks.taken)
    out["draft.logits"] = logits.detach().float().cpu().contiguous()
    return out


def main(job_path, out_dir):
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(int(job.get("threads") or 1))
    dtype = job.get("dtype") or "auto"
    target = AutoModelForCausalLM.from_pretrained(
        job["target"], dtype=dtype if dtype == "auto" else getattr(torch, dtype)
    ).eval()
    fn, getter = _forward(job)
    module = _module(getter, job["drafter"], target)
    hooks = _Hooks(module, target, job["map"], torch)
    aux_ids = [int(i) for i in _attr(module, job["config"]["aux_layer_ids"])]
    final = [int(t) for t in job["tokens"]]
    for side in ("captured", "hf"):
        os.makedirs(os.path.join(out_dir, side), exist_ok=True)
    with torch.no_grad():
        hf = specab_reference._Target(target, torch).run(final)[1].float()
        seen = torch.zeros(hf.shape[1], len(aux_ids) * hf.shape[2])
        for s in range(int(job["steps"])):
            path = os.path.join(job["capture"], f"step-{s:03d}.safetensors")
            if not os.path.exists(path):
                break
            cap = load_file(path)
            pos = cap["inputs.context_positions"].long()
            seen[pos] = cap["target.aux"].float()
            t = int(cap["block.positions"][0])
            tokens = [*final[:t], int(cap["inputs.bonus_token_ids"][0])]
            fed = torch.zeros(hf.shape[0], t, hf.shape[2])
            for j, layer in enumerate(aux_ids):
                fed[layer] = seen[:t, j * hf.shape[2] : (j + 1) * hf.shape[2]]
            captured = _step(job, fn, hooks, target, fed, tokens, torch)
            recomputed = _step(job, fn, hooks, target, hf[:, :t], tokens, torch)
            recomputed["target.aux"] = torch.cat([hf[i, :t] for i in aux_ids], dim=-1)
            for side, out in (("captured", captured), ("hf", recomputed)):
                save_file(out, os.path.join(out_dir, side, f"step-{s:03d}.safetensors"))
    resolved = {}
    for field, where in (job.get("config") or {}).items():
        try:  # "=VALUE": what the reference's code fixes, not an attribute
            value = json.loads(where[1:]) if where.startswith("=") else _attr(module, where)
        except (AttributeError, IndexError, ValueError):
            value = None
        resolved[field] = value if isinstance(value, (int, float, str, bool, type(None))) \
            else [int(v) for v in value]  # fmt: skip
    with open(os.path.join(out_dir, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(resolved, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
