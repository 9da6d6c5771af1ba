"""A culprit search's answer in words: the statistics give codes and numbers
(`bench.stats.bisect`), the report layer says them (`bisection_reason`), and `analyze
--json` carries the sentence (`analysis_json`)."""

from __future__ import annotations

from typing import get_args

import pytest

from bench.report import analysis_json
from bench.report.tables import bisection_reason
from bench.stats import Analysis, Bisection
from bench.stats.bisect import Why
from bench.stats.schema import BisectConfirmation, BisectPoint


def _points(*decisions: str) -> list[BisectPoint]:
    return [
        BisectPoint.model_validate(
            {
                "arm": f"p{i}",
                "index": i,
                "boots": 3,
                "estimate": 0.5,
                "ci_low": 0.4,
                "ci_high": 0.6,
                "p_changed": None,
                "p_culprit": None,
                "decision": d,
            }
        )
        for i, d in enumerate(decisions)
    ]


def _search(outcome: str, **fields: object) -> Bisection:
    base: dict[str, object] = dict(
        metric="acceptance_pos0", outcome=outcome, culprit=None, last_good=None,
        range_first="p2", range_last="p3", alpha=0.05, difference=-0.2,
        difference_ci_low=-0.3, difference_ci_high=-0.1, boots=20,
        points=_points("good end", "like good", "undecided", "undecided", "bad end"),
    )  # fmt: skip
    return Bisection.model_validate({**base, **fields})


@pytest.mark.parametrize("why", [w for w in get_args(Why) if w != "ends_equal"])
def test_every_reason_a_range_can_have_is_said_in_words(why: str) -> None:
    said = bisection_reason(_search("range", why=why, blocked_point="p1", boots_to_pin=7))
    assert said.startswith("the change lies in p2 .. p3 (P ≥ 0.95): ")
    assert why not in said and "_" not in said.split(": ", 1)[1]  # words, not the code
    assert "≈ 7 fresh boots at each of a candidate and the point before it" in said
    if why == "partner_unbootable":
        assert "p1, before it, cannot be booted" in said
    if why == "step_too_small":
        assert "10 fresh boots a side" in said


def test_a_named_culprit_says_what_names_it_and_how_often_it_is_wrong() -> None:
    conf = BisectConfirmation(point="p2", culprit="p3", attempt=1, level=0.025, boots_each=3,
                              named=True, difference=-0.2, bound=-0.05)  # fmt: skip
    b = _search("culprit", culprit="p3", last_good="p2", range_first="p3", range_last="p3",
                confirmation=conf)  # fmt: skip
    assert bisection_reason(b) == (
        "p3 is the first changed point: 3 fresh boots of it and of p2 differ (one-sided, "
        "level 0.025); a culprit named this way is wrong at most 0.05 of the time"
    )


def test_a_change_that_did_not_reproduce_says_what_the_ends_could_show() -> None:
    b = _search("not_reproduced", why="ends_equal", smallest_change=0.0412)
    assert bisection_reason(b) == (
        "the change did not reproduce: the ends do not differ; the ends would have shown a "
        "change of 0.0412 or more (80 % power)"
    )
    assert bisection_reason(_search("searching")) == "boots still wanted"


def test_points_between_the_levels_are_named_after_the_answer() -> None:
    b = _search("range", why="points_full")
    b = b.model_copy(
        update={"points": _points("good end", "neither", "neither", "like bad", "bad end")}
    )
    said = bisection_reason(b)
    assert said.startswith("the change lies in p2 .. p3")
    assert "; p1, p2 sits between the two levels (neither like good nor like bad)" in said


def test_analyze_json_carries_the_sentence() -> None:
    """The statistics leave `reason` to the report layer; the JSON other tools read has it."""
    b = _search("range", why="budget_spent")
    assert b.reason == ""
    analysis = Analysis.model_construct(bisection=b)
    doc = analysis_json(analysis)
    assert doc["bisection"]["reason"] == bisection_reason(b)
    assert "the boot budget is spent" in doc["bisection"]["reason"]
    assert doc["bisection"]["why"] == "budget_spent"
