"""Progress of a running check, shared by both checks, the CLI and the checks screen."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Progress:
    """Where a check stands. ``phase`` names the step (``rollout``, ``single``, ``sequential``,
    ``concurrent``); ``item`` is the result that just finished, if any, so a pane can add one
    row without re-reading the whole report."""

    phase: str
    done: int
    total: int
    message: str = ""
    item: Any = None


ProgressCallback = Callable[[Progress], None]


def report_progress(callback: ProgressCallback | None, progress: Progress) -> None:
    """Call the callback; a failing callback must not kill the check (its results matter more
    than one missed progress line)."""
    if callback is None:
        return
    try:
        callback(progress)
    except Exception:  # noqa: BLE001 - a display problem never stops a check
        pass


def cancelled(cancel: threading.Event | None) -> bool:
    return cancel is not None and cancel.is_set()
