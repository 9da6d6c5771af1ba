"""Resume integrity without booting: what a resume may change (recorded in the manifest), what
it must refuse (named with a short diff), robustness to fields a later specab adds, arms
without an ok boot, mixed versions refused at load, and the repeating-failure rule."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from integrity_helpers import ok_boot, start_dir
from test_bad_inputs import GOOD, base_dir, write_experiment

from bench.errors import SpecabError
from bench.experiment import (
    build_manifest,
    load_probe_sets,
    load_spec,
    probe_sets_sha256,
    resume_changes,
)
from bench.experiment.manifest import describe, diff, flatten
from bench.records import BootRecord, Manifest
from bench.run.driver import RepeatGuard, failure_signature, stop_message
from bench.store import ResultsWriter, load_manifest, load_results


def _manifest(root: Path, **changes: Any) -> tuple[Path, dict[str, Any]]:
    doc = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        section, field = key.split("__")
        doc[section][field] = value
    spec = write_experiment(root, doc)
    return spec, build_manifest(load_spec(spec), spec)


@pytest.fixture
def started(tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    spec = base_dir(tmp_path)
    res = start_dir(spec, tmp_path / "res", {"base": 1, "fix": 1})
    return spec, res, load_manifest(res)


def test_an_unchanged_experiment_resumes_as_is(started: tuple[Path, Path, Any]) -> None:
    spec, res, old = started
    assert resume_changes(old, build_manifest(load_spec(spec), spec), where=res) == {}


def test_more_boots_are_accepted_and_recorded_in_the_manifest(
    started: tuple[Path, Path, Any],
) -> None:
    spec, res, old = started
    _, new = _manifest(spec.parent, experiment__boots_per_arm=5, server__ready_timeout_s=900.0)
    changes = resume_changes(old, new, where=res)
    assert changes == {
        "experiment.boots_per_arm": (2, 5),
        "server.ready_timeout_s": (None, 900.0),
    }
    ResultsWriter.create(res, new, resume=True, compare=lambda o: resume_changes(o, new, where=res))
    now = load_manifest(res)
    assert now.spec is not None and now.spec.experiment.model_extra["boots_per_arm"] == 5
    assert now.spec_sha256 == new.spec_sha256 != old.spec_sha256
    assert now.created_at == old.created_at  # still the directory's start
    assert now.resumes[0]["changed"]["experiment.boots_per_arm"] == [2, 5]
    # a second resume with the same file changes nothing more
    assert resume_changes(now, new, where=res) == {}


def test_a_field_a_later_specab_adds_with_its_default_is_not_a_change(
    started: tuple[Path, Path, Any],
) -> None:
    """The directory was started by a specab without `allow_noop_patches` and `ignore_eos`:
    its spec hash differs, its meaning does not."""
    spec, res, old = started
    older = old.to_json()
    del older["spec"]["server"]["allow_noop_patches"]
    del older["spec"]["probes"]["ignore_eos"]
    new = build_manifest(load_spec(spec), spec)
    assert load_spec(spec).model_validate(older["spec"]).sha256() == new.spec_sha256
    assert resume_changes(Manifest.model_validate(older), new, where=res) == {}
    # but a field this specab does not know is refused, naming the version that wrote it
    older["spec"]["server"]["from_the_future"] = 1
    older["specab_version"] = "9.0"
    with pytest.raises(SpecabError, match=r"specab 9\.0.*from_the_future"):
        resume_changes(Manifest.model_validate(older), new, where=res)


def test_a_changed_arm_is_refused_naming_it_and_what_changed(
    started: tuple[Path, Path, Any],
) -> None:
    spec, res, old = started
    _, new = _manifest(spec.parent, server__args={"enforce-eager": True, "max-model-len": 256})
    with pytest.raises(SpecabError) as info:
        resume_changes(old, new, where=res)
    err = info.value
    assert err.field == "arms(base)" and err.file == str(res)
    assert "args.max-model-len: (absent) → 256" in err.problem
    assert "new results directory" in (err.fix or "")


def test_an_arm_without_an_ok_boot_may_change(tmp_path: Path) -> None:
    spec = base_dir(tmp_path)
    res = start_dir(spec, tmp_path / "res", {"base": 1})  # fix never booted ok
    (tmp_path / "fix.py").write_text((tmp_path / "fix.py").read_text() + "# repaired\n")
    new = build_manifest(load_spec(spec), spec)
    old = load_manifest(res)
    with pytest.raises(SpecabError, match="arm 'fix'"):
        resume_changes(old, new, where=res)  # every arm counts as proven by default
    changes = resume_changes(old, new, where=res, proven={"base"})
    assert list(changes) == ["arms(fix).definition.patches(fix).sha256"]
    ResultsWriter.create(
        res, new, resume=True, compare=lambda o: resume_changes(o, new, where=res, proven={"base"})
    )
    # the manifest now holds the repaired arm: once it has boots, the next resume compares it
    assert resume_changes(load_manifest(res), new, where=res) == {}
    # a server-level change touches the proven arm too: refused
    _, moved = _manifest(tmp_path, server__env={"HF_HUB_OFFLINE": "1", "X": "1"})
    with pytest.raises(SpecabError, match="arm 'base'"):
        resume_changes(load_manifest(res), moved, where=res, proven={"base"})
    # without any ok boot, anything goes
    assert resume_changes(load_manifest(res), moved, where=res, proven=set())


def test_probe_sets_and_seeding_must_not_change(started: tuple[Path, Path, Any]) -> None:
    spec, res, old = started
    new = build_manifest(load_spec(spec), spec, orchestration={"common_random_numbers": True})
    with pytest.raises(SpecabError, match="without --common-random-numbers"):
        resume_changes(old, new, where=res)
    (spec.parent / "probes.jsonl").write_text('{"id": "a", "prompt": "def g():"}\n')
    new = build_manifest(load_spec(spec), spec)
    with pytest.raises(SpecabError) as info:
        resume_changes(old, new, where=res)
    assert info.value.field == "probes.sets" and "sets(probes).sha256" in info.value.problem


def test_diff_keys_named_tables_by_name_and_shortens_values() -> None:
    old = {"patches": [{"name": "a", "sha256": "1" * 64}], "args": {"x": 1}, "sets": ["p"]}
    new = {"patches": [{"name": "a", "sha256": "2" * 64}], "args": {"x": 2}, "sets": ["p", "q"]}
    assert flatten(old)["patches(names)"] == ["a"]
    changes = diff(old, new)
    assert list(changes) == ["args.x", "patches(a).sha256", "sets"]
    text = describe(changes)
    assert "patches(a).sha256: 111111111111… → 222222222222…" in text
    assert describe({f"k{i}": (i, i + 1) for i in range(5)}).endswith("(and 2 more)")


def test_the_probe_set_hash_covers_names_contents_and_order(tmp_path: Path) -> None:
    spec = base_dir(tmp_path)
    one = probe_sets_sha256(load_probe_sets(load_spec(spec), spec))
    (tmp_path / "more.jsonl").write_text('{"id": "z", "prompt": "x"}\n')
    doc = json.loads(json.dumps(GOOD))
    doc["probes"]["sets"] = ["probes.jsonl", "more.jsonl"]
    two = load_probe_sets(load_spec(write_experiment(tmp_path, doc)), spec)
    assert probe_sets_sha256(two) != probe_sets_sha256(two[::-1]) != one
    assert probe_sets_sha256(two[:1]) == one
    (tmp_path / "more.jsonl").write_text('{"id": "z", "prompt": "y"}\n')
    assert probe_sets_sha256(load_probe_sets(load_spec(spec), spec)) != probe_sets_sha256(two)


def test_load_refuses_mixed_versions_but_not_unknown_or_failed_ones(tmp_path: Path) -> None:
    spec = base_dir(tmp_path)
    res = start_dir(spec, tmp_path / "res", {"base": 1, "fix": 1})
    writer = ResultsWriter(res)
    record, probes = ok_boot(spec, "base", 1, order=2)
    writer.write_boot(record.model_copy(update={"definition_sha256": None}), probes)  # old file
    failed = record.model_copy(
        update={
            "boot": 2,
            "boot_id": "base__b002__a1",
            "status": "failed",
            "error": "boom",
            "definition_sha256": "f" * 64,
            **dict.fromkeys(
                ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "accepted_per_pos")
            ),
        }
    )
    writer.write_boot(failed)
    assert len(load_results(res).ok_boots()) == 3
    record, probes = ok_boot(spec, "base", 3, order=4, definition_sha256="e" * 64)
    writer.write_boot(record, probes)
    with pytest.raises(SpecabError, match=r"arm 'base' ran 2 different definitions"):
        load_results(res)


def _failure(arm: str, error: str, *, ready: bool = False, status: str = "failed") -> BootRecord:
    now = datetime.now(UTC)
    ok = status == "ok"
    counts = {"num_drafts": 1, "num_draft_tokens": 2, "num_accepted_tokens": 1} if ok else {}
    return BootRecord(
        experiment="e",
        arm=arm,
        boot=0,
        attempt=1,
        boot_id=f"{arm}__b000__a1",
        status="ok" if ok else "failed",
        error=None if ok else error,
        order=0,
        block=0,
        ready_at=now if ready else None,
        **counts,
        **({"accepted_per_pos": (1, 0)} if ok else {}),
    )


def test_the_same_startup_error_twice_is_certain_to_repeat() -> None:
    crash = "server exited with code 1 during startup: ValueError: no model at /m (pid {})"
    guard = RepeatGuard()
    assert not guard.repeats(_failure("a", crash.format(101)))
    assert guard.repeats(_failure("a", crash.format(202)))  # pids differ, the error does not
    # another arm keeps its own history
    assert not guard.repeats(_failure("b", crash.format(303)))
    # a patch check failure (after /health) is a startup failure too
    patch = "patch 'fix' failed in process EngineCore_DP0 (pid 7): RuntimeError: bug"
    assert not guard.repeats(_failure("c", patch, ready=True))
    assert guard.repeats(_failure("c", patch.replace("7", "8"), ready=True))


def test_what_is_not_certain_to_repeat() -> None:
    crash = "server exited with code 1 during startup: OSError: disk full"
    guard = RepeatGuard(proven=["proven"])
    for _ in range(3):  # the arm booted ok before: it may be transient
        assert not guard.repeats(_failure("proven", crash))
    died = "request failed: server disconnected"
    assert failure_signature(_failure("x", died, ready=True)) is None  # mid-probe
    assert not guard.repeats(_failure("x", died, ready=True))
    assert not guard.repeats(_failure("x", died, ready=True))
    # two different errors, or an infrastructure failure in between, are no repetition
    assert not guard.repeats(_failure("y", crash))
    assert not guard.repeats(_failure("y", "ray: WorkerCrashedError: the worker died"))
    assert not guard.repeats(_failure("y", crash))
    assert not guard.repeats(_failure("y", "server not healthy after 600 s"))
    # a node without the arm's image (or with another under its tag) is that node's: barred
    for said in (
        "gang member 1 (node h3) could not prepare its node: cannot read vLLM in image i:1",
        "another image under i:1 on node h3: sha256:aa, the head's is sha256:bb",
    ):
        assert not guard.repeats(_failure("z", said)) and not guard.repeats(_failure("z", said))
    # an ok boot proves the arm
    guard.ok("y")
    assert not guard.repeats(_failure("y", "server not healthy after 600 s"))


def test_an_arm_drafting_nothing_in_two_boots_stops_the_run(tmp_path: Path) -> None:
    """A boot that drafted nothing is ok (its speed counts) but proves nothing of the arm:
    two in a row on an arm that never drafted stop the run, naming why."""
    said = "no drafts: speculative decoding off? (none of 20 requests drafted) (server log: x)"
    undrafted = _failure("a", "", status="ok").model_copy(update={"no_drafts": said})
    guard = RepeatGuard()
    assert not guard.repeats(undrafted) and guard.suspect("a")
    assert guard.repeats(undrafted.model_copy(update={"no_drafts": said.replace("20", "24")}))
    assert "drafted nothing in two boots in a row" in stop_message(undrafted, tmp_path)
    # an arm that drafted before may have a start-up that drafts only sometimes: no stop
    guard = RepeatGuard(proven=["a"])
    assert not guard.repeats(undrafted) and not guard.repeats(undrafted)
    with pytest.raises(ValueError, match="no_drafts describes an ok boot"):
        BootRecord.model_validate({**_failure("a", "x").model_dump(), "no_drafts": said})
    # the progress says it as the boot lands, in batch logs and on a terminal alike
    from rich.console import Console

    from bench.run.driver import ProgressState, make_progress

    for terminal in (False, True):
        console = Console(record=True, force_terminal=terminal, width=300)
        with make_progress(ProgressState(["a"], {"a": 3}, {}), console, quiet=False) as progress:
            progress.finished(undrafted, 1.0)
        text = console.export_text()
        assert "flagged" in text and "no drafts: speculative decoding off?" in text


def test_two_readiness_timeouts_stop_the_run_naming_the_timeout(tmp_path: Path) -> None:
    """A cold start of a large model can outlast the deadline twice: the run stops (every
    retry would time out alike) and says which setting to raise, and that unset it grows
    with the model."""
    slow = "server not healthy after 600 s (raise server.ready_timeout_s if the model is just slow)"
    guard = RepeatGuard()
    assert not guard.repeats(_failure("big", slow))
    record = _failure("big", slow)
    assert guard.repeats(record)
    text = stop_message(record, tmp_path)
    assert "raise [server] ready_timeout_s" in text and "specab validate prints it" in text
    crash = stop_message(_failure("x", "server exited with code 1 during startup: E"), tmp_path)
    assert "ready_timeout_s" not in crash


def test_the_readiness_deadline_grows_with_the_weights_and_gpu_ranks(tmp_path: Path) -> None:
    """Unset, the deadline is 600 s + 20 s per GiB a node loads + 120 s per GPU rank on a
    node: the tiny CPU demo keeps 600 s, a ~149 GB model over two GPU nodes at TP 2 gets
    about 2,200 s; a value the experiment sets is used as it is."""
    import tomllib

    from bench.experiment import parse_spec, ready_timeout, resolve_arm

    big = tmp_path / "big"
    big.mkdir()
    (big / "config.json").write_text("{}")
    for i in range(2):  # sparse files: their size on disk, no bytes written
        with open(big / f"model-{i}.safetensors", "wb") as f:
            f.truncate(int(74.5 * 2**30))
    text = (
        f'[experiment]\nname = "t"\n[server]\nmodel = "{big}"\n'
        'args = { tensor-parallel-size = 2 }\n[probes]\nsets = ["p.jsonl"]\n'
        '[resources]\nnodes = 2\ngpu = 1\n[[arms]]\nname = "a"\n'
    )
    spec_file = tmp_path / "e.toml"
    spec = parse_spec(tomllib.loads(text), spec_file)
    arm = resolve_arm(spec, spec_file, "a")
    seconds, how = ready_timeout(arm, None, 1)
    assert seconds == round(600 + 20 * 74.5 + 120 * 1) and "74.5 GiB" in how
    assert ready_timeout(arm, None, 0)[0] == round(600 + 20 * 74.5)  # CPU: nothing compiled
    assert ready_timeout(arm, 900.0, 1) == (900.0, "server.ready_timeout_s")
    demo = Path(__file__).resolve().parents[2] / "arms" / "demo" / "demo.toml"
    from bench.experiment import load_spec

    dspec = load_spec(demo)
    dspec = dspec.model_copy(
        update={"server": dspec.server.model_copy(update={"ready_timeout_s": None})}
    )
    assert ready_timeout(resolve_arm(dspec, demo, "shipped"), None, 0)[0] == 600
