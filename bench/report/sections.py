"""The text sections of the report (heading, paragraph, optional table), in reading order:
verdicts, arms, speed, accepted length, per category, provenance, identity, notes, failures."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from bench.records import (
    ACCEPTANCE_METRICS,
    DEFAULT_MARGINS,
    METRIC,
    SPEED_METRIC,
    Results,
    TraceResult,
)
from bench.report.tables import (
    Heading,
    accepted_length_table,
    bisection_section,
    category_table,
    draft_length_table,
    estimate_text,
    failed_attempts,
    grouped_notes,
    headlines,
    identity_summary,
    output_identity,
    probe_temperature,
    provenance,
    screening_section,
    selection_section,
    speed_table,
    speedup_table,
    verdict_table,
)
from bench.stats import Analysis, OutputParity, groups_clause

Section = tuple[str, str, pd.DataFrame | None]  # heading, paragraph, optional table


def _verdicts(analysis: Analysis) -> Section:
    verdicts = verdict_table(analysis)
    primary = ", ".join(analysis.primary_metrics)
    return (
        Heading.VERDICTS,
        f"Baseline **{analysis.baseline}**, α = {analysis.alpha}. Primary metrics: {primary} "
        "(one Holm family); every other metric is secondary (its own Holm family across "
        "arms). Each verdict rests on the interval beside it (Holm-compatible within its "
        "family; TOST for equivalent); the raw interval is shown too. Speed is compared as a "
        "ratio (Welch on log boot values) and shown in percent."
        + ("" if len(verdicts) else " No comparison: only one arm has results."),
        verdicts,
    )


def _arms(analysis: Analysis) -> Section:
    rows = pd.DataFrame(
        [
            {
                "arm": a.arm,
                "boots": a.boots,
                "failed": a.failed_boots,
                "effective boots": "—" if a.effective_boots is None else f"{a.effective_boots:.1f}",
                **{
                    m: estimate_text(a.metrics.get(m)) if a.speculative else "no speculation"
                    for m in ACCEPTANCE_METRICS
                },
                "tokens/s": estimate_text(a.metrics.get(SPEED_METRIC), METRIC[SPEED_METRIC].digits),
            }
            for a in analysis.arms
        ]
    )
    return (Heading.ARMS, "Estimates with their intervals, from ok boots only.", rows)


def _shared(analysis: Analysis) -> str:
    s = analysis.shared_machine
    if s is None:
        return ""
    return (
        f" **The boots shared the machine**: {s.shared} of {s.boots} measured their probes "
        f"while another boot ran on the same host (up to {s.most_at_once} at once), so each "
        "tokens/s is a boot's under that load; the shuffled blocks spread it over the "
        f"arms{groups_clause(s)}."
    )


def _speed(analysis: Analysis) -> list[Section]:
    margin = analysis.margins.get(SPEED_METRIC, DEFAULT_MARGINS[SPEED_METRIC])
    primary = SPEED_METRIC in analysis.primary_metrics
    out: list[Section] = [
        (
            "Speed",
            "Output tokens/s per boot = Σ completion tokens / Σ latency over the compared "
            "probes; an arm's value is the geometric mean over its boots, and each arm is "
            f"compared with {analysis.baseline} as a ratio with a Welch interval on the log "
            f"boot values, against a ± {100 * margin:g} % margin. Speed is "
            + ("**primary** in this experiment." if primary else "secondary (its own Holm family).")
            + " On shared CPUs it is noisy: read the between-boot SD."
            + _shared(analysis),
            speed_table(analysis),
        )
    ]
    if analysis.speedups:
        out.append(
            (
                "Speedup over no speculation",
                "Each speculative arm's tokens/s over the no-speculation arm that ran at the "
                "same concurrency (ratio with its raw interval, Welch on log boot values).",
                speedup_table(analysis),
            )
        )
    return out


def parity_sentence(p: OutputParity) -> str:
    """Where a served arm's output tokens part from its reference arm's, in words."""
    head = f"{p.arm} against {p.reference}: output tokens identical on {p.identical} of "
    head += f"{p.compared} probe rows"
    if p.identical < p.compared:
        at = ", ".join(str(i) for i in p.first_difference[:8])
        more = ", …" if len(p.first_difference) > 8 else ""
        head += (
            f"; the other {p.compared - p.identical} part at token {at}{more} "
            f"({', '.join(p.probes_parting[:4])}{', …' if len(p.probes_parting) > 4 else ''})"
            ". At temperature 0 both decode the target greedily, so a token where they part is "
            "a near-tie flipped by numerics or batching; no verdict rests on identical text"
        )
    if p.unchecked:
        head += f"; {p.unchecked} rows unchecked (their server returned no token ids)"
    return head + "."


def _parity(analysis: Analysis) -> str:
    return "\n".join(f"- {parity_sentence(p)}" for p in analysis.parity)


def _traces(traces: Sequence[TraceResult]) -> list[Section]:
    """One section per `specab trace` beside the run: its verdict, the geometry that
    differs, and the tensors in forward order."""
    out: list[Section] = []
    for t in traces:
        said = [f"{t.verdict}.", *(f"- {n}." for n in t.notes)]
        aux = [d for d in t.recomputed if d.name == "target.aux"]  # against an HF run
        rows = pd.DataFrame(
            [{"tensor": d.name, "rel": f"{d.rel:.3g}", "cosine": f"{d.cosine:.6f}",
              "max |Δ|": f"{d.max_abs:.3g}", "agrees": "yes" if d.agrees else "**departs**"}
             for d in [*aux, *t.tensors]]
        )  # fmt: skip
        head = f"Where serving departs: {t.arm} against {t.reference_arm}"
        where = f"({t.forward}; probe {t.probe}, {t.steps} steps, threshold rel {t.threshold:g})"
        out.append((head, " ".join([where, *said[:1]]) + "\n" + "\n".join(said[1:]), rows))
    return out


def sections(
    results: Results,
    analysis: Analysis,
    identity: pd.DataFrame | None = None,
    traces: Sequence[TraceResult] = (),
) -> list[Section]:
    """The report's sections in reading order; `identity`: `output_identity`'s table, when
    the caller has it already (the figures use it too); `traces`: `specab trace`'s answers
    beside the run."""
    arms = results.arms()
    base = analysis.baseline
    prov = provenance(results, base)
    if identity is None:
        identity = output_identity(results.probes, base, arms)
    failed = failed_attempts(results.boots)
    notes = grouped_notes(analysis.notes, arms)  # one per kind, with the arms it applies to
    ident_text = identity_summary(identity, base, probe_temperature(results.manifest))
    where = (
        f"vLLM {', '.join(prov['vllm_versions']) or '—'}; hosts "
        f"{', '.join(prov['hosts']) or '—'}; GPUs {', '.join(prov['gpus']) or '—'}; "
        f"probe sets {', '.join(prov['probe_sets']) or '—'}; "
        f"spec sha256 {prov['spec_sha256'] or '—'}; specab {prov['specab_version'] or '—'}; "
        f"created {prov['created_at'] or '—'}."
    )
    lengths = accepted_length_table(analysis)
    drafting = draft_length_table(analysis)
    by = analysis.breakdown
    said = headlines(results, analysis)
    return [
        *([(Heading.ANSWER, "\n".join(f"- {x}" for x in said), None)] if said else []),
        *([bisection_section(analysis.bisection)] if analysis.bisection else []),
        *([screening_section(analysis.screening)] if analysis.screening else []),
        *([selection_section(analysis.selection)] if analysis.selection else []),
        _verdicts(analysis),
        _arms(analysis),
        *_speed(analysis),
        *(
            [
                (
                    "Accepted length per verify step",
                    "Share of verify steps that accepted 0..K draft tokens ('from': the "
                    "per-request histograms, or the cumulative per-position counts).",
                    lengths,
                )
            ]
            if len(lengths)
            else []
        ),
        *(
            [
                (
                    "Draft lengths",
                    "Some arms draft fewer than K tokens in some steps (ngram, dynamic "
                    "speculation): vLLM's acceptance per position counts a position never "
                    "drafted as rejected; the second column counts only the steps that "
                    "drafted it (simultaneous interval over positions).",
                    drafting,
                )
            ]
            if len(drafting)
            else []
        ),
        *(
            [(f"By {by.by}", by.note[:1].upper() + by.note[1:] + ".", category_table(analysis))]
            if by
            else []
        ),
        *([("Served against trained", _parity(analysis), None)] if analysis.parity else []),
        *_traces(traces),
        ("Provenance", where, prov["arms"]),
        ("Output identity", ident_text, identity),
        *([("Notes", "\n".join(f"- {n.rstrip('.')}." for n in notes), None)] if notes else []),
        (
            "Failed attempts",
            f"{len(failed)} failed boot attempt(s); they are kept as records and excluded.",
            failed if len(failed) else None,
        ),
    ]
