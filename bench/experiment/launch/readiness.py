"""How long a boot waits for its server's /health: the experiment's `ready_timeout_s`, or,
where it leaves it unset, a deadline scaled by what the server must do before it answers.

A cold start loads the weights (each node its share of a gang's) and, on GPUs, compiles and
captures graphs per rank: a 70B model with torch.compile on 8 GPUs can take far longer than
a fixed 600 s, and two such timeouts in a row stop the run as a start-up failure. The
default is

    600 s + 20 s per GiB of weights each node loads + 120 s per GPU rank on a node

(weights: the *.safetensors / *.bin / *.pt files of the target and draft directories that
are local; ranks: tensor x pipeline x data parallel per node). The tiny CPU demo gets 600 s;
DeepSeek-V4-Flash (~149 GB) over two GB10 nodes at TP = 2 about 2,200 s, the recipe's
measured ~15 min load with room to spare. A deadline only bounds a failing boot: a healthy
one never waits it out."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from bench.experiment.launch.arms import ResolvedArm

BASE_S = 600.0
PER_GIB_S = 20.0
PER_RANK_S = 120.0
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def weights_bytes(model: str | None) -> int:
    """Bytes of weight files in a local model directory (0: not a local directory)."""
    if model is None or not Path(model).is_dir():
        return 0
    return sum(
        p.stat().st_size
        for p in Path(model).rglob("*")
        if p.suffix in WEIGHT_SUFFIXES and p.is_file()
    )


def ranks_per_node(sizes: Mapping[str, int], nodes: int) -> tuple[int, str]:
    """(GPU ranks of one server on each node, how they were counted): tensor x pipeline x
    data parallel over the boot's nodes, or x data_parallel_size_local per node."""
    tp, pp, dp = (max(int(sizes.get(k) or 1), 1) for k in ("tp", "pp", "dp"))
    local = sizes.get("dp_local")
    words = f"tensor {tp} x pipeline {pp} x data {dp}"
    if local:
        return tp * pp * int(local), f"tensor {tp} x pipeline {pp} x local data {local}"
    world = tp * pp * dp
    return -(-world // max(nodes, 1)), words + (
        f" = {world} over {nodes} nodes" if nodes > 1 else ""
    )


def ready_timeout(arm: ResolvedArm, given: float | None, gpus: float) -> tuple[float, str]:
    """(seconds, how they were chosen): the experiment's value when set, else the formula
    (`gpus`: [resources] gpu; without GPUs nothing is compiled per rank)."""
    if given is not None:
        return given, "server.ready_timeout_s"
    gib = (weights_bytes(arm.model) + weights_bytes(arm.draft_model)) / 2**30
    per_node = gib / max(arm.nodes, 1)
    ranks = ranks_per_node(arm.parallel_sizes, arm.nodes)[0] if gpus > 0 else 0
    seconds = BASE_S + PER_GIB_S * per_node + PER_RANK_S * ranks
    how = f"{BASE_S:.0f} s + {PER_GIB_S:.0f} s x {per_node:.1f} GiB a node loads"
    how += f" + {PER_RANK_S:.0f} s x {ranks} GPU rank(s) a node" if ranks else ""
    return round(seconds), how
