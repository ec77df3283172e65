"""Markdown tables, the one shape every report's tables take: a header row, the rule under it
(one ``---`` per column, counted from the labels), and rows of cells."""

from __future__ import annotations

from collections.abc import Iterable


def table_row(cells: Iterable[str]) -> str:
    """One row of a Markdown table: ``| a | b |``."""
    return "| " + " | ".join(cells) + " |"


def table_head(labels: Iterable[str]) -> list[str]:
    """A Markdown table's header row and the rule under it, one ``---`` per label."""
    labels = list(labels)
    return [table_row(labels), "|" + "---|" * len(labels)]
