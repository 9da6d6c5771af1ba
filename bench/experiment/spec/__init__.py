"""The experiment file (TOML) as frozen pydantic models and its loader: `[experiment]`,
`[server]`, `[[arms]]` (`experiment_file`), reading a file into them (`document_loading`:
no git, nothing written), `[probes]` (`probes_section`), `[resources]` and containers
(`resources`), margins and the primary family (`margins`), `[sweep]` and the arms it
generates (`sweep`), `[bisect]` and a git range's template arm (`bisect_section`),
`[screen]` (`screen_section`), a reference arm's forward (`reference_arm`); which
settings are secret and their redacted form (`secret_settings`); how a validation error
becomes one line (`error_lines`), and the reference page generated from the models
(`reference_page`)."""

from bench.experiment.spec.bisect_section import git_range
from bench.experiment.spec.document_loading import (
    load_spec,
    parse_spec,
    read_document,
    validate_document,
)
from bench.experiment.spec.experiment_file import (
    ArgValue,
    ArmSpec,
    Experiment,
    ServerSection,
    json_schema,
    resolve_path,
)
from bench.experiment.spec.probes_section import ProbesSection
from bench.experiment.spec.reference_arm import ReferenceForward
from bench.experiment.spec.reference_page import experiment_reference_markdown
from bench.experiment.spec.resources import ContainerSpec, ResourcesSection
from bench.experiment.spec.secret_settings import (
    REDACTED,
    auth_headers,
    is_secret_env,
    is_secret_flag,
    redact_args,
    redact_env,
    refuse_secret_flag,
    scrub,
    secret_flag_env,
    secret_values,
)
from bench.experiment.spec.sweep import sweep_cells

__all__ = [
    "REDACTED",
    "ArgValue",
    "ArmSpec",
    "ContainerSpec",
    "Experiment",
    "ProbesSection",
    "ReferenceForward",
    "ResourcesSection",
    "ServerSection",
    "auth_headers",
    "experiment_reference_markdown",
    "git_range",
    "is_secret_env",
    "is_secret_flag",
    "json_schema",
    "load_spec",
    "parse_spec",
    "read_document",
    "redact_args",
    "redact_env",
    "refuse_secret_flag",
    "resolve_path",
    "scrub",
    "secret_flag_env",
    "secret_values",
    "sweep_cells",
    "validate_document",
]
