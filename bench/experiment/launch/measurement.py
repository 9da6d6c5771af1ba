"""How a boot of an arm measures its probes, decided once from the experiment file and what the
arm's vLLM can do (read from its source): where per-probe acceptance comes from, whether the
server reports per-request timings (TTFT, TPOT, queue time), how many probes are in flight,
and the flags the boot adds to the server's command line for that.

`measurement()` is the one rule: `specab validate` prints it, run-ab checks it before the
results directory exists, and the boot uses it (with the launch plan's PYTHONPATH). Every
combination a server cannot measure is a SpecabError naming the field and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.errors import SpecabError
from bench.experiment.launch.arms import ResolvedArm
from bench.experiment.launch.containers import (
    container_supports_per_request,
    container_supports_timing,
)
from bench.experiment.launch.environment import (
    supports_per_request_metrics,
    supports_per_request_timing,
)
from bench.experiment.spec import Experiment
from bench.records import AcceptanceSource

SPEC_FLAG = "per-request-spec-decode-metrics"  # as a key of ResolvedArm.args
TIMING_FLAG = "enable-per-request-metrics"
NO_STATS_FLAG = "disable-log-stats"  # vLLM refuses per-request timings without engine stats


@dataclass(frozen=True)
class Measurement:
    """What a boot of one arm records per probe, and the flags that make the server report it."""

    speculative: bool  # False: speculative_config = false (counts are zero, K = 0)
    source: AcceptanceSource  # where per-probe counts come from
    timing: bool  # the responses carry time_to_first_token_ms, mean_itl_ms, queue_time_ms
    concurrency: int  # probes in flight at once
    flags: tuple[str, ...]  # added to the server's argv by the boot

    def describe(self) -> str:
        """One line for `specab validate`."""
        acc = f"acceptance {self.source}" if self.speculative else "no speculation (speed only)"
        timing = "server timings per request" if self.timing else "no server timings"
        flags = f"; adds {' '.join(self.flags)}" if self.flags else ""
        return f"{acc}, {timing}, concurrency {self.concurrency}{flags}"


def _set(arm: ResolvedArm, flag: str) -> bool:
    return arm.args.get(flag) not in (None, False, "none")


def _where(spec: Experiment, arm: str, field: str) -> str:
    """The field path of a per-arm setting: the arm's when it sets it, else [probes]."""
    return (
        f"arms({arm}).{field}" if getattr(spec.arm(arm), field) is not None else f"probes.{field}"
    )


def measurement(
    spec: Experiment, spec_file: str | Path, arm: ResolvedArm, *, pythonpath: str | None = None
) -> Measurement:
    """The measurement of `arm` (see the module docstring). `pythonpath`: the server's
    PYTHONPATH (default: the arm's env), where its vLLM is looked up."""
    pp = arm.env.get("PYTHONPATH", "") if pythonpath is None else pythonpath
    source = _source(spec, spec_file, arm, pp)
    timing = _timing(spec, spec_file, arm, pp)
    c = arm.concurrency
    if c > 1 and arm.speculative and source != "per_request":
        why = (
            "probes.acceptance_source = metrics_delta"
            if spec.probes.acceptance_source == "metrics_delta"
            else f"the arm's vLLM ({arm.python}) has no --{SPEC_FLAG} detailed"
        )
        raise SpecabError(
            f"concurrency = {c} needs per-request acceptance metrics ({why}): /metrics "
            "deltas cannot attribute counts to probes that run at the same time",
            file=spec_file,
            field=_where(spec, arm.name, "concurrency"),
            fix='set concurrency = 1, or acceptance_source = "auto" with a vLLM that has '
            f"--{SPEC_FLAG} (>= 0.32)",
        )
    flags: list[str] = []
    if arm.speculative and source == "per_request" and not _set(arm, SPEC_FLAG):
        flags += [f"--{SPEC_FLAG}", "detailed"]
    if timing and not _set(arm, TIMING_FLAG):
        flags.append(f"--{TIMING_FLAG}")
    return Measurement(arm.speculative, source, timing, c, tuple(flags))


def _source(spec: Experiment, spec_file: str | Path, arm: ResolvedArm, pp: str) -> AcceptanceSource:
    wanted = spec.probes.acceptance_source
    if not arm.speculative:
        if _set(arm, SPEC_FLAG):
            raise SpecabError(
                f"--{SPEC_FLAG} needs speculative decoding, which this arm turns off",
                file=spec_file,
                field=f"arms({arm.name}).args",
                fix=f"remove {SPEC_FLAG} from the no-speculation arm",
            )
        return "metrics_delta"  # zero counts, checked against a /metrics delta of zero
    if not arm.speculative_config:
        raise SpecabError(
            "no speculative_config: this arm would not speculate",
            file=spec_file,
            field=f"arms({arm.name}).speculative_config",
            fix="set speculative_config in [server] or the arm, or speculative_config = false "
            "for a no-speculation arm",
        )
    if wanted == "metrics_delta":
        return wanted
    if _set(arm, SPEC_FLAG):
        return "per_request"
    ok = _has_per_request(arm, pp)
    if wanted == "per_request" and not ok:
        raise SpecabError(
            f"the server's vLLM ({arm.python}) has no --{SPEC_FLAG} detailed",
            file=spec_file,
            field="probes.acceptance_source",
            fix='set acceptance_source = "auto" or "metrics_delta"',
        )
    return "per_request" if ok else "metrics_delta"


def _timing(spec: Experiment, spec_file: str | Path, arm: ResolvedArm, pp: str) -> bool:
    wanted = spec.probes.timing_source
    if _set(arm, TIMING_FLAG):
        return True
    if wanted == "off":
        return False
    no_stats = _set(arm, NO_STATS_FLAG)
    ok = not no_stats and _has_timing(arm, pp)
    if wanted == "per_request" and not ok:
        problem = (
            f"--{TIMING_FLAG} needs engine statistics, which --{NO_STATS_FLAG} turns off"
            if no_stats
            else f"the server's vLLM ({arm.python}) has no --{TIMING_FLAG} (vLLM >= 0.32)"
        )
        raise SpecabError(
            problem,
            file=spec_file,
            field="probes.timing_source",
            fix='set timing_source = "auto" or "off"'
            + (f", or remove {NO_STATS_FLAG}" if no_stats else ""),
        )
    return ok


# A containerized server's vLLM is read inside its image (the host's interpreter is not it).
def _has_per_request(arm: ResolvedArm, pp: str) -> bool:
    if arm.container is not None:
        return container_supports_per_request(arm.container, arm.python)
    return supports_per_request_metrics(arm.python, pp)


def _has_timing(arm: ResolvedArm, pp: str) -> bool:
    if arm.container is not None:
        return container_supports_timing(arm.container, arm.python)
    return supports_per_request_timing(arm.python, pp)
