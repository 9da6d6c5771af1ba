"""The report's tables and paragraphs, as data frames and text from the typed analysis and
the loaded results: verdicts, variance, failed attempts and output identity
(`verdict_tables`), speed and accepted lengths (`speed_tables`), draft lengths
(`drafting_table`), a sweep's choice (`selection_tables`), a history's culprit
(`bisection_table`), a screening's candidates (`screening_table`) and what was run where
(`provenance`)."""

from bench.report.tables.bisection_table import (
    analysis_json,
    bisection_answer,
    bisection_reason,
    bisection_section,
    bisection_table,
)
from bench.report.tables.drafting_table import draft_length_table
from bench.report.tables.headings import LEAD_SECTIONS, UNFOLDED, Heading
from bench.report.tables.headline import boots_said, grouped_notes, headlines
from bench.report.tables.literal_rows import data_row
from bench.report.tables.markdown_tables import md_table, verdict_markdown
from bench.report.tables.provenance import provenance
from bench.report.tables.screening_table import (
    screening_headlines,
    screening_section,
    screening_summary,
    screening_table,
)
from bench.report.tables.selection_tables import render_selection, selection_section
from bench.report.tables.speed_tables import (
    accepted_length_table,
    across_p,
    arm_summary,
    category_table,
    estimate_text,
    group_verdict,
    speed_table,
    speedup_table,
)
from bench.report.tables.verdict_tables import (
    ab_comparisons,
    difference,
    failed_attempts,
    identity_summary,
    output_identity,
    probe_temperature,
    variance_table,
    verdict_table,
)

__all__ = [
    "LEAD_SECTIONS", "UNFOLDED", "Heading",
    "ab_comparisons", "accepted_length_table", "across_p", "analysis_json", "arm_summary",
    "bisection_answer", "bisection_reason", "bisection_section", "bisection_table", "boots_said",
    "category_table", "data_row", "difference", "draft_length_table", "estimate_text",
    "failed_attempts", "group_verdict", "grouped_notes", "headlines", "identity_summary",
    "md_table", "output_identity", "probe_temperature", "provenance", "render_selection",
    "screening_headlines", "screening_section", "screening_summary",
    "screening_table", "selection_section", "speed_table", "speedup_table",
    "variance_table", "verdict_markdown", "verdict_table",
]  # fmt: skip
