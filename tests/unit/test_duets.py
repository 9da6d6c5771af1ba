"""Duet pairing of speed, calibrated by simulation through the product's own functions
(`bench.stats.compare`: `blocked_contrasts`, `pseudo_pair`, `duet_pairs`, and the family
every comparison goes through), against known truth: A/A false claims stay within
alpha + 2 MCSE with shared time effects, a slot 15 % slower taken by both arms alike, groups
broken by failed boots, and heavy-tailed group effects; the paired interval is narrower than
the unpaired one when the machine's shared noise dominates. Co-run groups are found from the
boots' measurement windows (`corun_groups`)."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from bench.records import SPEED_METRIC
from bench.stats.compare import blocked_contrasts, duet_pairs, pseudo_pair
from bench.stats.inputs import ArmData, corun_groups, margin_for
from bench.stats.methods import Est, family

ALPHA, REPS = 0.05, 50000
MARGIN = margin_for(SPEED_METRIC, 0.05)


def _plain(y: np.ndarray) -> Est:
    """One arm's unpaired estimate of mean log speed over its boots (last axis)."""
    n = y.shape[-1]
    sd = y.std(axis=-1, ddof=1)
    full = np.full(y.shape[:-1], float(n))
    return Est(y.mean(axis=-1), sd / np.sqrt(n), sd, full - 1, full, n, False)


def _paired(
    ya: np.ndarray, yb: np.ndarray, ga: list[str], gb: list[str], slots: tuple = ((), ())
) -> tuple[np.ndarray, np.ndarray, float]:
    """Arm b - arm a within groups through the product's fit, over the replicates."""
    y = np.concatenate([ya, yb], axis=-1)
    arms = ["a"] * ya.shape[-1] + ["b"] * yb.shape[-1]
    fitted, df = blocked_contrasts(y, arms, ga + gb, [*slots[0], *slots[1]])
    diff, se = fitted["b"]
    return diff, se, df


def _claims(
    ya: np.ndarray, yb: np.ndarray, ga: list[str], gb: list[str], slots: tuple = ((), ())
) -> tuple[float, float]:
    """(paired false-claim rate, unpaired false-claim rate) over the replicates."""
    diff, se, df = _paired(ya, yb, ga, gb, slots)
    base, arm = pseudo_pair(np.asarray(diff), np.asarray(se), df, _plain(yb))
    paired = family([(base, arm, MARGIN)], ALPHA)
    plain = family([(_plain(ya), _plain(yb), MARGIN)], ALPHA)
    # a claim of any difference: the raw (1 - alpha) interval excludes 0 (a verdict claim
    # also needs the Holm interval to, so this is the stricter count)
    return (
        float(((paired.lo > 0) | (paired.hi < 0)).mean()),
        float(((plain.lo > 0) | (plain.hi < 0)).mean()),
    )


def _layout(groups: int, broken: int = 0) -> tuple[list[str], list[str]]:
    """Each group one boot of each arm; the first `broken` groups lost arm b's boot (it
    failed), so arm a's boot there ran alone."""
    ga = [f"g{i}" for i in range(groups)]
    gb = [f"g{i}" for i in range(broken, groups)]
    return ga, gb


CASES = {
    "shared time effects": {"group": "normal", "slot": 0.0, "broken": 0},
    "a slot 15 % slower, counterbalanced": {"group": "normal", "slot": np.log(1.15), "broken": 0},
    "groups broken by failed boots": {"group": "normal", "slot": 0.0, "broken": 3},
    "heavy-tailed group effects": {"group": "t3", "slot": 0.0, "broken": 0},
}


@pytest.mark.parametrize("case", list(CASES))
def test_aa_false_claims_stay_within_alpha(case: str) -> None:
    cfg = CASES[case]
    rng = np.random.default_rng(zlib.crc32(case.encode()))  # fixed per case
    groups = 10
    ga, gb = _layout(groups, int(cfg["broken"]))
    if cfg["group"] == "t3":
        g = 0.06 * rng.standard_t(3, size=(REPS, groups)) / np.sqrt(3.0)
    else:
        g = rng.normal(0.0, 0.06, size=(REPS, groups))
    slow_a = np.arange(groups) % 2 == 0  # arm a in the slow slot in half the groups
    slot_a = np.where(slow_a, -float(cfg["slot"]), 0.0)
    slot_b = np.where(slow_a, 0.0, -float(cfg["slot"]))
    ya = g + slot_a + rng.normal(0.0, 0.02, size=(REPS, groups))
    yb = (g + slot_b + rng.normal(0.0, 0.02, size=(REPS, groups)))[:, int(cfg["broken"]) :]
    slots = ((), ())
    if cfg["slot"]:  # recorded: the slot is a covariate, as duet_pairs makes it
        slots = ([str(int(not s)) for s in slow_a], [str(int(s)) for s in slow_a])
    paired, plain = _claims(ya, yb, ga, gb, slots)
    mcse = np.sqrt(ALPHA * (1 - ALPHA) / REPS)
    print(f"{case}: false claims paired {paired:.4f}, unpaired {plain:.4f}")
    assert paired <= ALPHA + 2 * mcse, (case, paired)


def test_aa_false_claims_stay_within_alpha_when_groups_pair_arms_at_random() -> None:
    """Four arms, two boots at a time, pairs as a rolling schedule leaves them (the demo's
    case): the groups connect each arm to the baseline through the others, as in an
    incomplete-block design, and every contrast holds the bound."""
    rng = np.random.default_rng(11)
    arms = [a for a in "abcd" for _ in range(6)]
    order = rng.permutation(len(arms))
    layout = [arms[i] for i in order]  # boots in launch order; groups: consecutive pairs
    groups = [f"g{i // 2}" for i in range(len(layout))]
    g = rng.normal(0.0, 0.06, size=(REPS, len(layout) // 2))
    y = np.repeat(g, 2, axis=1) + rng.normal(0.0, 0.02, size=(REPS, len(layout)))
    first = layout.index("a")
    idx = [first, *[i for i in range(len(layout)) if i != first]]  # the baseline listed first
    fitted, df = blocked_contrasts(y[:, idx], [layout[i] for i in idx], [groups[i] for i in idx])
    assert set(fitted) == {"b", "c", "d"} and df >= 3
    mcse = np.sqrt(ALPHA * (1 - ALPHA) / REPS)
    for arm, (diff, se) in fitted.items():
        base, est = pseudo_pair(np.asarray(diff), np.asarray(se), df, _plain(y[:, :6]))
        fam = family([(base, est, MARGIN)], ALPHA)
        rate = float(((fam.lo > 0) | (fam.hi < 0)).mean())
        print(f"random pairs, {arm} vs a: false claims {rate:.4f} (df {df:g})")
        assert rate <= ALPHA + 2 * mcse, (arm, rate)


def test_pairing_narrows_the_interval_when_shared_noise_dominates() -> None:
    """Same noise as the demo's co-runs (group SD 0.06, own 0.02): the paired interval is
    at most half the unpaired one, and a true 5 % difference is found far more often."""
    rng = np.random.default_rng(7)
    groups = 6
    ga, gb = _layout(groups)
    g = rng.normal(0.0, 0.06, size=(REPS, groups))
    ya = g + rng.normal(0.0, 0.02, size=(REPS, groups))
    yb = g + np.log(1.05) + rng.normal(0.0, 0.02, size=(REPS, groups))
    diff, se, df = _paired(ya, yb, ga, gb)
    base, arm = pseudo_pair(np.asarray(diff), np.asarray(se), df, _plain(yb))
    paired = family([(base, arm, MARGIN)], ALPHA)
    plain = family([(_plain(ya), _plain(yb), MARGIN)], ALPHA)
    width_p = np.median(paired.hi - paired.lo)
    width_u = np.median(plain.hi - plain.lo)
    assert width_p <= 0.5 * width_u, (width_p, width_u)
    found_p = float((paired.lo > 0).mean())
    found_u = float((plain.lo > 0).mean())
    assert found_p > found_u + 0.3, (found_p, found_u)
    print(
        f"paired width {width_p:.4f} vs unpaired {width_u:.4f}; "
        f"power {found_p:.2f} vs {found_u:.2f}"
    )


def _boots(windows: list[tuple[str, str, float, float]]) -> pd.DataFrame:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    return pd.DataFrame(
        {
            "boot_id": [w[0] for w in windows],
            "host": [w[1] for w in windows],
            "status": "ok",
            "ready_at": [t0 + timedelta(seconds=w[2]) for w in windows],
            "finished_at": [t0 + timedelta(seconds=w[3]) for w in windows],
        }
    )


def test_co_run_groups_are_boots_measured_at_once_on_one_host() -> None:
    boots = _boots(
        [
            ("a0", "h1", 0, 10),
            ("b0", "h1", 1, 11),  # overlaps a0 by 9 of 10 s: one group
            ("a1", "h1", 20, 30),
            ("b1", "h1", 28, 40),  # overlaps a1 by 2 s of 10: not enough
            ("c0", "h2", 0, 10),  # another host: never with a0
            ("c1", "h2", 2, 9),
        ]
    )
    g = corun_groups(boots)
    assert g["a0"] == g["b0"] and g["c0"] == g["c1"] and g["a0"] != g["c0"]
    assert "a1" not in g and "b1" not in g


def _arm(name: str, speeds: np.ndarray, corun: list[str]) -> ArmData:
    n = len(speeds)
    ones = np.ones((n, 1))
    return ArmData(
        name, [f"{name}{i}" for i in range(n)], ones, ones, np.ones((n, 1, 1)),
        completion=speeds[:, None] * 100.0, latency=np.full((n, 1), 100.0),
        speculative=True, corun=corun,
    )  # fmt: skip


def test_duet_pairs_compare_speed_within_groups_and_only_where_groups_hold_both() -> None:
    rng = np.random.default_rng(3)
    shared = np.exp(rng.normal(0.0, 0.1, size=6))
    groups = [f"h/g{i}" for i in range(6)]
    base = _arm("base", 50.0 * shared, groups)
    fast = _arm("fast", 55.0 * shared * np.exp(rng.normal(0, 0.005, 6)), groups)
    alone = _arm("alone", 55.0 * shared, [""] * 6)
    est = {a: {SPEED_METRIC: _plain(np.log(d.speed())[None, :])} for a, d in
           {"base": base, "fast": fast, "alone": alone}.items()}  # fmt: skip
    est = {a: {m: Est(*(np.asarray(x)[0] if isinstance(x, np.ndarray) else x for x in
                        (e.ratio, e.se, e.sd, e.df, e.b_eff)), e.boots, False)
               for m, e in v.items()} for a, v in est.items()}  # fmt: skip
    pairs = duet_pairs({"base": base, "fast": fast, "alone": alone}, "base", ["fast", "alone"], est)
    assert set(pairs) == {("fast", SPEED_METRIC)}  # "alone" shares no group with the baseline
    _, arm = pairs[("fast", SPEED_METRIC)]
    assert abs(float(arm.ratio) - np.log(1.1)) < 0.01  # the true ratio, within groups
    assert float(arm.se) < 0.2 * float(est["fast"][SPEED_METRIC].se)


def test_a_slower_slot_is_named_and_an_even_machine_is_not() -> None:
    from dataclasses import replace

    from bench.stats.compare import slot_note

    rng = np.random.default_rng(5)
    slots = ["0", "1"] * 6

    def arms(slow: float) -> dict[str, ArmData]:
        out = {}
        for name in ("base", "fix"):
            factor = np.array([1.0 - slow if s == "1" else 1.0 for s in slots])
            speeds = 50.0 * factor * np.exp(rng.normal(0.0, 0.02, len(slots)))
            out[name] = replace(
                _arm(name, speeds, [""] * len(slots)), hosts=["h"] * 12, slots=slots
            )
        return out

    note = slot_note(arms(0.15))
    assert note is not None and "slot effect p" in note
    assert slot_note(arms(0.0)) is None


@pytest.mark.parametrize("share", [0.0, 0.5, 0.8])
def test_group_share_recovers_the_variance_the_groups_carry(share: float) -> None:
    """Per df, not of the sum of squares: 100 groups' dummies would take about half of it
    with no shared noise at all."""
    from bench.stats.compare import group_share

    rng = np.random.default_rng(int(share * 10))
    n = 100
    shared = rng.normal(0.0, 0.05 * np.sqrt(share), n)
    groups = [f"h/d{i}" for i in range(n)]
    data = {
        name: _arm(name, level * np.exp(shared + rng.normal(0, 0.05 * np.sqrt(1 - share), n)),
                   groups)
        for name, level in (("base", 50.0), ("fix", 55.0))
    }  # fmt: skip
    got = group_share(data, ["base", "fix"])
    assert got is not None
    value, df = got
    assert df == 2 * n - n - 1  # boots - groups - (arms - 1)
    assert abs(value - share) < 0.12
    assert (
        group_share({a: _arm(a, d.speed(), [""] * n) for a, d in data.items()}, ["base", "fix"])
        is None
    )


def test_the_tables_say_which_speed_interval_they_show_and_give_the_other() -> None:
    """A speed comparison made within duets is marked 'paired (duets)' in the analyze table
    and the verdict table, with the unpaired interval's ends beside it."""
    import io

    from rich.console import Console

    from bench import stats
    from bench.records import Results
    from bench.report import render_analysis
    from bench.report.tables import verdict_table
    from bench.simulate import simulate_frames, simulated_manifest

    arms = {"a": 0.0, "b": 0.0}
    probes, boots = simulate_frames(arms, boots=6, prompts=20, seed=3)
    boots["corun_group"] = [f"g{b}" for b in boots["boot"]]
    result = stats.analyze(
        Results(manifest=simulated_manifest(arms, boots=6), boots=boots, probes=probes),
        stats.AnalysisOptions(n_resamples=0),
    )
    speed = next(c for c in result.comparisons if c.metric == "output_tokens_per_s")
    assert speed.pairing == "duet"
    lo, hi = speed.ci_unpaired_low, speed.ci_unpaired_high
    unpaired = f"paired (duets); unpaired [{100 * lo:+.1f} %, {100 * hi:+.1f} %]"
    buf = io.StringIO()
    render_analysis(result, Console(file=buf, width=400))
    assert unpaired in buf.getvalue() and "compared within co-run groups" in buf.getvalue()
    assert any(unpaired in cell for cell in verdict_table(result).iloc[:, 3])
