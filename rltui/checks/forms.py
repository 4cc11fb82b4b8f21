"""What the checks screen needs to know of a check, without importing Textual: the form's
fields, how the typed values become a spec, the run entry point, and how a report becomes a
summary, table rows and exported files.

The screen is generic over ``CheckForm``; each check describes itself in its ``form.py``. The
``run`` callable reaches the outside world (HTTP, a child process), so the screen calls it only
from a thread worker, like the app's other sources.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class FormField:
    name: str
    label: str
    placeholder: str = ""
    default: str = ""
    secret: bool = False  # an API key: typed hidden, never echoed, never exported
    help: str = ""


@dataclass(frozen=True)
class CheckForm:
    kind: str  # "rollout" | "workflow"
    title: str
    intro: str
    fields: tuple[FormField, ...]
    # form values -> spec; raises ValueError with a message the form shows
    build_spec: Callable[[Mapping[str, str]], Any]
    run: Callable[..., Any]  # run(spec, progress=, cancel=) -> report
    columns: tuple[str, ...]
    rows: Callable[[Any], Sequence[tuple[str, ...]]]  # report -> rows, worst first
    item_row: Callable[[Any], tuple[str, ...] | None]  # a Progress.item -> a live row
    summary: Callable[[Any], str]  # report -> a few lines
    export: Callable[[Any, Path], list[Path]]  # report, folder -> files written
    # report, row index (in ``rows`` order) -> (title, full text) for the row's detail view
    detail: Callable[[Any, int], tuple[str, str]] | None = None
    # report -> True when the check could not run at all (no server, a bad module): the
    # screen then shows the reason and no progress bar, whose "done" would say otherwise
    could_not_run: Callable[[Any], bool] | None = None


def text_value(values: Mapping[str, str], name: str) -> str:
    return (values.get(name) or "").strip()


def int_value(values: Mapping[str, str], name: str, label: str, default: int | None = None,
              minimum: int = 1) -> int | None:
    """A whole number from a form field; empty gives ``default``."""
    text = text_value(values, name)
    if not text:
        return default
    try:
        number = int(text)
    except ValueError:
        raise ValueError(f"{label}: {text!r} is not a whole number") from None
    if number < minimum:
        raise ValueError(f"{label}: must be at least {minimum}")
    return number


def float_value(values: Mapping[str, str], name: str, label: str,
                default: float | None = None) -> float | None:
    text = text_value(values, name)
    if not text:
        return default
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"{label}: {text!r} is not a number") from None
    if not number > 0:
        raise ValueError(f"{label}: must be more than 0")
    return number

