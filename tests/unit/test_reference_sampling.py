"""The reference runner above temperature 0 (runtime/specab_reference.py): its verify step is
vLLM's rejection sampler with greedy drafts, tested by simulation against known truth. Two
facts every sampled speculative decoder must keep, whatever the draft: the token each slot
emits is distributed as the target's p at that slot (acceptance changes speed, never the
output), and a greedy draft x is accepted with probability p(x), a sampled one with the
overlap of p and q. Then the runner on the committed
tiny models: a boot's seed decides its samples, and a request seed makes every pass alike."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from reference_helpers import demo_probes, run_runner

from bench.demo import committed_models
from bench.experiment import REFERENCE_RUNNER

# Each frequency is checked at 4.5 binomial standard errors: a correct sampler fails one
# check in about 150,000, a wrong one (p(x) off by 0.02 at n = 20,000) fails almost always.
_N, _Z = 20_000, 4.5


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("specab_reference", REFERENCE_RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _close(count: int, n: int, p: float) -> bool:
    return abs(count / n - p) <= _Z * np.sqrt(p * (1 - p) / n) + 1e-12


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.6, 1.0), (1.0, 0.7)])
def test_each_slot_emits_the_targets_distribution_and_accepts_x_with_p_of_x(
    temperature: float, top_p: float
) -> None:
    import torch

    runner = _runner()
    job = {"temperature": temperature, "top_p": top_p}
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0], [0.0, 1.5, 0.3, 0.2, 0.1]])
    p = runner._distribution(logits, job, torch)
    want = torch.softmax(logits / temperature, -1)
    if top_p < 1.0:  # the nucleus of row 0 at T = 1: 0.53 + 0.20 reaches 0.7
        assert p[0, 2:].sum() == 0 and torch.allclose(p[0, :2], want[0, :2] / want[0, :2].sum())
    else:
        assert torch.allclose(p, want)
    gen = torch.Generator().manual_seed(7)
    for draft in (1, 3):  # a likely draft and an unlikely one
        first = np.zeros(5, dtype=int)
        accepted = 0
        for _ in range(_N):
            n, after = runner._verify(logits, [draft], job, torch, gen)
            accepted += n
            first[draft if n else after] += 1
        px = float(p[0, draft])
        assert _close(accepted, _N, px), (draft, accepted / _N, px)
        for token in range(5):
            assert _close(int(first[token]), _N, float(p[0, token])), (draft, token, first)


def test_sampled_drafts_keep_the_targets_distribution_and_accept_the_overlap_of_p_and_q() -> None:
    """vLLM's probabilistic drafts (a parallel drafter's rows, each drawn from softmax(row / T)):
    the emitted token is still distributed as p, and a step's first draft is accepted with
    probability sum over x of min(p(x), q(x))."""
    import torch

    runner = _runner()
    job = {"temperature": 0.8, "k": 1, "draft_sample": "probabilistic"}
    target = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0], [0.0, 1.5, 0.3, 0.2, 0.1]])
    drafter = torch.tensor([[0.5, 2.0, 0.0, 1.0, -0.5]])  # disagrees with the target on purpose
    p = runner._distribution(target, job, torch)
    q = torch.softmax(drafter / 0.8, -1)
    gen = torch.Generator().manual_seed(11)
    first = np.zeros(5, dtype=int)
    accepted = 0
    for _ in range(_N):
        draft, q_rows = runner._draft(drafter, job, torch, gen)
        assert q_rows is not None and torch.allclose(q_rows, q)
        n, after = runner._verify(target, draft, job, torch, gen, q_rows)
        accepted += n
        first[draft[0] if n else after] += 1
    overlap = float(torch.minimum(p[0], q[0]).sum())
    assert _close(accepted, _N, overlap), (accepted / _N, overlap)
    for token in range(5):
        assert _close(int(first[token]), _N, float(p[0, token])), (token, first)


@pytest.mark.skipif(committed_models() is None, reason="the committed demo models are absent")
def test_a_boots_seed_decides_its_samples_and_a_request_seed_makes_passes_alike(
    tmp_path: Path,
) -> None:
    probes = demo_probes(2, 24)
    jobs = {"a": {"seed": 1}, "again": {"seed": 1}, "b": {"seed": 2},
            "fixed": {"seed": 3, "request_seed": 11}}  # fmt: skip
    sampled = {"temperature": 0.8, "passes": 2}
    outputs = {name: [(r["pass"], r["id"], r["output_ids"])
                      for r in run_runner(tmp_path, name, probes, **sampled, **job)]
               for name, job in jobs.items()}  # fmt: skip
    assert outputs["a"] == outputs["again"]
    assert [o for *_, o in outputs["a"]] != [o for *_, o in outputs["b"]]
    assert [p for p, *_ in outputs["a"]] == [0, 0, 1, 1]  # each pass decoded anew
    a_passes = {p: [o for q, _, o in outputs["a"] if q == p] for p in (0, 1)}
    assert a_passes[0] != a_passes[1]
    fixed = {p: [o for q, _, o in outputs["fixed"] if q == p] for p in (0, 1)}
    assert fixed[0] == fixed[1]
