"""Fake `vllm` CLI entry: `vllm serve ARGS` (specab's gang runner falls back to it when the
vLLM build has no `vllm.entrypoints.cli.serve`, as this fake package has not). Serves like
the fake API server; with `--headless` it is a gang's other member (see vllm._gang)."""

from __future__ import annotations

import runpy
import sys


def main() -> None:
    if sys.argv[1:2] != ["serve"]:
        sys.exit(f"fake vllm CLI: only `serve` is supported, got {sys.argv[1:2]}")
    sys.argv = [sys.argv[0], *sys.argv[2:]]
    runpy.run_module("vllm.entrypoints.openai.api_server", run_name="__main__")
