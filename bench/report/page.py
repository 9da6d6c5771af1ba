"""The report as a page, in reading order: the answer first (one sentence per compared arm
and primary metric, and a search's or a screening's answer), the pictures that show it (the
history of a search, the forest of differences, each boot), a table of contents, then the
details — long tables folded, each with a line saying what it holds — and the other figures.
report.md follows the same order. Rendering only: the sections and figures are made
elsewhere."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from bench.report.sections import Section
from bench.report.tables import LEAD_SECTIONS, UNFOLDED, md_table

LEAD_FIGURES = ("fig0_history", "fig2_forest", "fig1_boots")
FOLD_ROWS = 8  # a longer table is folded under a one-line summary, except these

_CSS = """
body{font-family:system-ui,sans-serif;max-width:1180px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em;max-width:100%}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top;
overflow-wrap:anywhere}
th{background:#f3f3f3} img{max-width:100%;border:1px solid #eee}
.caption{color:#444;max-width:60em} details{margin:.3em 0 1em}
summary{cursor:pointer;color:#135} .answer li{margin:.25em 0}
"""


@dataclass(frozen=True)
class ReportFigure:
    """One rendered figure: file stem, heading, one-line caption and PNG bytes."""

    stem: str
    title: str
    caption: str
    png: bytes


def _split(
    sections: Sequence[Section], figures: Sequence[ReportFigure]
) -> tuple[list[Section], list[ReportFigure], list[Section], list[ReportFigure]]:
    lead = [s for s in sections if s[0] in LEAD_SECTIONS]
    rest = [s for s in sections if s[0] not in LEAD_SECTIONS]
    order = {stem: i for i, stem in enumerate(LEAD_FIGURES)}
    shown = sorted((f for f in figures if f.stem in order), key=lambda f: order[f.stem])
    return lead, shown, rest, [f for f in figures if f.stem not in order]


def _anchor(heading: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in heading.lower()).strip("-")


def _bullets(text: str) -> list[str] | None:
    lines = text.splitlines()
    return [x[2:] for x in lines] if lines and all(x.startswith("- ") for x in lines) else None


def markdown_page(title: str, sections: Sequence[Section], figures: Sequence[ReportFigure]) -> str:
    lead, shown, rest, later = _split(sections, figures)
    parts = [f"# {title}", ""]
    for heading, text, table in lead:
        parts += _md_section(heading, text, table)
    for f in shown:
        parts += [f"### {f.title}", "", f.caption, "", f"![{f.title}]({f.stem}.png)", ""]
    parts += ["## Contents", ""]
    parts += [f"- [{h}](#{_anchor(h)})" for h, _, _ in rest] + ["- [Figures](#figures)", ""]
    for heading, text, table in rest:
        parts += _md_section(heading, text, table)
    parts += ["## Figures", ""]
    for f in later:
        parts += [f"### {f.title}", "", f.caption, "", f"![{f.title}]({f.stem}.png)", ""]
    return "\n".join(parts)


def _md_section(heading: str, text: str, table: pd.DataFrame | None) -> list[str]:
    parts = [f"## {heading}", "", text, ""]
    if table is not None and len(table):
        parts += [md_table(table), ""]
    return parts


def _inline(text: str) -> str:
    """Escape, then turn **bold** into <strong>; the only markup the sections use."""
    out, bold = [], False
    for i, piece in enumerate(html.escape(text).split("**")):
        if i:
            out.append("</strong>" if bold else "<strong>")
            bold = not bold
        out.append(piece)
    return "".join(out)


def _html_section(heading: str, text: str, table: pd.DataFrame | None) -> str:
    items = _bullets(text)
    body = (
        "<ul class='answer'>" + "".join(f"<li>{_inline(x)}</li>" for x in items) + "</ul>"
        if items is not None
        else f"<p>{_inline(text)}</p>"
    )
    out = f"<h2 id='{_anchor(heading)}'>{html.escape(heading)}</h2>{body}"
    if table is None or not len(table):
        return out
    grid = table.to_html(index=False, escape=True, border=0, na_rep="—")
    if len(table) <= FOLD_ROWS or heading in UNFOLDED:
        return out + grid
    first = text.replace("**", "").split(". ")[0].rstrip(".")
    summary = f"{len(table)} rows: {first[:160]}" if first else f"{len(table)} rows"
    return out + f"<details><summary>{html.escape(summary)}</summary>{grid}</details>"


def _img(f: ReportFigure, heading: str = "h3") -> str:
    data = base64.b64encode(f.png).decode()
    return (
        f"<{heading} id='{f.stem}'>{html.escape(f.title)}</{heading}>"
        f"<p class='caption'>{html.escape(f.caption)}</p>"
        f'<img alt="{html.escape(f.title)}" data-figure="{f.stem}" '
        f'src="data:image/png;base64,{data}">'
    )


def html_page(title: str, sections: Sequence[Section], figures: Sequence[ReportFigure]) -> str:
    lead, shown, rest, later = _split(sections, figures)
    name = html.escape(title)
    parts = [
        "<!doctype html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>{name}</title>',
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{name}</h1>",
        *(_html_section(*s) for s in lead),
        *(_img(f) for f in shown),
        "<h2 id='contents'>Contents</h2><ul>",
        *(f"<li><a href='#{_anchor(h)}'>{html.escape(h)}</a></li>" for h, _, _ in rest),
        "<li><a href='#figures'>Figures</a></li></ul>",
        *(_html_section(*s) for s in rest),
        "<h2 id='figures'>Figures</h2>",
        *(_img(f) for f in later),
        "</body></html>",
    ]
    return "\n".join(parts)
