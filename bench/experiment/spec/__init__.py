"""The experiment file (TOML) as frozen pydantic models and its loader: `[experiment]`,
`[server]`, `[[arms]]` (`experiment_file`), `[probes]` (`probes_section`), `[resources]` and
containers (`resources`), margins and the primary family (`margins`), `[sweep]` and the arms
it generates (`sweep`); how a validation error becomes one line (`error_lines`), and the
reference page generated from the models (`reference_page`)."""

from bench.experiment.spec.experiment_file import (
    ArgValue,
    ArmSpec,
    Experiment,
    ServerSection,
    json_schema,
    load_spec,
    parse_spec,
    resolve_path,
)
from bench.experiment.spec.probes_section import ProbesSection
from bench.experiment.spec.reference_page import experiment_reference_markdown
from bench.experiment.spec.resources import ContainerSpec, ResourcesSection
from bench.experiment.spec.sweep import SweepSection, sweep_cells

__all__ = [
    "ArgValue",
    "ArmSpec",
    "ContainerSpec",
    "Experiment",
    "ProbesSection",
    "ResourcesSection",
    "ServerSection",
    "SweepSection",
    "experiment_reference_markdown",
    "json_schema",
    "load_spec",
    "parse_spec",
    "resolve_path",
    "sweep_cells",
]
