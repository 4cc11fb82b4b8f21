"""The Source protocol: ``poll()`` returns a ``Reading`` and never raises for I/O trouble.

A source is polled from a worker thread at its own cadence. Whatever goes wrong outside (no
driver, permission denied, a process that vanished) comes back as a Reading whose status says so
and whose message and remedy are written for the person at the terminal.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from rltui.model import ERROR, Reading


@runtime_checkable
class Source(Protocol):
    name: str

    def poll(self) -> Reading: ...

    def close(self) -> None: ...


def guarded_poll(source: Source, clock: Callable[[], float] = time.time,
                 poll: Callable[[], Reading] | None = None) -> Reading:
    """Poll ``source`` (or call ``poll``, another way of reading it, such as the stacks
    source's ``dump_now``); an unexpected exception becomes an ``error`` reading, not a
    crash."""
    try:
        return (poll or source.poll)()
    except Exception as exc:  # noqa: BLE001 - the whole point is to contain it
        return Reading(
            source=getattr(source, "name", "?"),
            timestamp=clock(),
            status=ERROR,
            message=f"{type(exc).__name__}: {exc}",
            remedy="This is a bug in rltui; the other panes keep working.",
        )


def reading(source: str, status: str, payload: Any = None, message: str = "", remedy: str = "",
            clock: Callable[[], float] = time.time) -> Reading:
    """Shorthand used by sources to build a Reading stamped now."""
    return Reading(source=source, timestamp=clock(), status=status, payload=payload,
                   message=message, remedy=remedy)
