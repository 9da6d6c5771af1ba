"""The headings of the report's sections that the page treats by name: the answers it leads
with and the tables it never folds. Sections are made in several modules and placed by
`page`; one enum keeps a renamed heading from silently dropping out of the lead."""

from __future__ import annotations

from enum import StrEnum


class Heading(StrEnum):
    ANSWER = "Answer"
    CULPRIT = "Which change did it"
    SCREENING = "Which candidates lowered it"
    SELECTION = "Selection"
    VERDICTS = "Verdicts"
    ARMS = "Arms"


# In reading order, before the table of contents.
LEAD_SECTIONS = (Heading.ANSWER, Heading.CULPRIT, Heading.SCREENING, Heading.SELECTION)
# Shown whole however long.
UNFOLDED = (Heading.VERDICTS, Heading.ARMS)
