"""Units for people: bytes, ages, durations and clock times, each written by one function.

Pure (the standard library only): the parsers, the diagnosis, the reports and the UI all format
with these, so one quantity reads the same way wherever it is shown. Where places have long
written a quantity in different forms (a report table's ``3.0G``, a symptom's ``3.00 GiB``,
a header's ``12s``, a symptom's ``12 s``), the form is a parameter or a named variant here,
never a second private helper.
"""

from __future__ import annotations

import time

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30


# -- bytes -------------------------------------------------------------------------------------

def _scaled(n: object, scale: int, digits: int, unit: str, missing: str) -> str:
    if not isinstance(n, (int, float)):
        return missing
    return f"{n / scale:.{digits}f}{unit}"


def gib(n: object, digits: int = 2, unit: str = " GiB", missing: str = "?") -> str:
    """Bytes in GiB: ``3.00 GiB``; ``gib(n, 1, "G", "N/A")`` is ``3.0G`` (a table cell);
    ``missing`` stands for a value that is not a number (None: not known)."""
    return _scaled(n, GIB, digits, unit, missing)


def mib(n: object, digits: int = 1, unit: str = " MiB", missing: str = "?") -> str:
    """Bytes in MiB: ``12.5 MiB``."""
    return _scaled(n, MIB, digits, unit, missing)


def pytorch_bytes(value: float | None) -> str:
    """Bytes the way PyTorch prints them, so summaries read like the log (``13.91 GiB``,
    ``512 bytes``); ``?`` when not known."""
    if value is None:
        return "?"
    size = float(value)
    if size <= 1024:
        return f"{int(size)} bytes"
    for unit, scale in (("KiB", KIB), ("MiB", MIB), ("GiB", GIB)):
        if size <= scale * 1024 or unit == "GiB":
            return f"{size / scale:.2f} {unit}"
    return f"{size:.0f} bytes"  # unreachable; keeps type checkers calm


# -- ages and durations ------------------------------------------------------------------------

def age(seconds: float) -> str:
    """A short age for a table cell or the header: ``0.4s``, ``12s``, ``3m``, ``2h``."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"


def ago(seconds: float) -> str:
    """An age in prose (symptom evidence, reports): ``90 s``, ``5 min``, ``2.5 h``."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def duration(seconds: float) -> str:
    """A compact duration for ETAs and step times: ``4.1s``, ``42s``, ``12m05s``, ``3h07m``."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        m, s = divmod(int(seconds), 60)
        return f"{m}m{s:02d}s"
    h, m = divmod(int(seconds) // 60, 60)
    return f"{h}h{m:02d}m"


def millis(ms: int) -> str:
    """A timeout given in milliseconds: ``1800 s``, or ``90 ms`` below ten seconds (a test's
    1 ms timeout would read ``0 s``)."""
    return f"{ms} ms" if ms < 10000 else f"{ms / 1000:.0f} s"


# -- clock times -------------------------------------------------------------------------------

def clock(t: float | None, missing: str = "?") -> str:
    """A wall-clock time of day, local: ``07:58:30``."""
    return missing if t is None else time.strftime("%H:%M:%S", time.localtime(t))


def stamp(t: float | None, missing: str = "?") -> str:
    """A local date and time: ``2026-03-01 07:58:30``."""
    return missing if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
