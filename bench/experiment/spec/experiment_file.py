"""The experiment file (TOML) as pydantic v2 models (`document_loading` reads and checks
a file into them). Paths inside the file are relative to the file's own directory;
`resolve_path` resolves them."""

from __future__ import annotations

import hashlib
import json
import os
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bench.errors import SpecabError
from bench.experiment.spec.bisect_section import BisectSection, check_history
from bench.experiment.spec.margins import PRIMARY_DEFAULT, Margins, PrimaryMetrics
from bench.experiment.spec.probes_section import ProbesSection
from bench.experiment.spec.reference_arm import ReferenceForward, check_reference_arms
from bench.experiment.spec.resources import ContainerSpec, ResourcesSection
from bench.experiment.spec.screen_section import ScreenSection, check_screen
from bench.experiment.spec.secret_settings import (
    REDACTED,
    is_secret_env,
    is_secret_flag,
    redact_args,
    redact_env,
)
from bench.experiment.spec.sweep import SweepSection

ArgValue = str | int | float | bool | None
NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class _Model(BaseModel):
    # strict: a TOML string is never silently coerced to a number ("3" is an error)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ExperimentSection(_Model):
    name: Annotated[str, Field(pattern=NAME_RE)] = Field(
        description="Experiment name; results go to results/<name>/."
    )
    boots_per_arm: int = Field(3, ge=1, description="Server boots per arm (the replication unit).")
    seed: int = Field(0, description="Seed for block shuffling and per-boot engine seeds.")
    baseline: str | None = Field(
        None, description="Arm every other arm is compared with; default: the first arm."
    )
    alpha: float = Field(0.05, gt=0, lt=0.5, description="Two-sided significance level.")
    margins: Margins = Field(default_factory=Margins, description="Pre-registered margins.")
    primary_metrics: PrimaryMetrics = Field(
        default_factory=lambda: list(PRIMARY_DEFAULT),
        description="Metrics in the primary Holm family (verdicts, --fail-on, sequential "
        "looks); every other metric is secondary (its own Holm family across arms). "
        'Add "output_tokens_per_s" to make speed primary.',
    )
    max_attempts: int = Field(3, ge=1, description="Attempts per boot before it counts as lost.")
    max_failures_per_arm: int = Field(
        4, ge=0, description="Failed attempts an arm may accumulate before the run stops."
    )
    looks: list[int] | None = Field(
        None,
        description="Planned sequential looks (boots per arm, increasing, each >= 2), e.g. "
        "[3, 6, 10]: run-ab stops early when a look decides every comparison. boots_per_arm "
        "then defaults to, and must equal, the last look.",
    )

    @model_validator(mode="before")
    @classmethod
    def _boots_default_to_last_look(cls, data: Any) -> Any:
        if isinstance(data, dict) and "boots_per_arm" not in data:
            looks = data.get("looks")
            if isinstance(looks, list) and looks and isinstance(looks[-1], int):
                return {**data, "boots_per_arm": looks[-1]}
        return data

    @model_validator(mode="after")
    def _looks_fit_boots(self) -> ExperimentSection:
        lk = self.looks
        if lk is None:
            return self
        if not lk or lk[0] < 2 or any(b <= a for a, b in pairwise(lk)):
            raise ValueError(
                f"looks {lk} must be strictly increasing boot counts >= 2; write e.g. "
                "looks = [3, 6, 10]"
            )
        if lk[-1] != self.boots_per_arm:
            raise ValueError(
                f"boots_per_arm = {self.boots_per_arm} must equal the last look ({lk[-1]}); "
                f"set boots_per_arm = {lk[-1]} or omit it"
            )
        return self


class ServerSection(_Model):
    model: str = Field(description="Target model directory (or name for a GPU node with a cache).")
    args: dict[str, ArgValue] = Field(
        default_factory=dict,
        description="CLI flags by name without '--': true = bare flag, false/None = omitted.",
    )
    speculative_config: dict[str, Any] = Field(
        default_factory=dict, description="vLLM --speculative-config object (merged by key)."
    )
    env: dict[str, str] = Field(default_factory=dict, description="Extra server environment.")
    patches: list[str] = Field(
        default_factory=list, description="Patch modules (.py) run in every server process."
    )
    allow_noop_patches: bool = Field(
        False,
        description="Boot even when a patch reports it changed nothing in this build "
        "(report_applied(..., changed=False)); by default such a boot fails, naming the patch.",
    )
    python: str | None = Field(
        None,
        description="Interpreter that runs the server; default: the one running specab (in a "
        "container: the image's python3).",
    )
    host: str = Field("127.0.0.1", description="Bind address; keep loopback unless required.")
    ready_timeout_s: float | None = Field(
        None,
        gt=0,
        description="Deadline for /health after start (s). Unset: 600 s + 20 s per GiB of "
        "weights a node loads + 120 s per GPU rank on a node (docs/running.md).",
    )
    stop_grace_s: float = Field(10.0, ge=0, description="SIGTERM grace before SIGKILL.")
    per_boot_seed: bool = Field(
        True, description="Give every boot its own engine --seed (GPU boots are not bit-stable)."
    )
    container: ContainerSpec | None = Field(
        None, description="Run the server in this container image (arms may set their own)."
    )
    pre_boot: list[str] = Field(
        default_factory=list,
        description="Shell commands run on each node of the boot (host side) before its server "
        "starts, e.g. dropping the page cache; one that fails fails the attempt with its output.",
    )
    min_free_memory_gb: float | None = Field(
        None,
        gt=0,
        description="Wait (up to memory_wait_s) until the node's MemAvailable reaches this "
        "many GiB before starting; the attempt fails otherwise (unified-memory nodes).",
    )
    memory_wait_s: float = Field(
        300.0,
        gt=0,
        description="Deadline for min_free_memory_gb, for each pre_boot command, and for a "
        "container an earlier boot left on the node to go (the boot fails otherwise).",
    )


class ArmSpec(_Model):
    name: Annotated[str, Field(pattern=NAME_RE)] = Field(description="Arm name.")
    description: str = Field("", description="Free text shown in reports.")
    args: dict[str, ArgValue] = Field(default_factory=dict, description="Flags merged by name.")
    env: dict[str, str] = Field(default_factory=dict, description="Env merged by key.")
    speculative_config: dict[str, Any] | Literal[False] = Field(
        default_factory=dict,
        description="Merged into [server].speculative_config by key; false turns speculative "
        "decoding off (a no-speculation speed arm: no acceptance, speed only).",
    )
    concurrency: int | None = Field(
        None, ge=1, description="Probes in flight at once for this arm; default [probes]."
    )
    patches: list[str] = Field(default_factory=list, description="Extra patch modules.")
    allow_noop_patches: bool | None = Field(
        None,
        description="Boot even when a patch reports it changed nothing in this build; "
        "default: [server].allow_noop_patches.",
    )
    target_config: dict[str, Any] | None = Field(
        None, description="JSON merge patch (RFC 7386) on the target's config.json."
    )
    draft_config: dict[str, Any] | None = Field(
        None, description="JSON merge patch (RFC 7386) on the draft's config.json."
    )
    python: str | None = Field(None, description="Interpreter (venv) for this arm's server.")
    container: ContainerSpec | None = Field(
        None, description="Container image for this arm's server (replaces [server].container)."
    )
    commit: str | None = Field(
        None,
        description="The commit this arm serves ([bisect] git fills it; with its `build`, "
        "`python` is that commit's build, made when a boot first needs it).",
    )
    reference: ReferenceForward | None = Field(
        None,
        description="Make this a reference arm: no server; the drafter's own forward, driven "
        "offline over the same probes (docs/reference-forward.md).",
    )

    @field_validator("speculative_config", mode="before")
    @classmethod
    def _table_or_false(cls, v: Any) -> Any:
        if isinstance(v, dict) or v is False:
            return v
        raise ValueError(
            f"speculative_config = {json.dumps(v, default=str)} is neither a table nor "
            "false; write a table, e.g. { num_speculative_tokens = 3 }, or false for an arm "
            "without speculation"
        )


class Experiment(_Model):
    experiment: ExperimentSection = Field(description="Name, replication and verdict settings.")
    server: ServerSection = Field(description="The server every arm starts from.")
    probes: ProbesSection = Field(description="Probe sets and sampling.")
    resources: ResourcesSection = Field(
        default_factory=ResourcesSection, description="Per-boot Ray resources."
    )
    arms: list[ArmSpec] = Field(min_length=1, description="The arms; each differs from [server].")
    sweep: SweepSection | None = Field(
        None,
        description="A grid over arm fields that generates the arms (crossing any hand-written "
        "ones) and the selection of the best configuration (docs/statistics.md, Selection).",
    )
    bisect: BisectSection | None = Field(
        None,
        description="The arms, in file order, as an ordered history from the good end to the "
        "bad end: find the first point where the metric changed (`specab bisect`).",
    )
    screen: ScreenSection | None = Field(
        None,
        description="Candidates without an order, each against the baseline: which are not "
        "worse by more than a margin, which lowered the metric; decided ones get no more boots.",
    )

    @field_validator("arms")
    @classmethod
    def _unique_arms(cls, arms: list[ArmSpec]) -> list[ArmSpec]:
        names = [a.name for a in arms]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"duplicate arm name(s) {dup}; give every arm its own name")
        return arms

    @model_validator(mode="after")
    def _a_history(self) -> Experiment:
        names = [a.name for a in self.arms]
        # arms whose probes count no drafts: no acceptance metric is measured there
        server = self.server.speculative_config
        undrafted = [a.name for a in self.arms if a.speculative_config is False or not (
            server or a.speculative_config)]  # fmt: skip
        check_history(self.bisect, self.sweep is not None, names, undrafted, self.git_template)
        if self.screen is not None and (self.sweep is not None or self.bisect is not None):
            raise ValueError("[screen] asks its own question: keep it without [sweep] or [bisect]")
        others = [a.name for a in self.arms if a.name != self.baseline]
        implied = None if self.experiment.baseline is not None else self.baseline
        check_screen(self.screen, others, self.experiment.boots_per_arm, undrafted, implied)
        check_reference_arms(self)
        return self

    @model_validator(mode="after")
    def _baseline_exists(self) -> Experiment:
        base = self.experiment.baseline
        if base is not None and base not in {a.name for a in self.arms}:
            names = ", ".join(a.name for a in self.arms)
            raise ValueError(f"baseline {base!r} is not an arm; choose one of: {names}")
        return self

    @property
    def git_template(self) -> bool:
        """A `[bisect] git` range whose points are not made yet: the arms are its template
        (`bench.experiment.history.load_experiment` makes them)."""
        b = self.bisect
        return b is not None and b.git is not None and not any(a.commit for a in self.arms)

    @property
    def baseline(self) -> str:
        return self.experiment.baseline or self.arms[0].name

    def arm(self, name: str) -> ArmSpec:
        for a in self.arms:
            if a.name == name:
                return a
        names = ", ".join(a.name for a in self.arms)
        raise SpecabError(f"no arm named {name!r}", field="--arm", fix=f"use one of: {names}")

    def redacted_dump(self) -> dict[str, Any]:
        """The spec as JSON with every secret `args` and `env` value redacted (what the
        manifest stores and the hash covers: a key never reaches a file)."""
        body = self.model_dump(mode="json")
        for table in [body["server"], *body["arms"]]:
            table["args"] = redact_args(table.get("args") or {})
            table["env"] = redact_env(table.get("env") or {})
        sweep = body.get("sweep") or {}
        for axis, levels in (sweep.get("grid") or {}).items():
            kind, _, name = axis.partition(".")
            if (kind == "args" and is_secret_flag(name)) or (kind == "env" and is_secret_env(name)):
                sweep["grid"][axis] = [REDACTED for _ in levels]
        return body

    def sha256(self) -> str:
        """The redacted spec's hash (two runs that differ only in a key are the same)."""
        return hashlib.sha256(json.dumps(self.redacted_dump(), sort_keys=True).encode()).hexdigest()


def resolve_path(spec_file: str | Path, value: str) -> Path:
    """Resolve a path written in an experiment file relative to that file's directory,
    normalized (`models/../demo/target` reads as `demo/target`; links are kept)."""
    v = Path(value).expanduser()
    return Path(os.path.normpath(v if v.is_absolute() else Path(spec_file).resolve().parent / v))


def json_schema() -> dict[str, Any]:
    """JSON schema of the experiment file, for editors (taplo, VS Code Even Better TOML)."""
    schema = Experiment.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "specab experiment file"
    return schema
