"""Every user mistake an experiment file can hold, found before anything is written (before
the results directory, Ray or any boot): `experiment_checks` (probe sets, patches compile,
K, interpreters, per-request support), `model_paths` (paths and offline hub ids),
`build_refusals` (settings the arm's vLLM source refuses) and `server_args` (every arm's
command line parsed by its own vLLM's parser, cached; `parse_with_vllm` is the script the
arm's interpreter runs)."""

from bench.experiment.preflight.experiment_checks import Preflight, preflight
from bench.experiment.preflight.server_args import prime_server_args

__all__ = ["Preflight", "preflight", "prime_server_args"]
