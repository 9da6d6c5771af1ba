"""`analyze --by output_position`: each probe row cut into windows along its output, from the
ordered counts of its verify steps (`step_accepted`, `step_drafted`).

A step's position is the output token it starts at: 1 (the prefill's token) plus the tokens
the steps before it emitted (accepted + 1 each). Each window of a row becomes one row of a
new probe frame, with the counts of the steps that start in it, so the breakdown compares
arms per window with the same boot-level statistics as the whole run (a boot's ratio of sums
over the window's steps of every probe). Steps without drafts (ngram, dynamic speculation)
emit a token that no step records: there a position counts only the recorded steps' tokens,
and a note says in how many requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
from numpy.typing import NDArray

from bench.errors import SpecabError
from bench.records import list_lengths, list_values

STEP_COLUMNS = ("step_accepted", "step_drafted")
Ints = NDArray[np.int64]


@dataclass(frozen=True)
class Steps:
    """Every step of the speculative rows end to end: its row, position and counts."""

    rows: Ints  # the probe row (index into the speculative rows) of each step
    position: Ints  # output token the step starts at (1-based)
    accepted: Ints
    drafted: Ints


def output_windows(
    probes: pd.DataFrame, edges: list[float], source: str | None
) -> tuple[pd.DataFrame, list[str]]:
    """The speculative probe rows, one per (row, window), with the window's counts; the
    window's name is the row's category. Notes say what positions approximate."""
    spec = probes[pd.to_numeric(probes["num_drafts"], errors="coerce").fillna(0) > 0]
    spec = spec.reset_index(drop=True)
    if not len(spec):
        raise SpecabError(
            "no speculative probe rows: nothing drafted, so nothing to place along the output",
            file=source, field="--by", fix="group by category or prompt_tokens",
        )  # fmt: skip
    steps = _steps(spec, source)
    cuts = edges or _quartiles(steps.position)
    window = np.searchsorted(np.asarray(cuts, dtype=np.float64), steps.position, side="right")
    names = _window_names(window, steps.position)
    n, w_count = len(spec), len(cuts) + 1
    cell = steps.rows * w_count + window
    k_row = np.maximum(list_lengths(spec["accepted_per_pos"]), 0)
    frame = spec.loc[np.repeat(np.arange(n), w_count)].reset_index(drop=True)
    frame["probe_id"] = frame["probe_id"].astype(str) + [f"@w{i + 1}" for i in range(w_count)] * n
    frame["category"] = [names.get(i) for i in range(w_count)] * n

    def total(weights: NDArray[np.int64] | NDArray[np.bool_]) -> Ints:
        return np.bincount(cell, weights=weights, minlength=n * w_count).astype(np.int64)

    ones = np.ones_like(steps.accepted)
    frame["num_drafts"] = total(ones)
    frame["num_draft_tokens"] = total(steps.drafted)
    frame["num_accepted_tokens"] = total(steps.accepted)
    frame["completion_tokens"] = total(steps.accepted + 1)
    frame["latency_s"] = np.nan  # no timing per window: the windows compare acceptance only
    k_cell, k_max = np.repeat(k_row, w_count), int(k_row.max())
    frame["accepted_per_pos"] = _lists([total(steps.accepted > p) for p in range(k_max)], k_cell)
    frame["drafted_per_pos"] = _lists([total(steps.drafted > p) for p in range(k_max)], k_cell)
    frame["acceptance_histogram"] = _lists(
        [total(steps.accepted == j) for j in range(k_max + 1)], k_cell + 1
    )
    frame = frame.drop(columns=[c for c in STEP_COLUMNS if c in frame.columns])
    keep, said = _every_boot_drafts(frame, np.tile(np.arange(w_count), n), names)
    return frame[keep].reset_index(drop=True), _notes(spec, steps) + said


def _every_boot_drafts(
    frame: pd.DataFrame, window: Ints, names: dict[int, str]
) -> tuple[NDArray[np.bool_], list[str]]:
    """The rows of windows where every boot has a verify step (a boot with none there would
    have no acceptance to compare), and a note for each window left out."""
    drafts = frame["num_drafts"].groupby([frame["boot_id"].to_numpy(), window]).sum()
    least = drafts.groupby(level=1).min()
    gone = [int(w) for w in least.index if least[w] == 0 and int(w) in names]
    said = []
    for w in gone:
        empty = drafts.xs(w, level=1)
        said.append(
            f"output window {names[w]} left out: {int((empty == 0).sum())} boot(s) have no "
            f"verify step there (e.g. {empty[empty == 0].index[0]}); their outputs end before it"
        )
    used = [w for w in names if w not in gone]
    return np.isin(window, used), said


def _steps(spec: pd.DataFrame, source: str | None) -> Steps:
    missing = [c for c in STEP_COLUMNS if c not in spec.columns]
    lengths = np.maximum(list_lengths(spec[STEP_COLUMNS[0]]), 0) if not missing else None
    if lengths is None or (lengths == 0).any():
        lacking = int((lengths == 0).sum()) if lengths is not None else len(spec)
        old = lacking == len(spec)
        raise SpecabError(
            "acceptance along the output needs each request's verify steps in order "
            "(step_accepted), which "
            + ("these results do not hold: they predate step recording, or were measured "
               "with acceptance_source = \"metrics_delta\"" if old else
               f"{lacking} speculative probe rows lack"),
            file=source, field="--by output_position",
            fix=("rerun the arms with acceptance_source = \"auto\" (the default: each probe "
                 "records its steps); or group by prompt_tokens") if old else
            ("rerun those boots (a boot whose per-request metrics were missing); or group by "
             "prompt_tokens"),
        )  # fmt: skip
    accepted, n_acc = list_values(spec["step_accepted"])
    drafted, n_drafted = list_values(spec["step_drafted"])
    if not np.array_equal(n_acc, n_drafted):
        raise SpecabError(
            "step_accepted and step_drafted differ in length in some probe rows",
            file=source, field="probes.step_drafted",
            fix="the files were not written by specab: rerun those boots",
        )  # fmt: skip
    rows = np.repeat(np.arange(len(spec), dtype=np.int64), n_acc)
    emitted = accepted + 1
    before = np.cumsum(emitted) - emitted  # tokens emitted by all earlier steps, every row
    first = np.concatenate([[0], np.cumsum(n_acc)[:-1]])
    position = 1 + before - before[first[rows]]
    return Steps(rows, position.astype(np.int64), accepted, drafted)


def _quartiles(position: Ints) -> list[float]:
    return sorted({float(round(x)) for x in np.quantile(position, [0.25, 0.5, 0.75])})


def _window_names(window: Ints, position: Ints) -> dict[int, str]:
    """Each used window named by the positions its steps start at ("2: tokens 33–70")."""
    lo = pd.Series(position).groupby(window).min()
    hi = pd.Series(position).groupby(window).max()
    return {int(i): f"{int(i) + 1}: tokens {lo[i]}–{hi[i]}" for i in lo.index}


def _lists(columns: list[Ints], length: Ints) -> pd.Series:
    """The per-cell lists of `columns` (one array per list entry), each cut to its length."""
    matrix = np.stack(columns, axis=1) if columns else np.zeros((len(length), 0), np.int64)
    keep = np.arange(matrix.shape[1])[None, :] < length[:, None]
    offsets = np.concatenate([[0], np.cumsum(keep.sum(axis=1))]).astype(np.int32)
    arr = pa.ListArray.from_arrays(pa.array(offsets), pa.array(matrix[keep], pa.int64()))
    return pd.Series(pd.arrays.ArrowExtensionArray(arr))


def _notes(spec: pd.DataFrame, steps: Steps) -> list[str]:
    """Where a step's position is approximate: the recorded steps' tokens fall short of the
    completion (steps without drafts emitted the rest). A last step cut by max_tokens makes
    them exceed it, which moves no step's position."""
    emitted = np.bincount(steps.rows, weights=steps.accepted + 1, minlength=len(spec)) + 1
    completion = pd.to_numeric(spec["completion_tokens"], errors="coerce").to_numpy()
    off = int((emitted < completion).sum())
    if not off:
        return []
    return [
        f"output positions count the tokens of recorded verify steps: in {off} of {len(spec)} "
        "requests they fall short of the completion (steps without drafts, as ngram's, emit "
        "tokens no step records), so positions there are approximate"
    ]
