"""A sweep of 20 cells on real Ray leaves at most the bound of compile caches on its node:
each cell is a definition with its own cache (the fake server "compiles" 256 KiB into it),
and after each boot the least recently used caches past `--compile-cache-gb` go. Without
the bound all 20 would stay, 5 MiB against a bound of 1 MiB."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.cli import run
from bench.run import disk_bytes, gib_to_bytes, node_caches
from bench.store import load_results

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("shared_ray")]
CELLS = 20
COMPILED = 256 * 1024
BOUND_GB = 0.001  # 1.07 MB: three or four of these caches


def test_a_sweep_of_20_cells_leaves_at_most_the_bound(
    tmp_path: Path, fake_experiment: Callable[..., Path]
) -> None:
    spec = fake_experiment(
        tmp_path, {"cell": {"SPECAB_FAKE_COMPILE_BYTES": str(COMPILED), "SPECAB_FAKE_BOOT_S": "0"}},
        boots_per_arm=1, name="bounded-sweep", probes={"warmup": 0},
    )  # fmt: skip
    levels = ", ".join(f'"0.{50 + i}"' for i in range(CELLS))
    with spec.open("a") as f:
        f.write(f'\n[sweep]\ngrid = {{ "env.SPECAB_FAKE_ACCEPT" = [{levels}] }}\n')
    root = tmp_path / "results"
    argv = ["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report", "--no-duets"]
    assert run([*argv, "--compile-cache-gb", str(BOUND_GB)]) == 0
    ok = load_results(root).ok_boots()
    assert ok["arm"].nunique() == CELLS  # every cell booted, each with its own cache
    assert set(ok["compile_cache"]) == {"cold"}
    node = Path(os.environ["SPECAB_WORKDIR"])  # the session's (conftest), this node's root
    kept = node_caches(node)
    assert 0 < sum(disk_bytes(c) for c in kept) <= gib_to_bytes(BOUND_GB), kept
    # the last cells booted are the ones kept
    last = ok.sort_values("order")["arm"].tolist()[-len(kept) :]
    assert {c.parent.parent.name for c in kept} == {"bounded-sweep"}
    assert len(kept) >= 2 and {c.name for c in kept} == {_key(root, a) for a in last}


def _key(root: Path, arm: str) -> str:
    definitions = {a.name: a.definition_sha256 for a in load_results(root).manifest.arms}
    return f"def-{definitions[arm][:16]}"
