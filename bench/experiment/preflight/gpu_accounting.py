"""Whether `[resources] gpu` covers one server's ranks on each node, by vLLM's own arithmetic:
tensor x pipeline x data parallel ranks in all (expert parallelism reuses them), spread over
the boot's nodes, or data_parallel_size_local engines per node when it is set. Fewer GPUs
than that and vLLM places the rest outside specab's accounting (a Ray cluster of its own,
GPUs another boot holds), or fails at start-up after a long load.

The sizes come from vLLM's parser where the arm's interpreter could parse its command line
(every spelling vLLM accepts: -tp, --tensor-parallel-size, --tensor_parallel_size, -dp, ...),
else from the arm's `args` as written (`ResolvedArm.parallel_sizes`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from bench.errors import SpecabError
from bench.experiment.launch import ResolvedArm, ranks_per_node
from bench.experiment.spec import Experiment


def check_gpus(
    spec: Experiment, spec_file: Path, arm: ResolvedArm, sizes: Mapping[str, int] | None = None
) -> None:
    """Refuse whole GPUs fewer than one server's ranks per node (SpecabError, one line)."""
    gpu, nodes = spec.resources.gpu, spec.resources.nodes
    if gpu != int(gpu):
        raise SpecabError(
            f"gpu = {gpu:g}: a vLLM server needs whole GPUs (a fraction lets two boots share "
            "one, and the recorded gpu column would not say so)",
            file=spec_file,
            field="resources.gpu",
            fix=f"use a whole number, e.g. gpu = {max(int(gpu), 1)}",
        )
    per_node, how = ranks_per_node(sizes if sizes is not None else arm.parallel_sizes, nodes)
    if 0 < gpu < per_node:
        raise SpecabError(
            f"gpu = {gpu:g} per {'node' if nodes > 1 else 'boot'} is fewer than arm "
            f"{arm.name}'s GPU ranks there ({how}: {per_node}): vLLM would place the rest "
            "outside specab's accounting (a Ray cluster of its own, or GPUs another boot holds)",
            file=spec_file,
            field="resources.gpu",
            fix=f"set gpu = {per_node}",
        )
