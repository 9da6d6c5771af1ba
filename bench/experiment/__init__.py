"""The experiment: the TOML file, how each arm is merged over `[server]`, what one boot of an
arm runs (launch plan: argv, environment, config overlays, code patches) and the probe sets.
Nothing here starts a server; `bench.run` does."""

from bench.experiment._arms import ResolvedArm, resolve_arm, speculative_and_concurrency
from bench.experiment._collections import humaneval_probe_lines, write_probe_lines
from bench.experiment._container import (
    ContainerRef,
    container_name,
    container_supports_per_request,
)
from bench.experiment._envs import (
    REDACTED,
    base_env,
    interpreter_vllm_version,
    redact_env,
    supports_per_request_metrics,
    supports_per_request_timing,
    vllm_package_dir,
)
from bench.experiment._importers import FORMATS as PROMPT_FORMATS
from bench.experiment._importers import Imported, import_prompts
from bench.experiment._launch import (
    LaunchPlan,
    MemberCommand,
    check_patches_applied,
    launch_plan,
    member_command,
    render_args,
)
from bench.experiment._lint import LintReport, lint_arm, lint_file, lint_spec
from bench.experiment._lint_layers import OFFSET_LAYER_METHODS
from bench.experiment._lint_text import Finding
from bench.experiment._materialize import (
    ArmView,
    command_line,
    inspect_experiment,
    materialize_arm,
    member_title,
)
from bench.experiment._measurement import Measurement, measurement
from bench.experiment._overlay import effective_config, merge_patch
from bench.experiment._preflight import Preflight, preflight
from bench.experiment._preflight_resume import (
    RESUME_MAY_CHANGE,
    probe_sets_sha256,
    resume_changes,
)
from bench.experiment._probesets import Probe, ProbeSet, load_probe_set, load_probe_sets
from bench.experiment._reference import experiment_reference_markdown
from bench.experiment._spec import (
    ArgValue,
    ArmSpec,
    ContainerSpec,
    Experiment,
    ProbesSection,
    ResourcesSection,
    ServerSection,
    json_schema,
    load_spec,
    parse_spec,
    resolve_path,
)
from bench.experiment._sweep import SweepSection, sweep_cells
from bench.experiment._synthetic import synthetic_truth

__all__ = [
    "OFFSET_LAYER_METHODS",
    "PROMPT_FORMATS",
    "REDACTED",
    "RESUME_MAY_CHANGE",
    "ArgValue",
    "ArmSpec",
    "ArmView",
    "ContainerRef",
    "ContainerSpec",
    "Experiment",
    "Finding",
    "Imported",
    "LaunchPlan",
    "LintReport",
    "Measurement",
    "MemberCommand",
    "Preflight",
    "Probe",
    "ProbeSet",
    "ProbesSection",
    "ResolvedArm",
    "ResourcesSection",
    "ServerSection",
    "SweepSection",
    "base_env",
    "check_patches_applied",
    "command_line",
    "container_name",
    "container_supports_per_request",
    "effective_config",
    "experiment_reference_markdown",
    "humaneval_probe_lines",
    "import_prompts",
    "inspect_experiment",
    "interpreter_vllm_version",
    "json_schema",
    "launch_plan",
    "lint_arm",
    "lint_file",
    "lint_spec",
    "load_probe_set",
    "load_probe_sets",
    "load_spec",
    "materialize_arm",
    "measurement",
    "member_command",
    "member_title",
    "merge_patch",
    "parse_spec",
    "preflight",
    "probe_sets_sha256",
    "redact_env",
    "render_args",
    "resolve_arm",
    "resolve_path",
    "resume_changes",
    "speculative_and_concurrency",
    "supports_per_request_metrics",
    "supports_per_request_timing",
    "sweep_cells",
    "synthetic_truth",
    "vllm_package_dir",
    "write_probe_lines",
]
