"""What a reference stores per arm (`bench.records.ReferenceArm`): an analysis's per-boot
values and the provenance a gated run must share with it, built here from the analysis and
the ok boots (no I/O: `bench.store.save_reference` writes it)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.errors import SpecabError
from bench.records import ReferenceArm, ReferenceBoot
from bench.stats.schema import Analysis, ArmResult


def _values(rows: pd.DataFrame, col: str) -> list[Any]:
    if col not in rows.columns:
        return []
    return sorted({v for v in rows[col].tolist() if v is not None and v == v})


def reference_arm(arm: ArmResult, ok_boots: pd.DataFrame) -> ReferenceArm:
    """One arm's entry: its boots' values and the K, probe sets, definitions, vLLM versions,
    hosts and GPUs its ok boots ran."""
    rows = ok_boots[ok_boots["arm"] == arm.arm]
    return ReferenceArm(
        speculative=arm.speculative,
        num_speculative_tokens=[int(k) for k in _values(rows, "num_speculative_tokens")],
        probe_sets_sha256=_values(rows, "probe_sets_sha256"),
        definition_sha256=_values(rows, "definition_sha256"),
        vllm_versions=_values(rows, "vllm_version"),
        hosts=_values(rows, "host"),
        gpus=_values(rows, "gpu"),
        boots=[ReferenceBoot.model_validate(b.model_dump(mode="json")) for b in arm.per_boot],
    )


def reference_arms(analysis: Analysis, ok_boots: pd.DataFrame) -> dict[str, ReferenceArm]:
    """Every arm with ok boots, in the analysis's order."""
    return {a.arm: reference_arm(a, ok_boots) for a in analysis.arms if a.boots}


def check_saveable(arms: dict[str, ReferenceArm], source: str) -> None:
    """A reference needs its own boot-to-boot variance: 2 or more ok boots per arm."""
    thin = [a for a, e in arms.items() if len(e.boots) < 2]
    if thin:
        raise SpecabError(
            f"arm(s) {thin} have fewer than 2 ok boots: a reference needs its own boot-to-boot "
            "variance",
            file=source,
            fix="run more boots (specab run-ab --resume with boots_per_arm >= 3)",
        )
