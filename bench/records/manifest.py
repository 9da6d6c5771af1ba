"""manifest.json (docs/results.md, schema_version 1) as a typed record.

`bench.experiment.build_manifest` builds it, `bench.store` writes it and loads it back
through `Manifest.model_validate`; every other reader (statistics, report, gate, export,
resume) reads these fields, never the raw JSON. A missing or malformed field is refused at
load, naming `manifest.json` and the field.

The contract is additive: a newer specab or another tool may write keys this one does not
know. Those are kept as they are (`extra="allow"`) and written back unchanged on resume, so
these models forbid nothing they do not read; every field they do read is typed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Read(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class ManifestArm(_Read):
    """One arm as the run resolved it."""

    name: str = Field(description="Arm name.")
    definition: dict[str, Any] = Field(
        description="Everything that defines the arm (args, env with secrets redacted, "
        "speculative_config, patch and overlay hashes, interpreter and its vLLM version)."
    )
    definition_sha256: str = Field(description="sha256 of the definition: equal = same arm.")


class ManifestProbeSet(_Read):
    """One probe set the boots ran."""

    name: str = Field(description="Probe set name (file stem).")
    path: str | None = Field(None, description="The path the experiment file gave.")
    sha256: str = Field(description="sha256 of the probe set's content.")
    count: int = Field(ge=0, description="Probes in the set.")


class SpecExperiment(_Read):
    """The fields of the resolved spec's `[experiment]` table that readers use; the rest of
    the table is kept as written."""

    baseline: str | None = Field(None, description="Baseline arm.")
    alpha: float | None = Field(None, description="Two-sided level of the primary family.")
    margins: dict[str, float] | None = Field(None, description="Metric -> margin.")
    looks: list[int] | None = Field(None, description="Planned sequential looks, boots/arm.")
    primary_metrics: list[str] | None = Field(None, description="The primary Holm family.")


class SpecProbes(_Read):
    """The fields of the resolved spec's `[probes]` table that readers use."""

    temperature: float | None = Field(None, description="Sampling temperature of the probes.")


class ManifestSpec(_Read):
    """The experiment file as resolved (validated by the experiment models on resume)."""

    experiment: SpecExperiment = Field(
        default_factory=SpecExperiment, description="The [experiment] table."
    )
    probes: SpecProbes = Field(default_factory=SpecProbes, description="The [probes] table.")


class SweepCell(_Read):
    """One generated arm of a sweep."""

    arm: str = Field(description="The arm this cell generated.")
    group: str = Field(description="Its selection group (levels of the group_by fields).")
    levels: dict[str, Any] = Field(default_factory=dict, description="group_by field -> level.")
    cost: list[int] = Field(description="[speculative tokens per step, grid order]: tie-break.")
    speculative: bool = Field(True, description="False: the no-speculation arm of its level.")


class ManifestSweep(_Read):
    """The `[sweep]` table as resolved, plus every generated arm's cell."""

    objective: str = Field(description="What the selection maximizes, per boot.")
    margin: float = Field(description="Indifference zone (relative for tokens/s).")
    tie_break: str = Field(
        "fewest_speculative_tokens", description="Among configurations within the margin."
    )
    group_by: list[str] = Field(default_factory=list, description="Fields selected apart.")
    min_mean_accepted_length: float | None = Field(None, description="Feasibility bound.")
    min_acceptance_pos0: float | None = Field(None, description="Feasibility bound.")
    cells: list[SweepCell] = Field(default_factory=list, description="One per generated arm.")


# The sequential looks (boots per arm) of a screening and of a history's ends, unless a file
# gives its own: these below the last, then the last. A plan's longer search continues them.
LOOKS = (3, 6, 10, 16)
PLAN_LOOKS = (*LOOKS, 25, 40, 64, 100)


def looks_ending_at(last: int, schedule: Sequence[int] = LOOKS) -> tuple[int, ...]:
    """The looks of `schedule` below `last`, then `last`."""
    return (*(n for n in schedule if n < last), last)


# Fresh boots a side at which a proposed culprit and the point before it are compared before
# the culprit is named (`bench.stats.bisect.confirm`); a point's plan holds the last on top of
# its search boots.
CONFIRM_LOOKS = (3, 6, 10)


def planned_boots(boots_per_point: int, endpoint_looks: Sequence[int]) -> int:
    """Boots a point of a history may take: its search boots (an end's last look, an inner
    point's cap), then one confirmation's fresh boots. The driver plans this many."""
    return max(boots_per_point, *endpoint_looks) + CONFIRM_LOOKS[-1]


class ManifestBisect(_Read):
    """The `[bisect]` table as resolved: the arms, in order, are the history."""

    metric: str = Field(description="The metric whose change is searched for.")
    margin: float | None = Field(None, description="Smallest change worth hunting.")
    boots_per_point: int = Field(description="Boots at one point at most.")
    endpoint_looks: list[int] = Field(description="Boots per end at which the ends are compared.")
    commits: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="A history from git: each point's commit, subject, date and files.",
    )

    @property
    def most_boots(self) -> int:
        return planned_boots(self.boots_per_point, self.endpoint_looks)


class ManifestScreen(_Read):
    """The `[screen]` table as resolved: every arm but the baseline is a candidate."""

    metric: str = Field(description="The metric no candidate may lower by more than margin.")
    margin: float = Field(description="How much worse a candidate may be and still clear.")
    looks: list[int] = Field(description="Boots per arm at which candidates are tested.")
    spending: Literal["obrien_fleming", "linear"] = Field(
        "obrien_fleming",
        description="How each candidate's level is spent over the looks: linear (alpha * "
        "boots / last look: a large difference is decided at the first look) or O'Brien–"
        "Fleming (what results written before `spending` was recorded used).",
    )
    spread: Literal["welch", "pooled"] = Field(
        "welch",
        description="Whose boots give the spread a look's intervals use: pooled (one boot "
        "spread over the baseline and every candidate, each look waiting for every "
        "undecided arm's boots) or welch (each pair's own two spreads: what results "
        "written before `spread` was recorded used).",
    )


# What a new screening spends its level with, and whose boots give its spread (both written
# into its manifest's `screen`).
SCREEN_SPENDING = "linear"
SCREEN_SPREAD = "pooled"


class Manifest(_Read):
    """A results directory's manifest.json."""

    schema_version: int = Field(description="Results contract version (1).")
    experiment: str = Field(description="Experiment name.")
    created_at: str = Field(description="When the directory was started (ISO 8601, UTC).")
    specab_version: str = Field(description="The specab release that started it.")
    spec_file: str | None = Field(None, description="The experiment file's name.")
    spec: ManifestSpec | None = Field(
        None,
        description="The resolved experiment file (null from another tool: a resume then "
        "compares spec_sha256 only).",
    )
    spec_sha256: str = Field(description="sha256 of the resolved experiment file.")
    arms: list[ManifestArm] = Field(description="Every arm, in the experiment's order.")
    probe_sets: list[ManifestProbeSet] = Field(description="The probe sets every boot ran.")
    baseline: str | None = Field(None, description="Baseline arm.")
    alpha: float | None = Field(None, description="Two-sided level.")
    margins: dict[str, float] | None = Field(None, description="Metric -> margin.")
    looks: list[int] | None = Field(None, description="Planned looks (simulated runs).")
    primary_metrics: list[str] | None = Field(None, description="The primary Holm family.")
    sweep: ManifestSweep | None = Field(None, description="The sweep, for sweep experiments.")
    bisect: ManifestBisect | None = Field(None, description="The history, for [bisect].")
    screen: ManifestScreen | None = Field(None, description="The screening, for [screen].")
    orchestration: dict[str, Any] | None = Field(
        None, description="How boots were ordered and seeded (run-ab)."
    )
    resumes: list[dict[str, Any]] = Field(
        default_factory=list, description="What each resume changed, in order."
    )

    def arm_names(self) -> list[str]:
        return [a.name for a in self.arms]

    def reference_arms(self) -> list[str]:
        """The arms whose boots drove the drafter's own forward offline (no server)."""
        return [a.name for a in self.arms if a.definition.get("reference")]

    def definition(self, arm: str) -> dict[str, Any]:
        """The arm's definition ({} for an arm the manifest does not list)."""
        return next((dict(a.definition) for a in self.arms if a.name == arm), {})

    def experiment_section(self) -> SpecExperiment:
        return self.spec.experiment if self.spec is not None else SpecExperiment()

    def to_json(self) -> dict[str, Any]:
        """The JSON body, with exactly the keys the file had (or the builder gave)."""
        return self.model_dump(mode="json", exclude_unset=True)
