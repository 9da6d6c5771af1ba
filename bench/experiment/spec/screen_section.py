"""`[screen]`: candidates without an order (patches, pins, settings), each against the
baseline, one-sided: which of them is not worse than the baseline by more than the margin
("cleared"), and which lowered the metric ("lowered"). A candidate decided at a look gets no
more boots; the boots go to the unresolved ones (docs/statistics.md, "Screening candidates").

The candidates are the experiment's arms other than the baseline, or, with `patches`, one
arm per patch made from the file's one `[[arms]]` table (the baseline: that arm as written).
"""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bench.errors import SpecabError
from bench.experiment.spec.margins import MetricName, check_measured, check_relative_margin
from bench.records import PRIMARY_DEFAULT, looks_ending_at


class ScreenSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    metric: MetricName = Field(
        PRIMARY_DEFAULT[0], description="The metric no candidate may lower by more than margin."
    )
    margin: float | None = Field(
        None,
        gt=0,
        description="How much worse than the baseline a candidate may be and still clear (in "
        "the metric's units; relative for a ratio metric). Default: the metric's margin in "
        "[experiment.margins].",
    )
    looks: list[int] = Field(
        default_factory=list,
        description="Boots per arm at which every unresolved candidate is tested, increasing, "
        "the last = experiment.boots_per_arm. Default: 3, 6, 10, 16 (those below "
        "boots_per_arm), then boots_per_arm.",
    )
    patches: list[str] = Field(
        default_factory=list,
        description="One candidate per patch (a .py patch or a diff, relative to the file), "
        "each the file's one [[arms]] table plus that patch; that table as written is the "
        "baseline. Empty: the candidates are the arms other than the baseline.",
    )

    def design_looks(self, boots_per_arm: int) -> tuple[int, ...]:
        if self.looks:
            return tuple(self.looks)
        return looks_ending_at(boots_per_arm)


def check_screen(
    screen: ScreenSection | None,
    others: list[str],
    boots_per_arm: int,
    undrafted: list[str],
    implied_baseline: str | None = None,
) -> None:
    """Candidates to screen, looks that end at boots_per_arm, a metric every arm has, and a
    baseline the file names (`implied_baseline`: the first arm, taken only by position)."""
    if screen is None:
        return
    if not others:
        raise ValueError("[screen] needs at least one candidate besides the baseline")
    looks = screen.design_looks(boots_per_arm)
    if looks[0] < 2 or any(b <= a for a, b in pairwise(looks)):
        raise ValueError(f"[screen] looks {list(looks)} must increase from 2 boots or more")
    if looks[-1] != boots_per_arm:
        raise ValueError(
            f"[screen] looks end at {looks[-1]}, experiment.boots_per_arm is {boots_per_arm}; "
            "make the last look boots_per_arm"
        )
    check_measured(screen.metric, undrafted, "arm", "screen")
    check_relative_margin(screen.metric, screen.margin, "[screen]")
    if implied_baseline is not None and not screen.patches:
        raise ValueError(
            "baseline not named: [screen] tests every candidate against one baseline, which "
            "the file must name rather than take the first arm by position; set "
            f"[experiment] baseline = {implied_baseline!r} (or the arm every candidate is "
            "measured against)"
        )


def expand_screen(data: dict[str, Any], file: Path) -> dict[str, Any]:
    """The document with one candidate arm per `[screen] patches` entry (the one hand-written
    arm is the baseline and their template); unchanged without them."""
    screen = data.get("screen")
    patches = screen.get("patches") if isinstance(screen, dict) else None
    if not patches:
        return data
    hand = data.get("arms") or []
    if not isinstance(hand, list) or len(hand) != 1 or not isinstance(hand[0], dict):
        raise SpecabError(
            "[screen] patches makes the candidates: give exactly one [[arms]] table, the "
            "baseline they are made from",
            file=file,
            field="arms",
            fix="keep one [[arms]] (the baseline), or list the candidates as arms and drop patches",
        )
    base = hand[0]
    arms = [base]
    for i, patch in enumerate(patches):
        stem = re.sub(r"[^A-Za-z0-9.-]+", "-", Path(str(patch)).stem).strip("-.") or "patch"
        arms.append(
            {
                **{k: v for k, v in base.items() if k not in ("name", "description")},
                "name": f"{i + 1:02d}-{stem}"[:64],
                "description": f"{base.get('name', '')} + {patch}",
                "patches": [*base.get("patches", []), patch],
                # a diff that changes no executed code is a candidate the screening clears
                # without boots (it runs the baseline's code), not a refusal
                **({"allow_noop_patches": True} if _is_diff(str(patch)) else {}),
            }
        )
    return {**data, "arms": arms}


def _is_diff(patch: str) -> bool:
    return patch.endswith((".diff", ".patch"))
