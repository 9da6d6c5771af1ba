"""Mean accepted length as other tools define it, on hand-computable counts."""

from __future__ import annotations

import numpy as np
import pytest

from bench.stats.describe import peer_lengths
from bench.stats.inputs import ArmData


def _arm(drafts: list[list[int]], accepted: list[list[int]], tokens: list[list[int]]) -> ArmData:
    d, a = np.array(drafts, float), np.array(accepted, float)
    return ArmData(
        name="x",
        boot_ids=[f"b{i}" for i in range(len(drafts))],
        drafts=d,
        accepted=a,
        per_pos=np.zeros((*d.shape, 2)),
        completion=np.array(tokens, float),
    )


def test_three_definitions_differ_as_their_weights_do() -> None:
    # request 1: 10 steps, 20 accepted (length 3), 30 tokens; request 2: 2 steps, 0 accepted
    # (length 1), 2 tokens; request 3 (another boot): 4 steps, 4 accepted (length 2), 8 tokens
    ad = _arm([[10, 2], [4, 0]], [[20, 0], [4, 0]], [[30, 2], [8, 1]])
    p = peer_lengths(ad)
    assert p is not None and p.requests == 3  # the request without drafts has no length
    assert p.vllm_metrics == pytest.approx(1 + 24 / 16)  # pooled over steps
    assert p.request_mean == pytest.approx((3 + 1 + 2) / 3)
    assert p.token_weighted == pytest.approx((30 * 3 + 2 * 1 + 8 * 2) / 40)


def test_equal_requests_make_every_definition_agree_and_no_drafts_gives_none() -> None:
    ad = _arm([[5, 5]], [[10, 10]], [[15, 15]])
    p = peer_lengths(ad)
    assert p is not None and p.vllm_metrics == p.request_mean == p.token_weighted == 3.0
    assert peer_lengths(_arm([[0, 0]], [[0, 0]], [[4, 4]])) is None
