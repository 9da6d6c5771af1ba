"""Building the demo models: random weights (seconds, for tests) or the fixed training
recipe (minutes; what arms/demo/models/ holds). Imports both halves, so `tiny_models` (geometry,
tokenizer, corpus) and `train` (the recipe) do not import each other in a cycle."""

from __future__ import annotations

from pathlib import Path

from bench.demo.drafters import (
    DFLASH_TARGET_LAYER_IDS,
    EAGLE3_AUX_LAYER_IDS,
    build_dflash,
    build_eagle3,
    build_mtp_target,
    mask_id,
    save_dflash,
    save_eagle3,
)
from bench.demo.tiny_models import (
    SEED,
    SHIPPED_DRAFT_ROTARY,
    DemoModels,
    declare_rotary_factor,
    draft_from_target,
    model_config,
    save_model,
    save_tokenizer,
    train_tokenizer,
    write_json,
)
from bench.demo.train import train_pair
from bench.errors import SpecabError


def build_demo_models(out_dir: str | Path, *, train: bool = False) -> DemoModels:
    """Build tokenizer, target and draft under out_dir/{tokenizer,target,draft}.

    Deterministic: the same stdlib and library versions give the same bytes. Random weights
    (seconds) unless train=True, which runs the fixed training recipe of bench.demo.train.
    """
    import torch
    from transformers import Qwen3ForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    out = Path(out_dir)
    models = DemoModels.at(out)
    tok = train_tokenizer()
    save_tokenizer(tok, models.tokenizer)
    if train:
        target, draft, record = train_pair(tok)
        write_json(out / "train_record.json", record)
    else:
        torch.manual_seed(SEED)
        target = Qwen3ForCausalLM(model_config(layers=4, tok=tok))
        draft = draft_from_target(target, tok)
    save_model(target, models.tokenizer, models.target)
    save_model(draft, models.tokenizer, models.draft)
    declare_rotary_factor(models.draft / "config.json", SHIPPED_DRAFT_ROTARY)
    if train:
        train_drafters(out)
    build_method_models(out)
    return models


def train_drafters(out_dir: str | Path) -> list[Path]:
    """Train the DFlash drafter and the EAGLE-3 head against out_dir/target (the fixed recipe
    of bench.demo.distill, minutes) into out_dir/dflash-trained (its config declaring
    `partial_rotary_factor: 0.25` as seed 002's checkpoint does; trained full-head) and
    out_dir/eagle3-trained."""
    import torch
    from tokenizers import Tokenizer
    from transformers import Qwen3ForCausalLM
    from transformers.utils import logging as hf_logging

    from bench.demo.distillation import THREADS
    from bench.demo.distillation import train_drafters as distill_both
    from bench.demo.train import encode_corpus, split

    hf_logging.disable_progress_bar()
    models = _existing(Path(out_dir))
    torch.set_num_threads(THREADS)
    tok = Tokenizer.from_file(str(models.tokenizer / "tokenizer.json"))
    corpus, _ = encode_corpus(tok)
    train, _val = split(corpus)
    target = Qwen3ForCausalLM.from_pretrained(models.target, dtype=torch.float32)
    dflash, eagle, d_rec, e_rec = distill_both(
        target,
        train,
        dflash_layers=DFLASH_TARGET_LAYER_IDS,  # vLLM adds 1 itself
        eagle3_layers=[i - 1 for i in EAGLE3_AUX_LAYER_IDS],  # vLLM's ids as written
        mask_id=mask_id(models.tokenizer),
    )
    d_tmp = _building(models.dflash)
    save_dflash(dflash.state_dict(), models.target, models.tokenizer, d_tmp)
    declare_rotary_factor(d_tmp / "config.json", SHIPPED_DRAFT_ROTARY)
    write_json(d_tmp / "train_record.json", d_rec)
    e_tmp = _building(models.eagle3)
    save_eagle3(eagle.state_dict(), models.target, models.tokenizer, e_tmp)
    write_json(e_tmp / "train_record.json", e_rec)
    return [_replace(d_tmp, models.dflash), _replace(e_tmp, models.eagle3)]


def _building(final: Path) -> Path:
    return final.with_name(f".{final.name}-building")


def _replace(tmp: Path, final: Path) -> Path:
    """All or nothing: the finished directory replaces the old one in one rename."""
    import shutil

    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return final


def _existing(out: Path) -> DemoModels:
    models = DemoModels.at(out)
    if not models.exist():
        raise SpecabError(
            "no demo target and tokenizer here to build drafters for",
            file=out,
            fix="pass the demo models directory (arms/demo/models), or build it first with "
            "`specab demo-models DIR`",
        )
    return models


def build_method_models(out_dir: str | Path) -> list[Path]:
    """DFlash and EAGLE-3 drafters of out_dir/target and a Qwen3-Next MTP target (random
    weights, seconds; not committed: arms/methods/ uses them)."""
    out = Path(out_dir)
    models = _existing(out)
    return [
        build_dflash(models.target, models.tokenizer, out / "dflash"),
        build_eagle3(models.target, models.tokenizer, out / "eagle3"),
        build_mtp_target(models.tokenizer, out / "mtp-target"),
    ]
