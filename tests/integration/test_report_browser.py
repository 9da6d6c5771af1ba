"""The report as a user opens it: the committed demo run's report.html rendered by headless
Chromium at 1,280 × 800. Every image loads, the forest plot starts within the first screen
(its top above 800 px, the window's height), nothing scrolls sideways and no cell
overflows; and the check itself fails when the forest plot is pushed to 900 px or to the
page's end, or an image is broken. Skips, saying why, where no Chromium can run; `.ci/run`
installs Debian's and fails without it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bench.cli import run

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "goldens" / "results" / "demo"
BROWSER = next((b for b in ("chromium", "chromium-browser") if shutil.which(b)), None)
pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="no chromium on PATH (apt install chromium)"
)

# Measured after load, written into the page for --dump-dom to carry out.
CHECK = """<script>window.addEventListener('load', () => {
  const imgs = [...document.images];
  const forest = document.querySelector('img[data-figure="fig2_forest"]');
  const out = {
    images: imgs.length,
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt),
    forest_top: forest ? forest.getBoundingClientRect().top + window.scrollY : null,
    sideways: document.documentElement.scrollWidth > window.innerWidth,
    overflowing: [...document.querySelectorAll('td,th')]
      .filter(c => c.scrollWidth > c.clientWidth + 1).length,
  };
  const pre = document.createElement('pre');
  pre.id = 'specab-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});</script>"""


def _measure(page: str, where: Path) -> dict[str, object]:
    path = where / "page.html"
    path.write_text(page.replace("</body>", CHECK + "</body>"))
    assert BROWSER is not None
    done = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,800",
         "--virtual-time-budget=10000", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    found = re.search(r'<pre id="specab-check">([^<]*)</pre>', done.stdout)
    assert found, f"chromium printed no measurement (rc {done.returncode}): {done.stderr[-500:]}"
    return dict(json.loads(found.group(1)))


@pytest.fixture(scope="module")
def report_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("report")
    assert run(["report", str(DEMO), "--out", str(out)]) == 0
    return (out / "report.html").read_text()


def test_the_demo_report_leads_with_the_answer_and_renders_whole(
    report_page: str, tmp_path: Path
) -> None:
    m = _measure(report_page, tmp_path)
    assert m["images"] and m["broken"] == []
    assert isinstance(m["forest_top"], float | int) and m["forest_top"] < 800
    assert m["sideways"] is False and m["overflowing"] == 0
    assert report_page.index("Answer") < report_page.index('data-figure="fig2_forest"')
    assert report_page.index('data-figure="fig2_forest"') < report_page.index("id='verdicts'")


def test_the_check_fails_when_the_forest_moves_down_or_an_image_breaks(
    report_page: str, tmp_path: Path
) -> None:
    forest = re.search(r"<h3 id='fig2_forest'>.*?<img [^>]*>", report_page, re.S)
    assert forest is not None
    moved = report_page.replace(forest.group(0), "").replace("</body>", forest.group(0) + "</body>")
    assert _measure(moved, tmp_path)["forest_top"] > 800  # type: ignore[operator]
    top = _measure(report_page, tmp_path)["forest_top"]
    assert isinstance(top, float | int)
    spacer = f'<div style="height:{900 - top:.0f}px"></div>'
    pushed = report_page.replace(forest.group(0), spacer + forest.group(0))
    pushed_top = _measure(pushed, tmp_path)["forest_top"]
    assert isinstance(pushed_top, float | int) and 850 < pushed_top < 950  # fails the < 800
    broken = re.sub(
        r'src="data:image/png;base64,[^"]{20}',
        'src="data:image/png;base64,AAAA',
        report_page,
        count=1,
    )
    assert len(_measure(broken, tmp_path)["broken"]) == 1  # type: ignore[arg-type]
