"""`specab trace` without a server (docs/trace.md): the comparison on known tensors (relative
error decides, a scale error at cosine 1 departs, a rejected draft's context row is never
compared, the target's features are judged first), the geometry table's words, and every
bad input refused in one line, exit 2, before anything is written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from reference_helpers import MODELS, ROOT, TRAINED, reference_experiment

from bench.cli import run
from bench.demo import committed_models
from bench.trace import (
    config_fields,
    config_said,
    first_divergence,
    forward_order,
    step_pairs,
    tensor_diffs,
    verdict,
)

RNG = np.random.default_rng(0)


def _capture(context: int, first: int) -> dict[str, np.ndarray]:
    """A capture step: `context` rows at positions first-3 .., the block at `first`."""
    pos = np.arange(first - 3, first - 3 + context)
    return {
        "inputs.context_positions": pos,
        "inputs.context_token_ids": pos + 100,  # the request's own tokens: id = pos + 100
        "block.positions": np.arange(first, first + 5),
        "context.fc": RNG.normal(size=(context, 8)),
        "context.k_rope": RNG.normal(size=(1, context, 2, 4)),
        "layers.0.attn_out": RNG.normal(size=(5, 8)),
    }


def _reference(cap: dict[str, np.ndarray], first: int) -> dict[str, np.ndarray]:
    """The reference's tensors equal to the capture's, context over positions 0 .. first-1."""
    fc = np.zeros((1, first, 8))
    k = np.zeros((1, first, 2, 4))
    pos = cap["inputs.context_positions"]
    ok = pos < first
    fc[0, pos[ok]] = cap["context.fc"][ok]
    k[0, pos[ok]] = cap["context.k_rope"][0][ok]
    return {
        "context.fc": fc,
        "layers.0.context_k": k,
        "layers.0.attn_out": cap["layers.0.attn_out"][None],
    }


def test_rows_beyond_the_block_or_of_other_tokens_are_never_compared() -> None:
    first = 10
    cap = _capture(5, first)  # positions 7..11: 10 and 11 are rejected drafts' rows
    ref = _reference(cap, first)
    cap["context.fc"][3:] += 50.0  # what a rejected row held: rewritten by the next step
    tokens = list(range(100, 100 + first + 4))
    tokens[8] = 7  # the request's token at position 8 is not the captured row's
    pairs = step_pairs(cap, ref, tokens, layers=1)
    engine, reference = pairs["context.fc"]
    assert engine.shape == (2, 8) and np.array_equal(engine, reference)  # positions 7 and 9
    diffs = tensor_diffs([pairs], 1, {}, threshold=0.02)
    assert all(d.agrees and d.rel == 0.0 for d in diffs)


def test_a_scale_error_departs_by_relative_error_though_its_cosine_is_one() -> None:
    first = 10
    cap = _capture(3, first)
    ref = _reference(cap, first)
    cap["layers.0.attn_out"] = cap["layers.0.attn_out"] * 4.0
    pairs = step_pairs(cap, ref, list(range(100, 120)), layers=1)
    diffs = {d.name: d for d in tensor_diffs([pairs], 1, {}, threshold=0.02)}
    attn = diffs["layers.0.attn_out"]
    assert attn.rel == pytest.approx(3.0) and attn.cosine == pytest.approx(1.0)
    assert not attn.agrees
    first_name = first_divergence([], list(diffs.values()))
    assert first_name == "layers.0.attn_out"
    said = verdict([], list(diffs.values()), first_name)
    assert said.startswith("draft layer 0 attention output departs (rel 3)")
    assert "context features (fc) and draft layer 0 context K after rope agree" in said


def test_the_targets_features_are_judged_before_the_drafters_tensors() -> None:
    first = 10
    cap = _capture(3, first)
    ref = _reference(cap, first)
    cap["target.aux"] = RNG.normal(size=(3, 16))
    hf = {**ref, "target.aux": np.zeros((first, 16))}  # another layer's features entirely
    cap["layers.0.attn_out"] = cap["layers.0.attn_out"] + 1.0
    tokens = list(range(100, 120))
    tensors = tensor_diffs([step_pairs(cap, ref, tokens, 1)], 1, {}, 0.02)
    recomputed = tensor_diffs([step_pairs(cap, hf, tokens, 1)], 1, {}, 0.02)
    assert first_divergence(recomputed, tensors) == "target.aux"
    assert "other features than the target's" in verdict(recomputed, tensors, "target.aux")
    assert [d.name for d in tensors] == [
        n for n in forward_order(1) if n in {d.name for d in tensors}
    ]


def test_the_geometry_table_marks_what_differs_in_the_words_of_the_seed() -> None:
    engine = {"aux_layer_ids": [1, 3], "layers": [{"head_dim": 64, "rotary_dim": 16,
                                                   "rms_norm_eps": 1e-6}]}  # fmt: skip
    reference = {"aux_layer_ids": [1, 3], "layers.0.head_dim": 64, "layers.0.rotary_dim": 64,
                 "layers.0.rms_norm_eps": 1e-6 * (1 + 1e-12), "mask_token_id": 1}  # fmt: skip
    fields = {f.field: f for f in config_fields(engine, reference)}
    assert [f for f, c in fields.items() if c.differs] == ["layers.0.rotary_dim"]
    assert fields["mask_token_id"].engine is None and not fields["mask_token_id"].differs
    assert config_said(list(fields.values())) == [
        "served layers.0.rotary_dim 16 of 64; reference 64 of 64"
    ]


# --- bad inputs: one line, exit 2, nothing written ------------------------------------

needs_models = pytest.mark.skipif(committed_models() is None, reason="needs arms/demo/models")
ARMS = f"""
[[arms]]
name = "reference"
reference = {{ forward = "{TRAINED}", path = ["{ROOT}"] }}
[[arms]]
name = "shipped"
[[arms]]
name = "nospec"
speculative_config = false
[[arms]]
name = "eagle3"
speculative_config = {{ method = "eagle3", model = "{MODELS / "eagle3-trained"}" }}
"""


@needs_models
@pytest.mark.parametrize(
    ("args", "field", "words"),
    [
        (["--arm", "reference"], "--arm", "is a reference arm"),
        (["--arm", "nospec"], "--arm", "runs no drafter"),
        (["--arm", "eagle3"], "speculative_config.method", "no name map for a eagle3 drafter"),
        (["--arm", "nope"], "--arm", "no arm named 'nope'"),
        (["--arm", "shipped", "--probe", "stdlib-8/none"], "--probe", "no probe"),
        (["--arm", "shipped", "--steps", "17"], "--steps", "out of bounds"),
        (["--arm", "shipped", "--reference", "nospec"], "--reference", "not a reference arm"),
    ],
)
def test_bad_input_is_refused_in_one_line_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], field: str, words: str
) -> None:
    spec = reference_experiment(tmp_path, ARMS)
    out = tmp_path / "trace"
    assert run(["trace", str(spec), *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and words in err, err
    assert not out.exists()


@needs_models
def test_a_forward_without_a_name_map_and_a_drafter_without_a_reference_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = f"""
[[arms]]
name = "reference"
reference = {{ forward = "mine.training:logits", path = ["{ROOT}"] }}
[[arms]]
name = "shipped"
"""
    spec = reference_experiment(tmp_path, bare)
    assert run(["trace", str(spec), "--arm", "shipped", "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert "reference.trace_map" in err and "no built-in name map" in err
    other = f"""
[[arms]]
name = "reference"
speculative_config = {{ method = "eagle3", model = "{MODELS / "eagle3-trained"}" }}
reference = {{ forward = "bench.demo.training_forward:eagle3_logits", path = ["{ROOT}"] }}
[[arms]]
name = "shipped"
"""
    alone = reference_experiment(tmp_path, other, name="alone")
    assert run(["trace", str(alone), "--arm", "shipped", "--out", str(tmp_path / "t")]) == 2
    assert "no reference arm drives the drafter" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()


def test_the_report_renders_each_trace_beside_the_run_and_refuses_one_it_cannot_read(
    tmp_path: Path,
) -> None:
    from bench.records import ConfigField, TensorDiff, TraceResult
    from bench.report import render_report
    from bench.simulate import simulate_results

    root = simulate_results(tmp_path / "run", {"reference": 0.0, "shipped": -0.3}, prompts=10)
    diff = {"engine_module": "e", "reference_module": "r", "shape": [5, 8], "steps": 3,
            "max_abs": 9.0, "cosine": 0.1}  # fmt: skip
    trace = TraceResult(
        experiment="sim", arm="shipped", reference_arm="reference", forward="m:f", probe="s/1",
        steps=3, threshold=0.02,
        tensors=[TensorDiff(name="layers.0.q_rope", rel=1.4, agrees=False, **diff)],
        recomputed=[TensorDiff(name="target.aux", rel=0.004, agrees=True, **diff)],
        first_divergence="layers.0.q_rope", verdict="draft layer 0 q after rope departs",
        config=[ConfigField(field="layers.0.rotary_dim", engine=16, reference=64, differs=True)],
        notes=["served layers.0.rotary_dim 16 of 64; reference 64 of 64"],
    )  # fmt: skip
    (root / "trace" / "shipped").mkdir(parents=True)
    (root / "trace" / "shipped" / "trace.json").write_text(trace.model_dump_json())
    md = (render_report(root).parent / "report.md").read_text()
    section = md[md.index("## Where serving departs: shipped against reference") :]
    assert "draft layer 0 q after rope departs." in section
    assert "served layers.0.rotary_dim 16 of 64; reference 64 of 64" in section
    assert "| layers.0.q_rope | 1.4 |" in section and "| target.aux | 0.004 |" in section
    (root / "trace" / "shipped" / "trace.json").write_text('{"schema_version": 9}')
    assert run(["report", str(root)]) == 2
