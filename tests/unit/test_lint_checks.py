"""The lint checks on config dicts: where each field is read from, what counts as a mismatch,
and the shapes that must not raise false alarms (MTP heads, multimodal configs, EAGLE)."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import pytest

from bench.experiment.launch import merge_patch, mirror_rope_fields
from bench.experiment.lint import (
    Finding,
    LintReport,
    PairContext,
    check_pair,
    id_ranges,
    offset_layer_keys,
    rope_of,
    toml_value,
)

QWEN: dict[str, Any] = {
    "model_type": "qwen3",
    "head_dim": 128,
    "num_hidden_layers": 28,
    "vocab_size": 151936,
    "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
}


def ctx(method: str | None = "draft_model", k: int | None = 4) -> PairContext:
    return PairContext(arm="a", method=method, num_speculative_tokens=k)


def with_(cfg: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return merge_patch(cfg, changes)  # type: ignore[no-any-return]


def apply_fix(cfg: dict[str, Any], f: Finding) -> dict[str, Any]:
    m = re.match(r"(?:target|draft)_config = (\{.*?\})(?: if |$)", f.fix)
    assert m, f.fix
    patch = tomllib.loads(f"x = {m.group(1)}")["x"]
    out: dict[str, Any] = merge_patch(cfg, patch)
    mirror_rope_fields(out, patch)  # what specab's overlay does (effective_config)
    return out


def test_identical_pair_is_clean() -> None:
    assert check_pair(ctx(), QWEN, dict(QWEN)) == []


def test_rope_parameters_value_wins_over_the_top_level() -> None:
    """transformers >= 5 copies the top-level field in with setdefault: rope_parameters wins."""
    draft = with_(QWEN, partial_rotary_factor=1.0, rope_parameters={"partial_rotary_factor": 0.5})
    assert rope_of(draft).factor == 0.5
    (f,) = check_pair(ctx(), QWEN, draft)
    assert f.field == "partial_rotary_factor"
    assert "0.5 of each head (64 of 128 dims)" in f.problem and "in rope_parameters" in f.problem
    assert check_pair(ctx(), QWEN, apply_fix(draft, f)) == []
    # a legacy config (no rope_parameters) declares it at the top level
    legacy = {"head_dim": 64, "partial_rotary_factor": 0.25, "rope_theta": 10000.0}
    assert (rope_of(legacy).factor, rope_of(legacy).factor_at) == (0.25, "top-level field")


def test_theta_and_scaling_type_mismatches_and_their_fixes() -> None:
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    target = with_(QWEN, rope_parameters=yarn)
    draft = with_(QWEN, rope_parameters={"rope_theta": 10000.0})
    found = check_pair(ctx(), target, draft)
    assert [f.field for f in found] == ["rope_theta", "rope_parameters.rope_type"]
    assert "draft 10000.0, target 1000000.0" in found[0].problem
    assert "the draft's rope is 'default', the target's 'yarn'" in found[1].problem
    fixed = apply_fix(apply_fix(draft, found[0]), found[1])
    assert check_pair(ctx(), target, fixed) == []
    # a theta declared on one side only is not compared (the default is model-specific)
    assert check_pair(ctx(), QWEN, with_(QWEN, rope_parameters={"rope_theta": None})) == []


def test_multimodal_text_config_is_read_and_the_fix_nests_under_it() -> None:
    """Seed report 002's real shape: a Qwen3.5-class target keeps its fields in text_config."""
    text = with_(QWEN, rope_parameters={"partial_rotary_factor": 0.25})
    target = {"model_type": "qwen3_5", "text_config": text}
    assert check_pair(ctx(), target, {"text_config": dict(text)}) == []
    draft = {"text_config": with_(text, rope_parameters={"partial_rotary_factor": 1.0})}
    (f,) = check_pair(ctx(), target, draft)
    assert f.fix.startswith(
        "draft_config = { text_config = { partial_rotary_factor = 0.25, "
        "rope_parameters = { partial_rotary_factor = 0.25 } } }"
    )
    assert check_pair(ctx(), target, apply_fix(draft, f)) == []


def test_vocabulary() -> None:
    (f,) = check_pair(ctx(), QWEN, with_(QWEN, vocab_size=32000))
    assert (f.field, f.check) == ("vocab_size", "vocabulary")
    assert "draft 32000, target 151936" in f.problem
    # EAGLE3 heads keep the target's vocab_size and map a smaller draft_vocab_size: clean
    assert check_pair(ctx("eagle3"), QWEN, with_(QWEN, draft_vocab_size=32000)) == []


V4 = {"num_hidden_layers": 43, "compress_ratios": [4] * 43 + [0], "vocab_size": 129280}


@pytest.mark.parametrize(
    ("method", "target", "draft", "expected"),
    [
        # DSpark: three draft layers by dspark_target_layer_ids (the fork's count)
        ("dspark", V4, {**V4, "dspark_target_layer_ids": [40, 41, 42]}, "44, 45"),
        # upstream vLLM's count key wins when both are there
        ("dspark", V4, {**V4, "n_mtp_layers": 4, "dspark_target_layer_ids": [1]}, "44-46"),
        # DeepSeek MTP heads live in the target checkpoint (no draft model)
        (
            "deepseek_mtp",
            {**V4, "compress_ratios": [4] * 43, "num_nextn_predict_layers": 1},
            None,
            "43",
        ),
        ("mtp", {**V4, "num_nextn_predict_layers": 2}, None, "44"),
        # long enough: clean
        ("deepseek_mtp", {**V4, "num_nextn_predict_layers": 1}, None, None),
        # not an offset-id drafter: short lists do not matter
        ("draft_model", V4, {**V4, "dspark_target_layer_ids": [1, 2, 3]}, None),
        ("eagle3", V4, {**V4, "num_hidden_layers": 1}, None),
    ],
)
def test_layer_overflow_by_method(
    method: str, target: dict[str, Any], draft: dict[str, Any] | None, expected: str | None
) -> None:
    found = [f for f in check_pair(ctx(method, None), target, draft) if f.check == "layer_overflow"]
    if expected is None:
        assert found == []
    else:
        (f,) = found
        assert f"ids {expected} fall past its end" in f.problem


def test_layer_overflow_uses_vllms_default_dspark_layer_count() -> None:
    """A DeepSeek-V4 DSpark draft that declares no n_mtp_layers runs vLLM 0.32's default of
    3 layers (ids 43-45): two of them fall past a 44-entry compress_ratios. Not "no findings"."""
    (f,) = check_pair(ctx("dspark", None), V4, {**V4})
    assert (f.field, f.check, f.severity) == ("compress_ratios", "layer_overflow", "warning")
    assert "ids 43-45 (target num_hidden_layers 43 + 3 draft layers, vLLM 0.32's default" in (
        f.problem
    )
    assert "ids 44, 45 fall past its end" in f.problem
    # declared counts still win over the default
    assert check_pair(ctx("dspark", None), V4, {**V4, "n_mtp_layers": 1}) == []


def test_layer_count_neither_declared_nor_defaulted_is_a_note_not_silence() -> None:
    (f,) = check_pair(ctx("deepseek_mtp", None), V4, None)
    assert (f.severity, f.check, f.field) == ("note", "layer_overflow", "num_nextn_predict_layers")
    assert f.problem.startswith("cannot check the draft layers' ids against the target's")
    assert "no default is known for method 'deepseek_mtp'" in f.problem
    report = LintReport(("a",), (f,))
    assert report.exit_code == 0
    assert report.summary() == "1 thing(s) could not be checked in 1 arm(s); no other findings"
    # nothing per-layer to run past: nothing to say
    assert check_pair(ctx("deepseek_mtp", None), {"num_hidden_layers": 43}, None) == []


def test_layer_overflow_lists_beyond_compress_ratios_and_no_false_alarm_on_layer_types() -> None:
    """A list of exactly num_hidden_layers entries (Qwen3-Next's layer_types) is not read for
    the MTP layer; one that reaches past num_hidden_layers but not far enough is flagged."""
    qwen_next = {
        "num_hidden_layers": 4,
        "mtp_num_hidden_layers": 1,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "vocab_size": 151936,
    }
    assert check_pair(ctx("qwen3_next_mtp", None), qwen_next, None) == []
    partial = {**qwen_next, "mtp_num_hidden_layers": 2, "layer_types": ["full_attention"] * 5}
    (f,) = check_pair(ctx("qwen3_next_mtp", None), partial, None)
    assert f.field == "layer_types" and "ids 4, 5 (target" in f.problem
    assert "ids 5 fall past" in f.problem and "mtp_num_hidden_layers of the target" in f.problem
    # lists of layer ids or tokens are not per-layer lists
    ids = {**qwen_next, "mtp_num_hidden_layers": 2, "eos_token_id": [1, 2, 3, 4, 5]}
    assert check_pair(ctx("qwen3_next_mtp", None), ids, None) == []


def test_offset_methods_are_listed_in_one_place() -> None:
    assert offset_layer_keys("dspark") is not None
    for m in ("deepseek_mtp", "qwen3_next_mtp", "glm4_moe_mtp", "mtp"):
        assert offset_layer_keys(m) is not None, m
    for m in ("eagle", "eagle3", "draft_model", "dflash", "ngram", None):
        assert offset_layer_keys(m) is None, m


@pytest.mark.parametrize(
    ("draft", "method", "k", "flagged"),
    [
        ({"dspark_block_size": 5}, "dspark", 3, True),
        ({"dspark_block_size": 5}, "dspark", 5, False),
        ({"dspark_block_size": 5}, "dspark", None, False),  # vLLM defaults k to the block
        ({"dflash_config": {"block_size": 8}, "dspark_block_size": 5}, "dspark", 6, True),
        ({"block_size": 16}, "eagle3", 3, False),  # a plain block_size means nothing there
        ({"dspark_block_size": 7}, "draft_model", 2, True),
    ],
)
def test_speculation_length(
    draft: dict[str, Any], method: str, k: int | None, flagged: bool
) -> None:
    found = check_pair(ctx(method, k), {"vocab_size": 1}, {**draft, "vocab_size": 1})
    assert [f.field for f in found] == (["num_speculative_tokens"] if flagged else [])


def test_text_helpers() -> None:
    assert id_ranges([43, 44, 45]) == "43-45"
    assert id_ranges([44, 45]) == "44, 45"
    assert id_ranges([1, 3, 4, 5, 9]) == "1, 3-5, 9"
    value = {"a": 1.0, "b c": [1, 2], "d": None, "e": True, "f": "yarn"}
    assert toml_value(value) == '{ a = 1.0, "b c" = [1, 2], e = true, f = "yarn" }'
    assert tomllib.loads(f"x = {toml_value(value)}")["x"] == {
        "a": 1.0,
        "b c": [1, 2],
        "e": True,
        "f": "yarn",
    }


def test_block_drafter_without_a_declared_block_is_a_note() -> None:
    found = check_pair(ctx("dflash", 3), QWEN, {**QWEN})
    (f,) = [x for x in found if x.check == "speculation_length"]
    assert f.severity == "note" and f.problem.startswith("cannot check 3 against the draft's block")
    (g,) = check_pair(ctx("dflash", 3), QWEN, {**QWEN, "block_size": 4})
    assert g.severity == "warning" and "3 is below the draft's block_size 4" in g.problem


# --- aux hidden-state layers (EAGLE-3, DFlash, DSpark) -------------------------------------
TARGET4 = with_(QWEN, num_hidden_layers=4)


def _aux(method: str, draft: dict[str, Any], target: dict[str, Any] = TARGET4) -> list[Finding]:
    return [f for f in check_pair(ctx(method), target, draft) if f.check == "aux_layers"]


def test_aux_layers_in_range_and_distinct_are_clean() -> None:
    assert _aux("eagle3", with_(TARGET4, eagle_aux_hidden_state_layer_ids=[1, 2, 3])) == []
    dflash = with_(TARGET4, dflash_config={"target_layer_ids": [1, 3]})  # vLLM reads 2, 4
    assert _aux("dflash", dflash) == []


def test_eagle3_default_repeats_a_layer_on_a_four_layer_target() -> None:
    (f,) = _aux("eagle3", dict(TARGET4))
    assert f.field == "draft_config.eagle_aux_hidden_state_layer_ids"
    assert "vLLM's default [2, 2, 1]" in f.problem and "[2] repeated" in f.problem
    deep = with_(QWEN, num_hidden_layers=32)
    assert _aux("eagle3", dict(deep), target=deep) == []  # (2, 16, 29): fine


def test_aux_ids_past_the_target_are_never_captured() -> None:
    (f,) = _aux("eagle3", with_(TARGET4, eagle_aux_hidden_state_layer_ids=[2, 16, 29]))
    assert "[16, 29] outside 0..4" in f.problem and "never captures" in f.problem
    (g,) = _aux("dspark", with_(TARGET4, target_layer_ids=[0, 7]))
    assert g.field == "draft_config.target_layer_ids" and "[8] outside 0..4" in g.problem


def test_aux_ids_counted_from_one_are_named_and_fixed() -> None:
    """DFlash counts target layers from 0 and vLLM adds 1: [2, 4] on a 4-layer target reads
    layer 5 — the off-by-one class of seed report 000's companion bug."""
    draft = with_(TARGET4, dflash_config={"target_layer_ids": [2, 4]})
    (f,) = _aux("dflash", draft)
    assert "look counted from 1" in f.problem and "layer 5 of a 4-layer target" in f.problem
    assert f.fix.startswith("draft_config = { dflash_config.target_layer_ids = [1, 3] }")
    fixed = with_(TARGET4, dflash_config={"target_layer_ids": [1, 3]})
    assert _aux("dflash", fixed) == []


def test_aux_ids_repeated_in_a_declared_list() -> None:
    (f,) = _aux("eagle3", with_(TARGET4, eagle_config={"layer_ids": [1, 1, 3]}))
    assert f.field == "draft_config.eagle_config.layer_ids" and "[1] repeated" in f.problem


def test_block_rejection_is_noted_as_v2_only() -> None:
    from bench.experiment.lint import block_rejection_note

    (f,) = block_rejection_note("a", {"rejection_sample_method": "block"})
    assert f.severity == "note" and "V2 model runner" in f.problem
    assert block_rejection_note("a", {"rejection_sample_method": "standard"}) == []
