"""Figure titles and captions of the report, keyed by figure file stem (reading order)."""

from __future__ import annotations

CAPTIONS = {
    "fig1_boots": (
        "Per-boot acceptance",
        "Each point is one boot (ratio of sums over its probes) at its launch position; drift "
        "over time or a bad node shows as a trend or an outlier; a failed attempt leaves a gap "
        "(see the boot-time figure). Right: each arm's estimate and interval, computed from "
        "boot-to-boot variation (an arrow marks an interval cut at the metric's range).",
    ),
    "fig2_forest": (
        "Each arm minus baseline",
        "Difference with the interval its verdict rests on (thick: Holm-compatible across the "
        "family of primary metrics; for equivalent, the TOST interval) and the raw interval "
        "(dashed); the grey band is the pre-registered ± margin.",
    ),
    "fig3_positions": (
        "Acceptance per draft position",
        "Cumulative: share of drafts whose first k+1 tokens were all accepted. Conditional: "
        "acceptance at k given k−1 was accepted. Intervals hold jointly over positions; "
        "positions k ≥ 1 are secondary metrics.",
    ),
    "fig4_variance": (
        "Variance components and planning",
        "Standard deviations by source: the SD of a boot's metric (what the intervals use) "
        "and the crossed-ANOVA components of the per-(boot, prompt) cells. Prompts dominate "
        "a cell but are shared by every arm and cancel; the between-boot part does not. "
        "Right: boots per arm for the stated power at max(|difference|, margin).",
    ),
    "fig5_timing": (
        "Boot and probe time",
        "Seconds from server start to /health, and for the measured probes, per attempt; "
        "failed attempts are red crosses and listed with their errors.",
    ),
    "fig6_identity": (
        "Output identity",
        "Probes whose generated text (output_sha256) differs from the baseline's. For greedy "
        "probes different text means different work, so acceptance is not directly "
        "comparable; with sampling (temperature > 0) differences are expected.",
    ),
    "fig7_speed": (
        "Speed: output tokens/s",
        "Each point is one boot's Σ completion tokens / Σ latency at its launch position "
        "(drift or a slow node shows here); right: each arm's geometric mean over boots with "
        "its interval. Below: each arm's ratio to the baseline (Welch on log boot values) with "
        "the interval its verdict rests on (thick), the raw interval (dashed) and the ± speed "
        "margin band; diamonds: speedup over a no-speculation arm at the same concurrency.",
    ),
    "fig8_accepted_length": (
        "Accepted length per verify step",
        "Share of verify steps that accepted 0, 1, …, K draft tokens (from the per-request "
        "histograms where the server reported them, else from the cumulative per-position "
        "counts, which give the same numbers); intervals over boots, per bar.",
    ),
    "fig0_history": (
        "Where the metric changed along the history",
        "Each visited point's mean over its boots with its interval (the number: its boots); "
        "squares: the ends; blue: like the good end, red: like the bad end, grey: neither or "
        "undecided; ticks on the axis: points never booted (x: skipped, its build or boot "
        "failed); shaded: the culprit, or the range of points the search ended with.",
    ),
    "fig10_drift": (
        "Drift within boots",
        "Each arm's acceptance and tokens/s on each pass over the probe set ([probes] passes), "
        "averaged over its boots; the legend gives the first-to-last change, estimated from "
        "each boot's own difference (intervals over boots in the analysis).",
    ),
    "fig11_selection": (
        "Sweep: which configuration to ship",
        "Left: each configuration's objective against its speculative tokens per step, one "
        "line per selection group, with its own (1 - alpha) interval over boots; filled: "
        "cannot be told from the best (MCB); star: the chosen one; shaded: the margin below "
        "the group's best estimate. Right: acceptance per position of those configurations.",
    ),
    "fig9_categories": (
        "Per category",
        "Each arm's acceptance and tokens/s on each category's probes (a boot's ratios of sums "
        "over them), with intervals over boots. Secondary: nothing is adjusted across "
        "categories.",
    ),
}
