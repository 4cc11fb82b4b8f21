"""The tables' sort order (``,`` ``.`` and a header click): pure, so it is tested on its own.

A column sorts by the value a pane gives for it (bytes, seconds, a rank), else by what its cell
says: a leading number (``61.4/80G``, ``98%``, ``8 · 20s``) as a number, other text as text.
Rows with nothing to sort by (``-``, ``N/A``, empty) stay last whichever way the order goes, and
rows that tie keep the pane's own order (by rank), so a re-sort never shuffles equal rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeVar

K = TypeVar("K")

MISSING = frozenset({"", "-", "N/A", "?"})
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")

# What one row holds for a column: a number, a text, or None (nothing to sort by).
Value = float | int | str | None


def cell_value(text: str) -> Value:
    """What a cell's text sorts by: its leading number, else the text itself (any case)."""
    text = text.strip()
    if text in MISSING:
        return None
    found = _NUMBER.match(text)
    return float(found.group()) if found else text.lower()


def _key(value: Value) -> tuple[int, float, str]:
    # numbers before texts: a column rarely mixes them, and never inside one comparison
    if isinstance(value, str):
        return (1, 0.0, value)
    return (0, float(value or 0), "")


def sort_rows(keys: Sequence[K], value: Callable[[K], Value], reverse: bool = False) -> list[K]:
    """``keys`` ordered by ``value``; ties keep their order, rows without a value stay last."""
    values = [(k, value(k)) for k in keys]
    present = [(k, v) for k, v in values if v is not None]
    missing = [k for k, v in values if v is None]
    # Python's sort is stable with reverse=True too: equal rows stay in the pane's order
    present.sort(key=lambda kv: _key(kv[1]), reverse=reverse)
    return [k for k, _ in present] + missing


def next_column(columns: Sequence[str], current: str | None, step: int) -> str | None:
    """The sort column ``step`` places right (``.``) or left (``,``) of ``current``, wrapping;
    no sort yet counts as the first column (the pane's own order is by it)."""
    if not columns:
        return None
    at = columns.index(current) if current in columns else 0
    return columns[(at + step) % len(columns)]
