"""`specab trace` on a terminal: the verdict line, the tensors in forward order (relative
error decides, cosine only shown), the geometry each side resolved with the fields that
differ marked, then the notes. From a `TraceResult` only."""

from __future__ import annotations

import math

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.records import ConfigField, TensorDiff, TraceResult


def _num(x: float) -> str:
    return "inf" if math.isinf(x) else ("—" if math.isnan(x) else f"{x:.3g}")


def _tensor_table(title: str, rows: list[TensorDiff], first: str | None) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("tensor", "shape", "max |Δ|", "rel", "cosine", "", "reference module"):
        table.add_column(col, overflow="fold")
    for d in rows:
        mark = "[red]departs[/red]" if not d.agrees else "agrees"
        name = f"[bold]{escape(d.name)}[/bold]" if d.name == first else escape(d.name)
        table.add_row(name, "×".join(map(str, d.shape)), _num(d.max_abs), _num(d.rel),
                      _num(d.cosine), mark, escape(d.reference_module))  # fmt: skip
    return table


def _config_table(fields: list[ConfigField]) -> Table:
    table = Table(title="Geometry each side resolved", title_justify="left")
    for col in ("field", "served (vLLM)", "reference", ""):
        table.add_column(col, overflow="fold")
    for f in fields:
        mark = "[red]differs[/red]" if f.differs else ""
        table.add_row(escape(f.field), escape(str(f.engine)), escape(str(f.reference)), mark)
    return table


def render_trace(console: Console, result: TraceResult) -> None:
    """The whole trace, verdict first."""
    where = f"{result.arm} against {result.reference_arm} ({result.forward})"
    console.print(f"[bold]trace[/bold] {escape(where)}, probe {escape(result.probe)}, "
                  f"{result.steps} step(s), threshold rel {result.threshold:g}")  # fmt: skip
    console.print(f"[bold]{escape(result.verdict)}[/bold]")
    fed = "Fed the aux features vLLM captured (localizes inside the drafter)"
    console.print(_tensor_table(fed, result.tensors, result.first_divergence))
    hf = "Fed an HF transformers run of the target (target.aux: vLLM's against it)"
    console.print(_tensor_table(hf, result.recomputed, result.first_divergence))
    console.print(_config_table(result.config))
    for note in result.notes:
        console.print(f"- {escape(note)}")
