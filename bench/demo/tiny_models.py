"""The demo world's tiny models: a byte-level BPE tokenizer, a Qwen3 target and a 1-layer draft.

Without training (the default) everything is random but deterministic and built in seconds:
good enough for tests that only need vLLM to boot and speculate. `train=True` runs the fixed
recipe in `bench.demo.train` (the committed demo models under arms/demo/models/ come from it).
All text comes from the CPython standard library found at runtime, so nothing is downloaded.
"""

from __future__ import annotations

import json
import shutil
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.errors import SpecabError

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from transformers import Qwen3Config, Qwen3ForCausalLM

SEED = 20260601
VOCAB_SIZE = 2048
MAX_POSITIONS = 2048
EOS = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [EOS, IM_START, IM_END]
# ChatML, as Qwen uses, so chat probes render without a template of their own.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Directories of the stdlib that hold tests, vendored packages or byte caches: not the corpus.
_SKIP_PARTS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}
# What the shipped demo draft's config.json declares although it was trained with full rotary.
SHIPPED_DRAFT_ROTARY = 0.25
MODELS_SUBDIR = Path("arms") / "demo" / "models"
# beside target/ (the random-weight ones of `--drafters` are dflash/ and eagle3/)
DFLASH_TRAINED = "dflash-trained"
EAGLE3_TRAINED = "eagle3-trained"


@dataclass(frozen=True)
class DemoModels:
    """Paths of one demo model set (Hugging Face directories loadable by vLLM offline)."""

    target: Path
    draft: Path
    tokenizer: Path
    dflash: Path  # the trained DFlash drafter (shipped config: rotary 0.25), the demo's
    eagle3: Path  # the trained EAGLE-3 head (arms/methods/)

    @classmethod
    def at(cls, root: Path) -> DemoModels:
        return cls(
            target=root / "target",
            draft=root / "draft",
            tokenizer=root / "tokenizer",
            dflash=root / DFLASH_TRAINED,
            eagle3=root / EAGLE3_TRAINED,
        )

    def exist(self) -> bool:
        return (
            all((p / "config.json").is_file() for p in (self.target, self.draft))
            and (self.tokenizer / "tokenizer.json").is_file()
        )


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def committed_models() -> DemoModels | None:
    """The trained demo target, draft and tokenizer committed under arms/demo/models/, if
    this tree has them (the trained DFlash drafter beside them: `models.dflash`)."""
    models = DemoModels.at(repo_root() / MODELS_SUBDIR)
    return models if models.exist() else None


def corpus_files() -> list[Path]:
    """The stdlib's *.py files (no tests, no site-packages), in a fixed (sorted) order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if _SKIP_PARTS.intersection(rel.parts[:-1]) or rel.name.startswith("test_"):
            continue
        files.append(path)
    files.sort(key=lambda p: p.relative_to(root).as_posix())
    if not files:
        raise SpecabError(
            "no Python sources found in the standard library",
            file=root,
            fix="run with a CPython that ships its stdlib as .py files",
        )
    return files


def corpus_texts() -> Iterator[str]:
    for path in corpus_files():
        yield path.read_text(encoding="utf-8", errors="replace")


def train_tokenizer() -> Tokenizer:
    """Byte-level BPE over the corpus; deterministic for a fixed file order."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus_texts(), trainer=trainer)
    return tok


def save_tokenizer(tok: Tokenizer, out: Path) -> None:
    """Write tokenizer.json plus the HF side files (config with chat template, special map)."""
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": MAX_POSITIONS,
        "eos_token": EOS,
        "pad_token": EOS,
        "bos_token": None,
        "unk_token": None,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
        "additional_special_tokens": [IM_START, IM_END],
    }
    write_json(out / "tokenizer_config.json", config)
    write_json(
        out / "special_tokens_map.json",
        {"eos_token": EOS, "pad_token": EOS, "additional_special_tokens": [IM_START, IM_END]},
    )


def model_config(*, layers: int, tok: Tokenizer) -> Qwen3Config:
    """Qwen3 geometry of the demo: hidden 256, 4 heads of 64, 2 KV heads, FFN 768, tied."""
    from transformers import Qwen3Config

    eos_id = tok.token_to_id(EOS)
    return Qwen3Config(
        vocab_size=VOCAB_SIZE,
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
    )


def draft_from_target(target: Qwen3ForCausalLM, tok: Tokenizer) -> Qwen3ForCausalLM:
    """A 1-layer draft that starts as the target's embeddings, first layer and final norm."""
    from transformers import Qwen3ForCausalLM

    draft = Qwen3ForCausalLM(model_config(layers=1, tok=tok))
    draft.model.embed_tokens.load_state_dict(target.model.embed_tokens.state_dict())
    draft.model.layers[0].load_state_dict(target.model.layers[0].state_dict())
    draft.model.norm.load_state_dict(target.model.norm.state_dict())
    draft.tie_weights()
    return draft


def save_model(model: Qwen3ForCausalLM, tok_dir: Path, out: Path) -> None:
    """Save as bf16 safetensors + config + generation config + the tokenizer files."""
    out.mkdir(parents=True, exist_ok=True)
    model.bfloat16().save_pretrained(out)  # converts in place: saving is the model's last use
    eos_id = model.config.eos_token_id
    write_json(
        out / "generation_config.json",
        {"bos_token_id": eos_id, "eos_token_id": eos_id, "pad_token_id": eos_id},
    )
    for f in sorted(tok_dir.iterdir()):
        shutil.copyfile(f, out / f.name)


def declare_rotary_factor(config_json: Path, factor: float) -> None:
    """Declare `partial_rotary_factor` at the config's top level, as inherited draft configs do.

    The weights were trained with full rotary; vLLM honors the field (it moves it into
    `rope_parameters`) and rotates only head_dim * factor dims: the demo's bug.
    """
    config = json.loads(config_json.read_text(encoding="utf-8"))
    config["partial_rotary_factor"] = factor
    write_json(config_json, config)


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
