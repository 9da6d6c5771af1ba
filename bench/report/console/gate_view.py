"""The human view of `specab gate`: one row per arm and metric, then what it cannot rule out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from bench.report.tables import data_row

if TYPE_CHECKING:
    from bench.records import Reference, ReferenceArm
    from bench.stats import GateCheck, GateResult


def _fmt(c: GateCheck, v: float) -> str:
    return f"{100 * v:+.1f} %" if c.scale == "relative" else f"{v:+.4f}"


def render_gate(ref: Reference, new: dict[str, ReferenceArm], answer: GateResult) -> None:
    """The checks as a table, what each failure means, the reference's provenance, and what
    differs between the two runs beyond the patch."""
    from bench.report.console.end_of_run import table_console

    name, checks, alpha = answer.reference, answer.checks, answer.alpha
    out = table_console()
    t = Table(
        title=f"Gate against reference {name} (non-inferiority, one-sided {1 - alpha:.0%} "
        "bound on boot values, Welch)"
    )
    for col in ("arm", "metric", "reference", "new", "difference", "lower bound", "margin",
                "boots", "verdict", "boots for ~alpha false failures"):  # fmt: skip
        t.add_column(col, overflow="fold")
    for c in checks:
        data_row(
            t,
            c.arm if c.arm == c.reference_arm else f"{c.arm} vs {c.reference_arm}",
            c.metric,
            f"{c.reference:.4g}",
            f"{c.new:.4g}",
            _fmt(c, c.difference),
            _fmt(c, c.lower_bound),
            f"-{100 * c.margin:g} %" if c.scale == "relative" else f"-{c.margin:g}",
            f"{c.boots_new} / {c.boots_reference}",
            c.verdict,
            str(c.boots_needed or "?"),
        )
    out.print(t)
    for c in checks:
        if c.verdict == "inconclusive":
            out.print(
                f"- {c.arm} {c.metric}: inconclusive: the boots cannot show it is within "
                f"{c.margin:g} of the reference; ≈{c.boots_needed} boots per side would keep "
                "false failures near alpha at this noise",
                markup=False,
            )
        elif c.verdict == "regressed":
            out.print(f"- {c.arm} {c.metric}: regressed beyond the margin", markup=False)
    out.print(
        f"reference {name}: saved {ref.created_at} from {ref.source} ({ref.machine.cpu})",
        markup=False,
    )
    for arm in sorted({c.reference_arm for c in checks}):
        r = ref.arms[arm]
        n = next((new[c.arm] for c in checks if c.reference_arm == arm), None)
        if n is None:
            continue
        for key in ("vllm_versions", "hosts"):
            if getattr(n, key) != getattr(r, key):
                out.print(
                    f"note: {arm}: {key} differ: reference {getattr(r, key)}, new "
                    f"{getattr(n, key)}",
                    markup=False,
                )
    for line in answer.modes:
        out.print(f"two modes: {line}", markup=False)
    out.print(f"note: {answer.caveat}", markup=False)
