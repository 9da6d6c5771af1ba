"""Tables as GitHub-flavoured markdown: any table of the report (`md_table`), and the verdict
table alone for CI job summaries (`verdict_markdown`, what `analyze --format markdown`
prints). Plain text from the typed analysis: no figures are imported to print them."""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.report.tables.verdict_tables import verdict_table
from bench.stats import Analysis


def md_table(df: pd.DataFrame) -> str:
    def cell(v: Any) -> str:
        return " ".join(str(v).split()).replace("|", "\\|")

    head = "| " + " | ".join(cell(c) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def verdict_markdown(analysis: Analysis) -> str:
    """The verdict table as GitHub-flavoured markdown, for CI job summaries."""
    table = verdict_table(analysis).drop(columns=["method"])
    parts = [
        f"### specab {analysis.experiment}: each arm vs {analysis.baseline} (α = {analysis.alpha})",
        "",
        md_table(table) if len(table) else "No comparison: only one arm has results.",
        "",
    ]
    parts += [f"- note: {n}" for n in analysis.notes]
    return "\n".join(parts).rstrip() + "\n"
