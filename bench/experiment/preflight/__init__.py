"""Every user mistake an experiment file can hold, found before anything is written (before
the results directory, Ray or any boot): `experiment_checks` (probe sets, patches compile,
K, interpreters, per-request support), `model_paths` (paths and offline hub ids),
`build_refusals` (settings the arm's vLLM source refuses) and `server_args` (every arm's
command line parsed by its own vLLM's parser, cached; `parse_with_vllm` is the script the
arm's interpreter runs); `unloaded_diffs` (a diff on model files the arm never imports);
`gpu_accounting` (GPUs against one server's ranks per node, by vLLM's arithmetic)."""

from bench.experiment.preflight.experiment_checks import Preflight, awaits_build, preflight
from bench.experiment.preflight.gpu_accounting import check_gpus
from bench.experiment.preflight.server_args import prime_server_args
from bench.experiment.preflight.unloaded_diffs import unloaded_diff_warnings

__all__ = [
    "Preflight", "awaits_build", "check_gpus", "preflight", "prime_server_args",
    "unloaded_diff_warnings",
]  # fmt: skip
