"""Mean accepted length as other tools define it, on the same counts, so that a user can
reconcile two tools' numbers on one run (vllm issue 42508: vLLM and SpecForge disagreed for
the same model because they define the number differently). Reported beside specab's own
estimate; no test or verdict uses them.

With A_r accepted draft tokens, D_r verify steps with drafts and c_r output tokens of
request r (a probe of an ok boot, its passes summed), over every request of the arm:
- `vllm_metrics`: 1 + ΣA / ΣD over all steps — vLLM's `/metrics` counters and
  `vllm bench serve`. It equals specab's estimate, a ratio of sums over the arm's boots.
- `request_mean`: the mean over requests of 1 + A_r / D_r — NVIDIA specdec_bench's
  `Average_AL` (each request weighs the same, however long).
- `token_weighted`: Σ c_r (1 + A_r / D_r) / Σ c_r — per-request lengths weighted by the
  request's output tokens (AIPerf's token-weighted aggregate).
Requests without drafts have no length and are left out of the last two (`requests` counts
the ones used).
"""

from __future__ import annotations

import numpy as np

from bench.stats.inputs import ArmData
from bench.stats.schema import PeerLengths


def peer_lengths(ad: ArmData) -> PeerLengths | None:
    """The three peer definitions for one arm; None without drafts (no speculation)."""
    drafts, accepted = ad.drafts.ravel(), ad.accepted.ravel()
    total = float(drafts.sum())
    if not ad.speculative or total <= 0:
        return None
    used = drafts > 0
    per_request = 1.0 + accepted[used] / drafts[used]
    weighted = None
    if ad.completion is not None:
        tokens = ad.completion.ravel()[used]
        if float(tokens.sum()) > 0:
            weighted = float(np.sum(tokens * per_request) / tokens.sum())
    return PeerLengths(
        vllm_metrics=1.0 + float(accepted.sum()) / total,
        request_mean=float(per_request.mean()),
        token_weighted=weighted,
        requests=int(used.sum()),
    )
