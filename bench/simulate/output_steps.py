"""Simulated verify steps in output order (`step_accepted`, `step_drafted`) for probe rows, with
a known acceptance along the output: what `analyze --by output_position` is tested against.

Each step drafts K tokens; position j of a step starting at output token t is accepted with
probability `accept(t)` given the ones before it were (a draft model's prefix acceptance).
The row's counts are then rebuilt from its steps, so every count agrees with them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from numpy.typing import NDArray

F = NDArray[np.float64]


def with_steps(
    probes: pd.DataFrame,
    k: int,
    accept: Callable[[F], F],
    rng: np.random.Generator,
    boot_shift: dict[str, float] | None = None,
) -> pd.DataFrame:
    """`probes` with steps drawn until each row's completion_tokens are emitted, and its
    acceptance counts rebuilt from them; `boot_shift` adds a boot's offset to `accept`."""
    out = probes.copy()
    columns: dict[str, list[object]] = {c: [] for c in _COLUMNS}
    for boot_id, target in zip(out["boot_id"], out["completion_tokens"], strict=True):
        shift = (boot_shift or {}).get(str(boot_id), 0.0)
        steps = _row_steps(int(target), k, accept, shift, rng)
        for name, value in _row_counts(steps, k).items():
            columns[name].append(value)
    for name, values in columns.items():
        out[name] = pd.Series(values, index=out.index, dtype=object)
    return out


_COLUMNS = (
    "step_accepted", "step_drafted", "num_drafts", "num_draft_tokens", "num_accepted_tokens",
    "accepted_per_pos", "acceptance_histogram", "drafted_per_pos", "completion_tokens",
)  # fmt: skip


def _row_steps(
    target: int, k: int, accept: Callable[[F], F], shift: float, rng: np.random.Generator
) -> list[int]:
    accepted: list[int] = []
    t = 1  # the prefill's token
    while t < target:
        p = float(np.clip(accept(np.array([float(t)]))[0] + shift, 0.0, 1.0))
        hits = rng.random(k) < p
        a = int(k if hits.all() else np.argmin(hits))
        accepted.append(a)
        t += a + 1
    return accepted or [0]


def _row_counts(accepted: list[int], k: int) -> dict[str, object]:
    a = np.asarray(accepted, dtype=np.int64)
    return {
        "step_accepted": a.tolist(),
        "step_drafted": [k] * a.size,
        "num_drafts": int(a.size),
        "num_draft_tokens": int(a.size * k),
        "num_accepted_tokens": int(a.sum()),
        "accepted_per_pos": [int((a > p).sum()) for p in range(k)],
        "acceptance_histogram": [int((a == j).sum()) for j in range(k + 1)],
        "drafted_per_pos": [int(a.size)] * k,
        "completion_tokens": int(1 + (a + 1).sum()),
    }
