"""`[bisect]`: the experiment's arms, in file order, are the points of an ordered history (a
patch stack, dependency pins, nightly images, builds of successive commits; or a git range,
`git_history`) from the good end (the first arm) to the bad end (the last); specab finds the
first point where the metric changed (docs/statistics.md, "Which change did it")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bench.errors import SpecabError
from bench.experiment.spec.margins import MetricName, check_measured, check_relative_margin
from bench.records import PRIMARY_DEFAULT, looks_ending_at, planned_boots


class GitRange(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    repo: str = Field(description="A checkout of the package's repository (relative to the file).")
    good: str = Field(description="The good commit: the arms' installed build must be it.")
    bad: str = Field(description="The bad commit, a descendant of good.")
    package: str = Field("vllm", description="The package directory the diffs serve.")
    build: str | None = Field(
        None,
        description="A shell command that builds one commit: {commit} is its hash, {out} "
        "the directory it fills, whose bin/python then serves that point (run in repo, on "
        "the node that first boots the point; cached by commit). With it, commits that change "
        "compiled code are bisected too, and a commit whose build fails is skipped.",
    )
    strict: bool = Field(
        False,
        description="Refuse a range with compiled code, build files or dependency pins "
        "(naming the commit that changes them) instead of serving each point's Python over "
        "the installed build and listing what it leaves out. Ignored with build.",
    )
    build_cache: str = Field(
        "",
        description="Where builds are kept, {out} = build_cache/<commit> with its log beside "
        "(storage every node sees; relative to the file). Default: specab's cache directory.",
    )

    @field_validator("build")
    @classmethod
    def _placeholders(cls, v: str | None) -> str | None:
        if v is not None and not ("{commit}" in v and "{out}" in v):
            raise ValueError(f"build = {v!r} needs both {{commit}} and {{out}}")
        return v


class BisectSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    metric: MetricName = Field(
        PRIMARY_DEFAULT[0], description="The metric whose change is searched for."
    )
    margin: float | None = Field(
        None,
        gt=0,
        description="Smallest change worth hunting, in the metric's units (relative for a "
        "ratio metric): the ends must differ beyond it. Default: any change the ends show "
        "at the experiment's alpha.",
    )
    boots_per_point: int = Field(
        10,
        ge=2,
        description="Search boots at one inner point at most; a culprit's confirmation "
        "boots it and the point before it up to 10 times more.",
    )
    endpoint_boots: int = Field(
        16,
        ge=3,
        description="Boots at each end at most: the ends are compared at 3, 6, 10 and 16 "
        "boots (those up to this), and a change that has not shown by then did not "
        "reproduce.",
    )

    git: GitRange | None = Field(
        None,
        description="Make the arms from a git range: good, then each first-parent commit of "
        "good..bad, served as the arm's build plus the package's Python that good..commit "
        "changes (one hand-written [[arms]] is their template).",
    )

    @property
    def endpoint_looks(self) -> tuple[int, ...]:
        return looks_ending_at(self.endpoint_boots)

    @property
    def builds(self) -> bool:
        """Every point is its commit's own build (`git.build`)."""
        return self.git is not None and self.git.build is not None

    @property
    def most_boots(self) -> int:
        """Boots any point may take (its search boots, then a confirmation's fresh boots):
        the plan every point's boots are drawn from."""
        return planned_boots(self.boots_per_point, self.endpoint_looks)


def check_history(
    bisect: BisectSection | None, sweep: bool, names: list[str], undrafted: list[str],
    template: bool = False,
) -> None:  # fmt: skip
    """A history needs its two ends and a point between them, no sweep beside it, and a
    metric its probes measure at every point (`undrafted`: arms without speculative
    decoding, whose probes count no drafts). `template`: the arms are a git range's template,
    its points not made yet (`bench.experiment.history` counts them)."""
    if bisect is None:
        return
    if sweep:
        raise ValueError("[bisect] and [sweep] ask two questions: keep one of them")
    if len(names) < 3 and not template:
        raise ValueError(
            f"[bisect] needs at least 3 arms (the good end, a point, the bad end); got "
            f"{len(names)}: {names}"
        )
    check_measured(bisect.metric, undrafted, "point", "search")
    check_relative_margin(bisect.metric, bisect.margin, "[bisect]")


def git_range(data: dict[str, Any]) -> dict[str, Any] | None:
    """The document's `[bisect] git` table, if it has one."""
    bisect = data.get("bisect")
    git = bisect.get("git") if isinstance(bisect, dict) else None
    return git if isinstance(git, dict) else None


def as_template(data: dict[str, Any], file: Path) -> dict[str, Any]:
    """The document as parsed before its git range is read: a hand-written arm may not set
    `commit`; with `[bisect] git`, the one hand-written arm (or none) is the points'
    template, validated here as an arm of its own (`bench.experiment.history` then makes the
    points from git). Without git, the document as it is."""
    git = git_range(data)
    arms = data.get("arms")
    for i, arm in enumerate(arms if isinstance(arms, list) else []):
        if isinstance(arm, dict) and "commit" in arm:
            raise SpecabError(
                f"commit = {arm['commit']!r} on a hand-written arm serves nothing: "
                + ("[bisect] git sets each point's commit" if git is not None
                   else "an arm runs its build, patches, python or container"),
                file=file,
                field=f"arms[{i}].commit",
                fix="remove it; serve a commit as `patches = [\"good..commit.diff\"]` (git diff "
                "good commit -- vllm/) or as its build (`python = \".../bin/python\"`)",
            )  # fmt: skip
    if git is None:
        return data
    hand = arms or [{}]
    if not isinstance(hand, list) or len(hand) != 1 or not isinstance(hand[0], dict):
        raise SpecabError(
            "[bisect] git makes the arms: give at most one [[arms]] table, their template",
            file=file,
            field="arms",
            fix="keep one [[arms]] (its fields apply to every point) or none",
        )
    if git.get("build") is not None and ({"python", "container"} & set(hand[0])):
        raise SpecabError(
            "[bisect] git.build makes every point's interpreter: the template arm cannot "
            "set python or container",
            file=file,
            field="arms",
            fix="remove python/container from the [[arms]] template, or drop build",
        )
    return {**data, "arms": [{"name": "template", **hand[0]}]}
