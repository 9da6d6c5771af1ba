"""From loaded results (store.py frames + manifest) to per-arm count arrays and settings.

Cells are aligned on one prompt axis shared by every arm (key: probe_set/probe_id) so that
paired and pigeonhole computations use the same prompt for the same column. A prompt absent
from a boot contributes zero drafts there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from bench.errors import SpecabError

F = NDArray[np.float64]
METRICS = ("acceptance_pos0", "mean_accepted_length")
DEFAULT_MARGINS = {"acceptance_pos0": 0.005, "mean_accepted_length": 0.02}


@dataclass(frozen=True)
class ArmData:
    """Counts of one arm's ok boots, cells (boots, prompts)."""

    name: str
    boot_ids: list[str]
    drafts: F  # (B, P)
    accepted: F  # (B, P) total accepted tokens
    per_pos: F  # (B, P, K) cumulative accepted per position

    @property
    def n_boots(self) -> int:
        return len(self.boot_ids)

    def cells(self, metric: str) -> tuple[F, F]:
        """(numerator, denominator) cells of a metric: pos0, mean length (minus 1), or pos<k>."""
        if metric == "acceptance_pos0":
            return self.per_pos[:, :, 0], self.drafts
        if metric == "mean_accepted_length":
            return self.accepted, self.drafts
        if metric.startswith("pos"):
            return self.per_pos[:, :, int(metric[3:])], self.drafts
        raise ValueError(metric)

    def totals(self, metric: str) -> tuple[F, F]:
        num, den = self.cells(metric)
        return num.sum(axis=1), den.sum(axis=1)

    def head(self, n: int) -> ArmData:
        """The first n boots (sequential looks use boots in launch order within the arm)."""
        return ArmData(
            self.name, self.boot_ids[:n], self.drafts[:n], self.accepted[:n], self.per_pos[:n]
        )

    def subset(self, idx: list[int], name: str) -> ArmData:
        return ArmData(
            name,
            [self.boot_ids[i] for i in idx],
            self.drafts[idx],
            self.accepted[idx],
            self.per_pos[idx],
        )


def _per_pos_matrix(col: pd.Series) -> NDArray[np.int64]:
    values = col.to_numpy()
    lengths = np.fromiter((0 if x is None else len(x) for x in values), int, len(values))
    k = int(lengths.max()) if len(values) else 0
    if len(values) and np.all(lengths == k) and k > 0:
        return np.stack([np.asarray(x, dtype=np.int64) for x in values])
    out = np.zeros((len(values), max(k, 1)), dtype=np.int64)
    for i, x in enumerate(values):
        if x is not None and len(x):
            out[i, : len(x)] = np.asarray(x, dtype=np.int64)
    return out


def arm_data(
    probes: pd.DataFrame, boots: pd.DataFrame, arms: list[str], source: str | None
) -> dict[str, ArmData]:
    """Per-arm cell arrays from the probes of ok boots; a zero-draft boot is an error."""
    ok = boots[boots["status"] == "ok"] if len(boots) else boots
    ok_ids = set(ok["boot_id"]) if len(ok) else set()
    pr = probes[probes["boot_id"].isin(ok_ids)] if len(probes) else probes
    key = pr["probe_set"].astype(str) + "/" + pr["probe_id"].astype(str)
    p_codes, p_uniques = pd.factorize(key, sort=True)
    n_p = len(p_uniques)
    per_pos = _per_pos_matrix(pr["accepted_per_pos"]) if len(pr) else np.zeros((0, 1))
    k = per_pos.shape[1]
    out: dict[str, ArmData] = {}
    for arm in arms:
        rows = ok[ok["arm"] == arm].sort_values(["boot", "attempt"]) if len(ok) else ok
        ids = [str(x) for x in rows["boot_id"]] if len(rows) else []
        b_index = {bid: i for i, bid in enumerate(ids)}
        sel = (pr["arm"] == arm).to_numpy() if len(pr) else np.zeros(0, dtype=bool)
        bi = pr["boot_id"][sel].map(b_index).fillna(-1).to_numpy(dtype=int)
        keep = bi >= 0
        pi = p_codes[sel][keep]
        bi = bi[keep]
        d = np.zeros((len(ids), n_p))
        a = np.zeros((len(ids), n_p))
        ak = np.zeros((len(ids), n_p, k))
        np.add.at(d, (bi, pi), pr["num_drafts"].to_numpy()[sel][keep])
        np.add.at(a, (bi, pi), pr["num_accepted_tokens"].to_numpy()[sel][keep])
        np.add.at(ak, (bi, pi), per_pos[sel][keep])
        for i, bid in enumerate(ids):
            if d[i].sum() <= 0:
                raise SpecabError(
                    f"boot {bid} (arm {arm}) has zero drafts over its probes: speculative "
                    "decoding did not run, so the boot is invalid",
                    file=source,
                    field="probes.num_drafts",
                    fix="check the arm's speculative_config, then rerun that boot "
                    "(delete its boots/ and probes/ files and use --resume)",
                )
        out[arm] = ArmData(arm, ids, d, a, ak)
    return out


def failed_counts(boots: pd.DataFrame, arms: list[str]) -> dict[str, int]:
    if not len(boots):
        return dict.fromkeys(arms, 0)
    failed = boots[boots["status"] != "ok"]
    return {a: int((failed["arm"] == a).sum()) for a in arms}


def _spec_experiment(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in ("spec", "resolved_spec", "experiment_spec"):
        spec = manifest.get(key)
        if isinstance(spec, Mapping) and isinstance(spec.get("experiment"), Mapping):
            return spec["experiment"]
    return {}


def arm_names(manifest: Mapping[str, Any], boots: pd.DataFrame) -> list[str]:
    """Arms in manifest order, then any other arm found in the boots table."""
    listed: list[str] = []
    for a in manifest.get("arms", []) or []:
        name = a.get("name") if isinstance(a, Mapping) else a
        if isinstance(name, str):
            listed.append(name)
    seen = list(dict.fromkeys(boots["arm"].astype(str))) if len(boots) else []
    return listed + [a for a in seen if a not in listed]


@dataclass(frozen=True)
class Settings:
    baseline: str
    alpha: float
    margins: dict[str, float]
    looks: tuple[int, ...] | None


def resolve_settings(
    manifest: Mapping[str, Any],
    arms: list[str],
    *,
    baseline: str | None,
    alpha: float | None,
    margin_pos0: float | None,
    margin_length: float | None,
    looks: list[int] | tuple[int, ...] | None,
) -> Settings:
    """Options override the manifest; every bad value is a SpecabError naming the option."""
    exp = _spec_experiment(manifest)
    if not arms:
        raise SpecabError("no arms in this results directory", field="arms", fix="run boots first")
    base = baseline or manifest.get("baseline") or exp.get("baseline") or arms[0]
    if base not in arms:
        raise SpecabError(
            f"baseline {base!r} is not an arm", field="--baseline", fix=f"use one of: {arms}"
        )
    a = alpha if alpha is not None else manifest.get("alpha", exp.get("alpha", 0.05))
    if not isinstance(a, int | float) or not 0 < float(a) < 0.5:
        raise SpecabError(
            f"alpha {a!r} is out of range", field="--alpha", fix="use a value in (0, 0.5)"
        )
    margins = dict(DEFAULT_MARGINS)
    margins.update(manifest.get("margins") or exp.get("margins") or {})
    for metric, opt, value in (
        ("acceptance_pos0", "--margin-pos0", margin_pos0),
        ("mean_accepted_length", "--margin-length", margin_length),
    ):
        if value is not None:
            margins[metric] = value
        if not margins[metric] > 0:
            raise SpecabError(
                f"margin {margins[metric]!r} must be > 0", field=opt, fix="pass a positive margin"
            )
    lk = looks if looks is not None else (manifest.get("looks") or exp.get("looks"))
    look_t = tuple(int(x) for x in lk) if lk else None
    if look_t is not None and (look_t[0] < 2 or any(b <= a for a, b in pairwise(look_t))):
        raise SpecabError(
            f"looks {list(look_t)} must be strictly increasing boot counts >= 2",
            field="--looks",
            fix="pass e.g. --looks 3,6,10",
        )
    return Settings(str(base), float(a), {m: float(margins[m]) for m in METRICS}, look_t)
