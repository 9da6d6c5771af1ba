"""The demo world: tiny Qwen3 target + 1-layer draft (built locally from the CPython stdlib,
nothing downloaded), their fixed training recipe, and the `make demo` entry
(`python -m bench.demo`)."""

from bench.demo._build import build_demo_models, build_method_models, train_drafters
from bench.demo._models import MODELS_SUBDIR, DemoModels, committed_models, repo_root

__all__ = [
    "MODELS_SUBDIR",
    "DemoModels",
    "build_demo_models",
    "build_method_models",
    "committed_models",
    "repo_root",
    "train_drafters",
]
