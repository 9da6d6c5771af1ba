"""What one boot of an arm runs: the arm merged over `[server]` (`arms`), the launch plan and
each member's command (`launch_plan`), checkpoint-config overlays (`overlays`), code patches
and the proof they applied (`patches`, with `bench/experiment/runtime/`), unified diffs applied
to an arm's own build (`code_diffs`), containers
(`containers`, the GPUs they get: `container_gpus`, the image each node holds:
`container_images`), the server's environment and what an interpreter's vLLM can do
(`environment`), how a boot measures its probes (`measurement`), how long it waits for /health
(`readiness`), and a selftest's synthetic
truth (`synthetic`). Nothing here starts a process; `bench.run` does."""

from bench.experiment.launch.arms import ResolvedArm, resolve_arm, speculative_and_concurrency
from bench.experiment.launch.code_diffs import (
    MODELS_PACKAGE,
    AppliedDiff,
    files_reader,
    is_diff,
    loaded_model_modules,
    model_modules,
    same_code,
)
from bench.experiment.launch.container_images import (
    IMAGE_DIFFERS,
    content_digest,
    differs,
    image_id,
)
from bench.experiment.launch.containers import (
    PROBE_TIMEOUT_S,
    ContainerRef,
    container_name,
    mount_paths,
)
from bench.experiment.launch.environment import (
    base_env,
    interpreter_env,
    interpreter_vllm_version,
    supports_per_request_metrics,
    supports_per_request_timing,
    vllm_package_dir,
)
from bench.experiment.launch.launch_plan import (
    SERVER_MODULE,
    LaunchPlan,
    MemberCommand,
    check_patches_applied,
    launch_plan,
    member_command,
)
from bench.experiment.launch.measurement import Measurement, measurement
from bench.experiment.launch.overlays import (
    effective_config,
    materialize_overlay,
    merge_patch,
    mirror_rope_fields,
)
from bench.experiment.launch.patches import (
    RUNTIME_DIR,
    build_patch_dir,
    check_patch_report,
    read_report,
)
from bench.experiment.launch.readiness import ranks_per_node, ready_timeout
from bench.experiment.launch.synthetic import synthetic_truth
from bench.experiment.spec import REDACTED, redact_args, redact_env, scrub, secret_values

__all__ = [
    "IMAGE_DIFFERS",
    "MODELS_PACKAGE",
    "PROBE_TIMEOUT_S",
    "REDACTED",
    "RUNTIME_DIR",
    "SERVER_MODULE",
    "AppliedDiff",
    "ContainerRef",
    "LaunchPlan",
    "Measurement",
    "MemberCommand",
    "ResolvedArm",
    "base_env",
    "build_patch_dir",
    "check_patch_report",
    "check_patches_applied",
    "container_name",
    "content_digest",
    "differs",
    "effective_config",
    "files_reader",
    "image_id",
    "interpreter_env",
    "interpreter_vllm_version",
    "is_diff",
    "launch_plan",
    "loaded_model_modules",
    "materialize_overlay",
    "measurement",
    "member_command",
    "merge_patch",
    "mirror_rope_fields",
    "model_modules",
    "mount_paths",
    "ranks_per_node",
    "read_report",
    "ready_timeout",
    "redact_args",
    "redact_env",
    "resolve_arm",
    "same_code",
    "scrub",
    "secret_values",
    "speculative_and_concurrency",
    "supports_per_request_metrics",
    "supports_per_request_timing",
    "synthetic_truth",
    "vllm_package_dir",
]
