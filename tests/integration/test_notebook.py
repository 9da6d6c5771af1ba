"""notebooks/analysis.ipynb runs top to bottom against a simulated results directory."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "analysis.ipynb"


@pytest.fixture
def venv_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kernel spec named python3 that runs *this* interpreter (the project venv), found
    first via JUPYTER_PATH, so a system-wide python3 kernel cannot shadow it."""
    spec_dir = tmp_path / "jupyter" / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "specab venv",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return "python3"


def _execute(
    results_dir: Path,
    kernel: str,
    cwd: Path,
    monkeypatch: pytest.MonkeyPatch,
    figures: int = 8,
) -> str:
    """Run the notebook on `results_dir`; return its text output (`figures` PNGs checked)."""
    monkeypatch.setenv("SPECAB_RESULTS_DIR", str(results_dir))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert any("parameters" in c.metadata.get("tags", []) for c in nb.cells)
    client = NotebookClient(
        nb,
        kernel_name=kernel,
        timeout=300,
        resources={"metadata": {"path": str(cwd)}},  # cwd: not the repo root
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    pngs = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == figures
    return "\n".join(
        str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs
    )


@pytest.mark.slow
def test_notebook_with_a_no_speculation_arm_and_categories(
    venv_kernel: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Speed, speedup over no speculation, accepted length and per-category sections."""
    from bench.simulate import simulate_results

    root = simulate_results(
        tmp_path / "ns",
        {"plain": 0.0, "a": 0.0, "b": 0.2},
        boots=3,
        prompts=20,
        baseline="a",
        no_spec=["plain"],
        speed={"plain": 1.0, "a": 1.5, "b": 1.4},
        categories=["code", "chat"],
    )
    text = _execute(root, venv_kernel, tmp_path, monkeypatch, figures=9)
    assert "no speculation" in text and "speedup" in text  # speed tables
    assert "across_groups adjusts" in text and "code" in text  # categories
    assert "histogram" in text  # accepted-length table: where it came from


@pytest.mark.slow
def test_notebook_executes_and_shows_every_figure(
    sim_results_dir: Path, venv_kernel: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    text = _execute(sim_results_dir, venv_kernel, tmp_path, monkeypatch)
    # It loaded *this* directory through the package, with the kernel in this venv.
    assert "sim-report: arms ['baseline', 'aux-fix', 'aux+rope-fix']" in text
    assert "improved" in text  # the verdict table of the simulated gain
    assert "simulated failure" in text  # failed attempts table


@pytest.mark.slow
def test_notebook_with_one_speculative_token(
    venv_kernel: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """K = 1 (MTP k=1): the notebook runs through, one draft position everywhere."""
    from bench.simulate import simulate_results

    root = simulate_results(tmp_path / "k1", {"a": 0.0, "b": 0.2}, boots=3, prompts=20, positions=1)
    text = _execute(root, venv_kernel, tmp_path, monkeypatch)
    assert "sim: arms ['a', 'b']" in text and "improved" in text
