"""Regenerate the README's report figures in docs/.

    .venv/bin/python docs/make_report_figures.py                    # simulated, known truth
    .venv/bin/python docs/make_report_figures.py results/<experiment>  # a real run

Without an argument it simulates (bench.simulate.runs, the generative model in bench.simulate.generative) three
arms of 6 boots x 100 prompts: `aux-fix` with no true effect and `aux+rope-fix` with a true
gain, then renders the report and copies figures 1 and 2 here.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from bench.report import render_report
from bench.simulate import simulate_results

DOCS = Path(__file__).resolve().parent
FIGURES = {"fig1_boots.png": "report-boots.png", "fig2_forest.png": "report-forest.png"}


def main(argv: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if argv:
            results = Path(argv[0])
        else:
            arms = {"baseline": 0.0, "aux-fix": 0.0, "aux+rope-fix": 0.1}
            results = simulate_results(
                Path(tmp) / "dspark-v4-sim",
                arms,
                boots=6,
                prompts=100,
                seed=11,
                experiment="dspark-v4-sim",
            )
        page = render_report(results, Path(tmp) / "report")
        for src, dst in FIGURES.items():
            shutil.copyfile(page.parent / src, DOCS / dst)
            print(DOCS / dst)


if __name__ == "__main__":
    main(sys.argv[1:])
