"""The demo world: a tiny Qwen3 target, a 1-layer draft and the trained DFlash and EAGLE-3
drafters (built locally from the CPython stdlib, nothing downloaded): their geometry,
tokenizer and corpus (`tiny_models`), forwards written after vLLM's (`dflash`, `eagle3`) and
as reference forwards (`training_forward`), the fixed training recipes (`train`: target and
draft; `distillation`: the drafters), building them (`drafters`, `build`), and the
`make demo` entry (`python -m bench.demo`)."""

from typing import TYPE_CHECKING, Any

from bench import lazy_attribute
from bench.demo.build import build_demo_models, build_method_models, train_drafters
from bench.demo.drafters import build_dflash, build_eagle3, save_dflash, save_eagle3
from bench.demo.tiny_models import (
    SHIPPED_DRAFT_ROTARY,
    VOCAB_SIZE,
    DemoModels,
    committed_models,
    corpus_files,
    train_tokenizer,
)
from bench.demo.train import encode_corpus, first_target_loss, split

if TYPE_CHECKING:
    from bench.demo.dflash import DFlashDraft, block_inputs, rope
    from bench.demo.distillation import distill, greedy_data, validate
    from bench.demo.eagle3 import Eagle3Head

# The forwards and the distillation import torch and transformers (≈ 7 CPU-s): loaded on
# first use, so that `make demo`'s driver and every pytest process that only needs the
# committed models' paths do not pay for them (PEP 562).

_TORCH_MODULES = {
    "DFlashDraft": "dflash",
    "block_inputs": "dflash",
    "rope": "dflash",
    "distill": "distillation",
    "greedy_data": "distillation",
    "validate": "distillation",
    "Eagle3Head": "eagle3",
}


def __getattr__(name: str) -> Any:
    where = {n: f"{__name__}.{m}" for n, m in _TORCH_MODULES.items()}
    return lazy_attribute(__name__, where, name)


__all__ = [
    "SHIPPED_DRAFT_ROTARY", "VOCAB_SIZE", "DFlashDraft", "DemoModels", "Eagle3Head",
    "block_inputs", "build_demo_models", "build_dflash", "build_eagle3", "build_method_models",
    "committed_models", "corpus_files", "distill", "encode_corpus", "first_target_loss",
    "greedy_data", "rope", "save_dflash", "save_eagle3", "split", "train_drafters",
    "train_tokenizer", "validate",
]  # fmt: skip
