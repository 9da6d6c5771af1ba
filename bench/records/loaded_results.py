"""A results directory as loaded: the manifest, every boot attempt and the probes of ok boots,
one frozen record. `bench.store.load_results` builds it from disk; tests, simulations and
notebooks build it from frames in memory. Every statistics entry point takes it whole, so
the three parts of one run travel together and never mix with another run's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.records.manifest import Manifest

if TYPE_CHECKING:  # pandas is imported by whoever holds a frame; `records` stays light
    import pandas as pd


@dataclass(frozen=True)
class Results:
    """One run's data. `probes` holds only probes of boots with status ok (the loader's
    promise; a frame built in memory may hold more, and the statistics keep ok boots only).
    `root`: the directory it was read from, None when built in memory."""

    manifest: Manifest
    boots: pd.DataFrame
    probes: pd.DataFrame
    root: Path | None = None

    @property
    def experiment(self) -> str:
        return self.manifest.experiment

    def ok_boots(self) -> pd.DataFrame:
        return self.boots[self.boots["status"] == "ok"].reset_index(drop=True)

    def arms(self) -> list[str]:
        """Arms in manifest order (then any extra arm found on disk)."""
        listed = self.manifest.arm_names()
        seen = list(dict.fromkeys(self.boots["arm"].tolist())) if len(self.boots) else []
        return listed + [a for a in seen if a not in listed]

    def with_frames(self, boots: pd.DataFrame, probes: pd.DataFrame) -> Results:
        """The same run with other rows (a subset: the first boots of a look, one arm)."""
        return Results(manifest=self.manifest, boots=boots, probes=probes, root=self.root)
