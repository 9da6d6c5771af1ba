"""The search over a history, one round at a time: from every boot so far, either which points
to boot next or the answer (a culprit, a range of points, or that the change did not
reproduce). Pure: the run-ab driver and the calibration follow the same `Search`; the
driver's `next_step` replays its rounds from the boots on disk (each point's boots in the
order they were asked), so a resumed run and `analyze` reach the very state the live run had.

1. **Endpoints first.** The good (point 0) and bad (last point) ends are booted to each
   look of `endpoint_looks` in turn; at a look, Welch on their boots at α over the looks
   (Bonferroni). A difference (beyond `margin`, where one is set) lets the search start;
   none by the last look is the answer "did not reproduce", with the smallest change the
   ends could have shown.
2. **Then the posterior** over the first changed point (`changepoint`) from every boot of
   every point says where to look: the point whose boots split it most evenly is booted
   next (with several slots, the points at its quantiles).
3. **Confirm before naming** (`confirm`): once one candidate holds `propose_at`, fresh boots
   of it and of the point before it must differ; only then is it named, so a named culprit
   is wrong at most α of the time at any step size. An attempt that fails returns to the
   posterior (its boots count there), and the next spends what is left of α.
4. **A range** is the answer when no attempt can be made (a neighbour cannot be booted, its
   boots are spent, the attempts or `max_boots` are used up): the shortest run of candidates
   holding 1 − α, two points at least, with the fresh boots a side that would pin it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from bench.records import CONFIRM_LOOKS
from bench.stats.bisect.changepoint import F, Ints, credible_range, posterior_of_sums
from bench.stats.bisect.confirm import (
    ATTEMPT_POWER,
    PairTest,
    attempt_level,
    boots_to_pin,
    pair_test,
    within_point_sd,
)
from bench.stats.bisect.ends import Shown, endpoint_test, smallest_change
from bench.stats.bisect.search_settings import BisectSettings

Outcome = Literal["boot", "culprit", "range", "not_reproduced"]
# Why a search answered a range (no confirmation could name a point), or that the change did
# not reproduce: a code the report words (`Bisection.why`).
Why = Literal[
    "ends_equal",
    "partner_unbootable",
    "confirmations_used",
    "budget_spent",
    "boots_spent",
    "step_too_small",
    "no_splitting_point",
    "points_full",
]


@dataclass(frozen=True)
class Confirmation:
    """The fresh boots behind a named culprit (or the last attempt that did not name one)."""

    partner: int  # the point before the culprit that is booted (same-code points skipped)
    culprit: int
    attempt: int  # 0-based
    level: float  # the attempt's one-sided level, over its looks
    test: PairTest


@dataclass(frozen=True)
class Step:
    """What the search does next, or what it found."""

    outcome: Outcome
    boots: dict[int, int] = field(default_factory=dict)  # point -> boots to add ("boot")
    first: int | None = None  # the culprit, or the range's first point
    last: int | None = None  # the range's last point (the culprit again when one is named)
    posterior: F | None = None  # P(c = k), k = 1 .. n_points - 1
    endpoints: Shown | None = None  # diff, ci_low, ci_high, df
    why: Why | None = None
    blocked: int | None = None  # "partner_unbootable": the point before the candidate
    confirmation: Confirmation | None = None
    boots_to_pin: int | None = None  # fresh boots a side that would pin a range ("range")
    smallest_change: float | None = None  # what the ends could have shown ("not_reproduced")
    used: int = 0  # boots the step rests on


@dataclass
class _Attempt:
    partner: int
    culprit: int
    start: tuple[int, int]  # boots of partner and culprit when it began: later ones are fresh
    number: int


class Search:
    """The search's state: every boot so far, per point in the order asked, and the
    confirmation under way. `step` says what to do next; `feed` adds boots."""

    def __init__(
        self, s: BisectSettings, unavailable: Collection[int] = (), same: Collection[int] = ()
    ):
        self.s = s
        self.by_point: list[list[float]] = [[] for _ in range(s.n_points)]
        self.counts = np.zeros(s.n_points, dtype=np.int64)
        self._sums = np.zeros((2, s.n_points))  # each point's sum and sum of squares
        self.unavailable = set(unavailable)
        self.same = set(same)
        self.attempt: _Attempt | None = None
        self.tried: list[Confirmation] = []  # attempts that named nothing
        self._ends: tuple[bool, Shown] | None = None

    def feed(self, point: int, values: Sequence[float] | F) -> None:
        v = np.asarray(values, dtype=np.float64)
        self.by_point[point].extend(v.tolist())
        self.counts[point] += v.size
        self._sums[:, point] += (float(v.sum()), float(v @ v))

    def _at(self, p: int) -> F:
        return np.asarray(self.by_point[p], dtype=np.float64)

    @property
    def used(self) -> int:
        return int(self.counts.sum())

    def _arrays(self) -> tuple[Ints, F]:
        pts = np.repeat(np.arange(self.s.n_points), [len(v) for v in self.by_point])
        return pts.astype(np.int64), np.fromiter(
            (x for v in self.by_point for x in v), dtype=np.float64, count=pts.size
        )

    def _room(self, p: int) -> int:
        return self.s.most_boots - len(self.by_point[p]) if p not in self.unavailable else 0

    def step(self) -> Step:
        s, n = self.s, self.s.n_points
        if self._ends is None:  # decided once: later boots at an end are a confirmation's
            good, bad = self._at(0), self._at(n - 1)
            reproduced, shown, need = endpoint_test(good, bad, s)
            if reproduced is None or shown is None:
                return Step("boot", {0: need - good.size, n - 1: need - bad.size}, used=self.used)
            self._ends = (reproduced, shown)
        reproduced, shown = self._ends
        if not reproduced:
            return Step("not_reproduced", endpoints=shown, why="ends_equal",
                        smallest_change=smallest_change(shown, s), used=self.used)  # fmt: skip
        post = posterior_of_sums(
            self.counts.astype(np.float64), self._sums[0], self._sums[1], self.same
        )
        if self.attempt is not None:
            done = self._confirm(self.attempt, shown, post)
            if done is not None:
                return done
        best = int(np.argmax(post)) + 1
        if post[best - 1] >= self.s.propose_at:
            return self._propose(best, shown, post)
        return self._split(post, shown)

    def _confirm(self, a: _Attempt, shown: Shown, post: F) -> Step | None:
        """The attempt's next look: named, more fresh boots, or None once it is over."""
        level = attempt_level(self.s.alpha, a.number)
        partner = self._at(a.partner)[a.start[0] :]
        culprit = self._at(a.culprit)[a.start[1] :]
        test = pair_test(partner, culprit, shown[0], shown[0], level)
        conf = Confirmation(a.partner, a.culprit, a.number, level, test)
        if test.outcome == "named":
            self.attempt = None
            return Step("culprit", first=a.culprit, last=a.culprit, posterior=post,
                        endpoints=shown, confirmation=conf, used=self.used)  # fmt: skip
        if test.outcome == "more":
            ask = {a.partner: test.need - partner.size, a.culprit: test.need - culprit.size}
            ask = {p: k for p, k in ask.items() if k > 0}
            if all(k <= self._room(p) for p, k in ask.items()):
                return Step("boot", ask, posterior=post, endpoints=shown, confirmation=conf,
                            used=self.used)  # fmt: skip
        self.tried.append(conf)
        self.attempt = None
        return None

    def _fitted_step(self, c: int) -> float:
        """The step at candidate c from every boot (mean from c on minus mean before it):
        less inflated than the ends' difference, which was selected for passing its test."""
        n, total = self.counts, self._sums[0]
        before, after = n[:c].sum(), n[c:].sum()
        return float(total[c:].sum() / after - total[:c].sum() / before)

    def _partner(self, c: int) -> int:
        """The point the culprit is compared with: the nearest before it that runs its own
        code (a same-code point is never booted)."""
        m = c - 1
        while m > 0 and m in self.same:
            m -= 1
        return m

    def _propose(self, c: int, shown: Shown, post: F) -> Step:
        """Put `c` to a confirmation, or answer the range when none can be made."""
        partner = self._partner(c)
        first = CONFIRM_LOOKS[0]
        level = attempt_level(self.s.alpha, len(self.tried))
        sd = within_point_sd([self._at(p) for p in range(self.s.n_points)])
        need = boots_to_pin(self._fitted_step(c), sd, level, ATTEMPT_POWER)
        why: Why | None = (
            "partner_unbootable" if partner in self.unavailable
            else "confirmations_used" if len(self.tried) >= self.s.attempts
            else "budget_spent" if self.used >= self.s.max_boots
            else "boots_spent" if min(self._room(partner), self._room(c)) < first
            else "step_too_small" if need is not None and need > CONFIRM_LOOKS[-1]
            else None
        )  # fmt: skip
        if why is not None:
            return self._range(post, shown, why, partner if why == "partner_unbootable" else None)
        start = (len(self.by_point[partner]), len(self.by_point[c]))
        self.attempt = _Attempt(partner, c, start, len(self.tried))
        step = self._confirm(self.attempt, shown, post)
        assert step is not None, "a new attempt asks for its first fresh boots"
        return step

    def _split(self, post: F, shown: Shown) -> Step:
        s, counts, used = self.s, self.counts, self.used
        open_ = counts < s.cap
        open_[[*self.unavailable, *self.same]] = False
        lo, hi = credible_range(post, 1 - s.alpha)
        # the points whose boots could split the candidates lo..hi are lo..hi - 1: when none
        # of them can be built, no boot anywhere tells the candidates apart
        splittable = any(m not in self.unavailable and m not in self.same for m in range(lo, hi))
        go_on = used < s.max_boots and splittable
        asked = _asked(post, counts, open_, s) if go_on else {}
        if asked:
            return Step("boot", asked, posterior=post, endpoints=shown, used=self.used)
        why: Why = (
            "budget_spent" if used >= s.max_boots
            else "no_splitting_point" if not splittable
            else "points_full"
        )  # fmt: skip
        return self._range(post, shown, why)

    def _range(self, post: F, shown: Shown, why: Why, blocked: int | None = None) -> Step:
        """The shortest run holding 1 − α, widened to two candidates (one is a name, and
        only a confirmation names)."""
        lo, hi = credible_range(post, 1 - self.s.alpha)
        if lo == hi:
            left = post[lo - 2] if lo >= 2 else -1.0
            right = post[hi] if hi < post.size else -1.0
            lo, hi = (lo - 1, hi) if left >= right else (lo, hi + 1)
        level = attempt_level(self.s.alpha, min(len(self.tried), self.s.attempts - 1))
        pin = boots_to_pin(
            shown[0], within_point_sd([self._at(p) for p in range(self.s.n_points)]), level
        )
        last = self.tried[-1] if self.tried else None
        return Step("range", first=lo, last=hi, posterior=post, endpoints=shown, why=why,
                    blocked=blocked, confirmation=last, boots_to_pin=pin,
                    used=self.used)  # fmt: skip


def _asked(posterior: F, counts: Ints, open_: np.ndarray, s: BisectSettings) -> dict[int, int]:
    """The points to boot next: at the posterior's quantiles j / (slots + 1)."""
    cdf = np.cumsum(posterior)  # cdf[m - 1] = P(c <= m)
    inner = np.arange(1, s.n_points - 1)
    candidates = inner[open_[inner]]
    out: dict[int, int] = {}
    for j in range(1, s.slots + 1):
        left = [m for m in candidates if m not in out]
        if not left:
            break
        score = np.abs(cdf[np.asarray(left) - 1] - j / (s.slots + 1))
        m = int(left[int(np.argmin(score))])
        out[m] = s.first if counts[m] == 0 else 1
    return out


def replay(
    by_point: Sequence[F], s: BisectSettings, unavailable: Collection[int] = (),
    same: Collection[int] = (),
) -> Step:  # fmt: skip
    """The search's next step from the boots on disk: its rounds replayed, each fed the
    boots it asked for from each point's boots in order, until it asks for boots that are
    not there (the live step) or answers. `unavailable` applies once a point's boots on disk
    are used up."""
    search = Search(s, (), same)
    used = [0] * s.n_points
    while True:
        search.unavailable = {p for p in unavailable if used[p] >= len(by_point[p])}
        step = search.step()
        if step.outcome != "boot":
            return step
        fed = False
        for p, k in step.boots.items():
            take = min(k, len(by_point[p]) - used[p])
            if take > 0:
                search.feed(p, by_point[p][used[p] : used[p] + take])
                used[p] += take
                fed = True
        if not fed:
            return step


def next_step(
    points: Ints, values: F, s: BisectSettings, unavailable: Collection[int] = (),
    same: Collection[int] = (),
) -> Step:  # fmt: skip
    """`replay` on boots given as `points[i]` (the point boot i measured) and `values[i]`;
    a point's boots in the order they appear."""
    pts, vals = np.asarray(points, dtype=np.int64), np.asarray(values, dtype=np.float64)
    return replay([vals[pts == p] for p in range(s.n_points)], s, unavailable, same)


def run_search(
    draw: Callable[[int, int], F], s: BisectSettings, unavailable: Collection[int] = ()
) -> tuple[Step, Ints, F]:
    """Search to the end, booting what each step asks through `draw(point, boots)`."""
    search = Search(s, unavailable)
    while True:
        step = search.step()
        if step.outcome != "boot":
            points, values = search._arrays()
            return step, points, values
        for p, k in step.boots.items():
            search.feed(p, draw(p, k))
