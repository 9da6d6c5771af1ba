"""The DFlash training forward (bench/demo/dflash.py) keeps vLLM's inference semantics:
a block's slots see the context strictly before the block's anchor and every slot of their
own block (non-causal), nothing of other blocks; the state dict is vLLM's checkpoint layout
(the names the random-weight builder writes, which vLLM boots in test_methods_real). That
vLLM then measures the acceptance the recipe trained for is test_methods_real's proof."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.demo import (
    SHIPPED_DRAFT_ROTARY,
    DemoModels,
    DFlashDraft,
    Eagle3Head,
    block_inputs,
    build_dflash,
    build_eagle3,
    committed_models,
    rope,
    save_dflash,
    save_eagle3,
)

K = 4


def _tiny_config() -> Any:
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6,
    )  # fmt: skip


@pytest.fixture(scope="module")
def draft() -> DFlashDraft:
    torch.manual_seed(0)
    return DFlashDraft(_tiny_config(), layers=2, aux_layers=[0, 1], mask_id=0).eval()


def _run(draft: DFlashDraft, aux: torch.Tensor, embeds: torch.Tensor, anchors: torch.Tensor):
    pos, mask = block_inputs(anchors, K, aux.shape[1])
    with torch.no_grad():
        return draft(aux, embeds, pos, mask)


def test_block_mask_sees_the_context_before_the_anchor_and_its_own_block() -> None:
    pos, mask = block_inputs(torch.tensor([[3, 7]]), K, 10)
    assert pos.tolist() == [[3, 4, 5, 6, 7, 7, 8, 9, 10, 11]]
    ctx, slots = mask[0, :, :10], mask[0, :, 10:]
    assert ctx[:5].sum(-1).tolist() == [3] * 5 and ctx[5:].sum(-1).tolist() == [7] * 5
    assert slots[:5, :5].all() and slots[5:, 5:].all()  # non-causal inside a block
    assert not slots[:5, 5:].any() and not slots[5:, :5].any()  # blocks never mix


def test_a_block_ignores_context_at_and_after_its_anchor(draft: DFlashDraft) -> None:
    torch.manual_seed(1)
    aux, embeds = torch.randn(1, 12, 64), torch.randn(1, 2 * (K + 1), 32)
    anchors = torch.tensor([[5, 9]])
    base = _run(draft, aux, embeds, anchors)
    later = aux.clone()
    later[:, 5:] += 3.0  # positions >= the first anchor: only the second block sees some
    out = _run(draft, later, embeds, anchors)
    assert torch.allclose(out[:, : K + 1], base[:, : K + 1], atol=1e-6)
    assert not torch.allclose(out[:, K + 1 :], base[:, K + 1 :], atol=1e-3)
    earlier = aux.clone()
    earlier[:, 2] += 3.0
    assert not torch.allclose(_run(draft, earlier, embeds, anchors)[:, :K], base[:, :K])


def test_a_block_is_the_same_alone_or_beside_others(draft: DFlashDraft) -> None:
    """Blocks side by side (training) equal one block per forward (vLLM, one request)."""
    torch.manual_seed(2)
    aux, embeds = torch.randn(1, 12, 64), torch.randn(1, 2 * (K + 1), 32)
    both = _run(draft, aux, embeds, torch.tensor([[4, 8]]))
    alone = _run(draft, aux, embeds[:, K + 1 :], torch.tensor([[8]]))
    assert torch.allclose(both[:, K + 1 :], alone, atol=1e-5)


def test_rope_is_full_head_neox_and_relative() -> None:
    torch.manual_seed(3)
    q, k = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 1, 16)
    dot = lambda a, b: (rope(q, torch.tensor([[a]]), 1e4) * rope(k, torch.tensor([[b]]), 1e4)).sum()  # noqa: E731
    assert dot(3, 1).item() == pytest.approx(dot(12, 10).item(), rel=1e-4)  # only a - b
    assert torch.equal(rope(q, torch.tensor([[0]]), 1e4), q)
    moved = rope(q, torch.tensor([[5]]), 1e4)
    assert not torch.allclose(moved[..., 12:], q[..., 12:])  # the last dims rotate too


def test_the_state_dict_is_the_checkpoint_vllm_loads(tmp_path: Path) -> None:
    models = committed_models()
    if models is None:
        pytest.skip("needs arms/demo/models")
    from transformers import Qwen3ForCausalLM

    target = Qwen3ForCausalLM.from_pretrained(models.target)
    draft = DFlashDraft(target.config, layers=1, aux_layers=[1, 3], mask_id=1)
    from safetensors.torch import load_file

    head = Eagle3Head(target.config, aux_layers=[0, 1, 2])
    tok = models.tokenizer
    pairs = [
        (save_dflash(draft.state_dict(), models.target, tok, tmp_path / "t"),
         build_dflash(models.target, tok, tmp_path / "r")),
        (save_eagle3(head.state_dict(), models.target, tok, tmp_path / "te"),
         build_eagle3(models.target, tok, tmp_path / "re")),
    ]  # fmt: skip
    for trained, random in pairs:
        a, b = (load_file(str(p / "model.safetensors")) for p in (trained, random))
        assert {k: v.shape for k, v in a.items()} == {k: v.shape for k, v in b.items()}
        assert json.loads((trained / "config.json").read_text()) == json.loads(
            (random / "config.json").read_text()
        )


def test_the_committed_drafter_ships_seed_002s_config() -> None:
    models = committed_models()
    if models is None or not (models.dflash / "config.json").is_file():
        pytest.skip("needs arms/demo/models/dflash-trained and eagle3-trained")
    assert models == DemoModels.at(models.target.parent)
    cfg = json.loads((models.dflash / "config.json").read_text())
    assert cfg["architectures"] == ["DFlashDraftModel"]
    assert cfg["partial_rotary_factor"] == SHIPPED_DRAFT_ROTARY  # trained full-head
    for trained in (models.dflash, models.eagle3):
        record = json.loads((trained / "train_record.json").read_text())
        assert record["val_accept"][0] > 0.6 and record["losses"][-1] < record["losses"][0] / 4
    assert json.loads((models.eagle3 / "config.json").read_text())["architectures"] == [
        "LlamaForCausalLMEagle3"
    ]


# --- the EAGLE-3 head (bench/demo/eagle3.py): vLLM's first pass, then its own steps


def _head() -> tuple[Eagle3Head, torch.nn.Embedding]:
    torch.manual_seed(4)
    return Eagle3Head(_tiny_config(), aux_layers=[0, 1, 2]).eval(), torch.nn.Embedding(64, 32)


def test_eagle3_steps_see_the_context_up_to_the_anchor_and_their_own_steps() -> None:
    head, embed = _head()
    torch.manual_seed(5)
    aux, ids = torch.randn(1, 16, 96), torch.randint(0, 64, (1, 16))
    anchors = torch.tensor([[6]])
    with torch.no_grad():
        base = head.unroll(aux, embed, ids, anchors, K)
        later = aux.clone()
        later[:, 7:] += 3.0  # after the anchor: the target has not processed it yet
        assert torch.allclose(head.unroll(later, embed, ids, anchors, K), base, atol=1e-6)
        ids2 = ids.clone()
        ids2[0, 9] = (ids[0, 9] + 1) % 64  # x_9: step 3's input (what step 2 proposed)
        moved = head.unroll(aux, embed, ids2, anchors, K)
    assert torch.allclose(moved[..., :2, :], base[..., :2, :], atol=1e-6)
    assert not torch.allclose(moved[..., 2:, :], base[..., 2:, :], atol=1e-4)


def test_eagle3_first_step_is_one_causal_pass_over_the_sequence() -> None:
    """Step 1 at every anchor equals one causal pass (vLLM's first pass at a prefill)."""
    head, embed = _head()
    torch.manual_seed(6)
    aux, ids = torch.randn(1, 12, 96), torch.randint(0, 64, (1, 12))
    with torch.no_grad():
        steps = head.unroll(aux, embed, ids, torch.tensor([[3, 8]]), 1)
        short = head.unroll(aux[:, :5], embed, ids[:, :5], torch.tensor([[3]]), 1)
    assert torch.allclose(steps[:, :1], short, atol=1e-5)  # nothing after position 3 counts


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Torch on one thread: beside the real half of `make test`, two OpenMP threads on two
    busy cores ran the recipe test 9x slower than alone (CI: 73 s against 8 s)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_the_recipe_learns_both_drafters_in_a_few_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The distillation loop on the committed target, shrunk (16 sequences of 40 greedy
    tokens per prompt length, batches of 8, 30 steps): teacher-forced pos0 goes from about
    0 (random weights) to well above that for both drafters. The committed ones ran the full
    recipe (their train_record.json)."""
    models = committed_models()
    if models is None:
        pytest.skip("needs arms/demo/models")
    from tokenizers import Tokenizer
    from transformers import Qwen3ForCausalLM

    from bench.demo import corpus_files, distill, greedy_data, validate

    for name, value in (("SEQS_PER_LEN", 16), ("VAL_SEQS", 4), ("GEN", 40), ("BATCH", 8),
                        ("WARMUP", 5), ("PROMPT_LENS", (8, 48))):  # fmt: skip
        monkeypatch.setattr(f"bench.demo.distillation.{name}", value)
    tok = Tokenizer.from_file(str(models.tokenizer / "tokenizer.json"))
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in corpus_files()[:40]]
    corpus = torch.tensor([i for e in tok.encode_batch(texts) for i in e.ids])
    target = Qwen3ForCausalLM.from_pretrained(models.target, dtype=torch.float32).eval()
    data = greedy_data(target, corpus)
    mask = tok.token_to_id("<|im_start|>")
    dflash = DFlashDraft(target.config, layers=1, aux_layers=[1, 3], mask_id=mask)
    eagle = Eagle3Head(target.config, aux_layers=[0, 1, 2])
    for model in (dflash, eagle):
        before = validate(model.eval(), target, data)
        record = distill(model, target, data, label="test", steps=30)
        assert before[0] < 0.1 and record["val_accept"][0] > 0.25, (before, record["val_accept"])
        assert record["losses"][-1] < record["losses"][0] / 2
