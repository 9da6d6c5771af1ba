"""Screening candidates without an order: the error rates by simulation through the
product's own rule (`decide_candidates`, which `analyze` and the driver replay), fewer boots
than booting every arm to the last look, and `[screen]` files (patches as candidates, bad
input in one line)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from bench.cli import run
from bench.experiment import load_spec
from bench.simulate import simulate_results
from bench.stats.screen import ScreenDesign, boots_spent, decide_candidates, screen_boots

CLEARED, LOWERED = 1, 2
REPS = 4000
MCSE2 = 2 * math.sqrt(0.05 * 0.95 / REPS)


def _screen(effects: list[float], design: ScreenDesign, seed: int) -> tuple[np.ndarray, float]:
    """Statuses (REPS x candidates) and mean boots, boots normal with SD 1."""
    rng = np.random.default_rng(seed)
    n, m = design.looks[-1], len(effects)
    base = rng.standard_normal((REPS, n))
    cands = np.asarray(effects)[None, :, None] + rng.standard_normal((REPS, m, n))
    dec = decide_candidates(base, cands, np.full(REPS, n), np.full((REPS, m), n), design)
    return dec.status, float(boots_spent(dec, design).mean())


@pytest.mark.parametrize("margin", [1.0, 2.0])
def test_a_candidate_worse_by_the_margin_is_cleared_at_most_alpha_of_the_time(
    margin: float,
) -> None:
    design = ScreenDesign((3, 6, 10, 16), 0.05, margin, 4)
    status, _ = _screen([-margin] * 4, design, seed=1)
    assert (status == CLEARED).any(axis=1).mean() <= 0.05 + MCSE2  # any of the four


@pytest.mark.parametrize("margin", [1.0, 2.0])
def test_clears_of_harmless_candidates_do_not_let_a_harmful_one_through(margin: float) -> None:
    # Holm: each clear raises the others' level; the one worse by the margin still clears
    # at most alpha of the time
    status, _ = _screen([0.0, 0.0, 0.0, -margin], ScreenDesign((3, 6, 10, 16), 0.05, margin, 4), 5)
    assert (status[:, :3] == CLEARED).mean() > 0.5  # the recycling is exercised
    assert (status[:, 3] == CLEARED).mean() <= 0.05 + MCSE2


def test_each_decision_says_the_level_it_used_holms_raised_level_included() -> None:
    """A candidate that clears only once another has cleared reports the raised level: the
    level before any rejection would understate what its decision rested on."""
    design = ScreenDesign((3, 6, 10, 16), 0.05, 1.0, 3)
    table = design.level_table
    rng = np.random.default_rng(7)
    base = rng.standard_normal(16)
    seen = set()
    for shift in np.linspace(-1.5, 0.5, 81):
        cands = np.stack([base + 0.0, base + shift + 0.3 * rng.standard_normal(16), base - 9])
        dec = decide_candidates(base, cands, np.array(16), np.full(3, 16), design)
        for i in np.flatnonzero(dec.look >= 0):
            k = int(dec.look[i])
            assert any(math.isclose(dec.level[i], table[j, k]) for j in range(3))
            seen.add(min(range(3), key=lambda j: abs(dec.level[i] - table[j, k])))
        assert np.isnan(dec.level[dec.look < 0]).all()
    assert {0, 1} <= seen  # decisions at the first level and at a raised one both met


SPENDING_SPREAD = (("linear", "pooled"), ("linear", "welch"), ("obrien_fleming", "welch"))


def test_a_plainly_harmful_candidate_is_decided_at_the_first_look() -> None:
    """The newcomer's screening: three patches, one 5 boot SDs worse. With the spread pooled
    over every arm (2 (m + 1) degrees of freedom at 3 boots a side) and linear spending, it
    is lowered at the first look in ≥ 90 % of screenings with looks 3, 6 and ≥ 80 % with
    3, 6, 10, 16; Welch's ≈ 4 degrees of freedom decide it there far less often, and
    O'Brien–Fleming, which keeps the level for the last look, almost never."""
    rng = np.random.default_rng(11)
    base = rng.standard_normal((REPS, 16))
    cands = rng.standard_normal((REPS, 3, 16)) - np.array([0.0, 0.0, 5.0])[None, :, None]
    first = {}
    for looks in ((3, 6), (3, 6, 10, 16)):
        for spending, spread in SPENDING_SPREAD:
            design = ScreenDesign(looks, 0.05, 1.0, 3, spending, spread)
            n = looks[-1]
            dec = decide_candidates(
                base[:, :n], cands[..., :n], np.full(REPS, n), np.full((REPS, 3), n), design
            )
            assert (dec.status[:, 2] == LOWERED).mean() > 0.99
            first[looks, spending, spread] = float((dec.look[:, 2] == 0).mean())
    assert first[(3, 6), "linear", "pooled"] >= 0.9, first
    assert first[(3, 6, 10, 16), "linear", "pooled"] >= 0.8, first
    for looks in ((3, 6), (3, 6, 10, 16)):
        assert first[looks, "linear", "welch"] < first[looks, "linear", "pooled"] - 0.1, first
        assert first[looks, "obrien_fleming", "welch"] < first[looks, "linear", "welch"] - 0.1
    assert first[(3, 6, 10, 16), "obrien_fleming", "welch"] < 0.01, first


def test_harmless_candidates_are_called_lowered_at_most_alpha_of_the_time() -> None:
    status, _ = _screen([0.0] * 4, ScreenDesign((3, 6, 10, 16), 0.05, 1.0, 4), seed=2)
    assert (status == LOWERED).any(axis=1).mean() <= 0.05 + MCSE2


def test_screening_clears_harmless_and_finds_the_harmful_one_in_fewer_boots() -> None:
    design = ScreenDesign((3, 6, 10, 16), 0.05, 2.0, 4)
    status, boots = _screen([0.0, 0.0, 0.0, -4.0], design, seed=3)
    assert (status[:, :3] == CLEARED).mean() >= 0.95
    assert (status[:, 3] == LOWERED).mean() >= 0.99
    assert boots < 0.75 * 5 * 16  # every arm to the last look: 80


BASE = """[experiment]
name = "s"
boots_per_arm = 6
[server]
model = "m"
speculative_config = { method = "ngram", num_speculative_tokens = 2 }
[probes]
sets = ["p.jsonl"]
"""


def _file(tmp_path: Path, screen: str, arms: str) -> Path:
    (tmp_path / "p.jsonl").write_text('{"id": "a", "prompt": "x"}\n')
    f = tmp_path / "e.toml"
    f.write_text(BASE + "[screen]\n" + screen + "\n" + arms)
    return f


def test_patches_become_one_candidate_each_beside_the_baseline(tmp_path: Path) -> None:
    spec = load_spec(
        _file(tmp_path, 'patches = ["fix_rope.py", "p2/tidy up.diff"]', '[[arms]]\nname = "b"\n')
    )
    assert [a.name for a in spec.arms] == ["b", "01-fix-rope", "02-tidy-up"]
    assert spec.arms[2].patches == ["p2/tidy up.diff"] and spec.baseline == "b"
    assert spec.screen is not None and spec.screen.design_looks(6) == (3, 6)


@pytest.mark.parametrize(
    ("screen", "arms", "words"),
    [
        ("looks = [3, 5]", '[[arms]]\nname = "a"\n[[arms]]\nname = "b"\n', "boots_per_arm"),
        ("looks = [1, 6]", '[[arms]]\nname = "a"\n[[arms]]\nname = "b"\n', "increase"),
        ("", '[[arms]]\nname = "a"\n', "at least one candidate"),
        ('patches = ["x.py"]', '[[arms]]\nname = "a"\n[[arms]]\nname = "b"\n', "exactly one"),
        ("", '[[arms]]\nname = "a"\n[[arms]]\nname = "b"\nspeculative_config = false\n', "b"),
        ("margin = 0", '[[arms]]\nname = "a"\n[[arms]]\nname = "b"\n', "screen.margin"),
        ("", '[[arms]]\nname = "a"\n[[arms]]\nname = "b"\n', "experiment.baseline: baseline not"),
    ],
)
def test_bad_screens_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], screen: str, arms: str, words: str
) -> None:
    out = tmp_path / "results"
    assert run(["run-ab", str(_file(tmp_path, screen, arms)), "--results-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_plan_sizes_a_screening_that_reaches_its_power_in_simulation() -> None:
    sized = screen_boots(0.01, 0.02, 4, 0.05, 0.8)
    assert sized is not None
    design, boots, cleared = sized
    assert cleared >= 0.8 and boots < 5 * design.looks[-1]
    # checked on fresh draws: the plan's boots clear a harmless candidate as often as planned
    status, _ = _screen([0.0] * 4, ScreenDesign(design.looks, 0.05, 2.0, 4), seed=9)
    assert (status == CLEARED).mean() >= 0.8 - 2 * math.sqrt(0.8 * 0.2 / (REPS * 4))
    smaller = screen_boots(0.01, 0.01, 4, 0.05, 0.8)
    assert smaller is not None and smaller[0].looks[-1] > design.looks[-1]  # a finer margin


def test_plan_arms_prints_the_screening_from_a_pilot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pilot = simulate_results(tmp_path / "pilot", {"base": 0.0, "same": 0.0}, boots=5, prompts=40)
    assert run(["plan", str(pilot), "--effect", "0.015", "--arms", "3", "--json"]) == 0
    sc = json.loads(capsys.readouterr().out)["screening"]
    assert sc["candidates"] == 3 and sc["cleared"] >= 0.8
    assert sc["boots_expected"] < sc["boots_fixed_design"] == 4 * sc["looks"][-1]
    # one candidate 4 margins worse stops early too: fewer boots than all harmless
    assert sc["boots_one_harmful"] < sc["boots_expected"]
    assert run(["plan", str(pilot), "--effect", "0.03", "--arms", "0"]) == 2


def test_a_candidate_running_the_baselines_code_is_said_so_not_as_a_test() -> None:
    """Cleared without boots because it is the baseline's code: the answer and the table say
    that, not 'not worse by more than the margin' over intervals it never had."""
    from bench.report.tables import screening_headlines, screening_table
    from bench.stats.schema import ScreenCandidate, Screening

    same = ScreenCandidate(
        arm="01-comment", same_code=True, boots=0, difference=None, ci_low=None, ci_high=None,
        status="cleared", within_margin=False, decided_at_look=None, nominal_alpha=None,
    )  # fmt: skip
    s = Screening(
        metric="acceptance_pos0", baseline="base", margin=0.01, alpha=0.05, looks=[3, 6],
        candidates=[same], finished=True, boots_used=0, boots_fixed_design=12, reason="r",
    )  # fmt: skip
    said = screening_headlines(s)
    assert said[1] == "**01-comment** runs base's code: cleared without boots."
    assert screening_table(s)["status"].tolist() == ["cleared (runs the baseline's code)"]
