"""Cell formatting shared by the table panes: numbers, sizes, ages and sparklines.

Each formatter returns a ``Cell`` (text, style) rather than a Rich object, so a pane can compare
this tick's cells with the previous tick's cheaply and touch only the cells that changed.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Iterable, NamedTuple

from rltui.model import NodeSnapshot

NA = "N/A"  # the device or OS could not tell us
NOT_YET = "-"  # not known yet (no reading, or a feature that fills it later)
GIB = 1024**3
BLOCKS = "▁▂▃▄▅▆▇█"


class Cell(NamedTuple):
    text: str
    style: str = ""


def na(dim: str) -> Cell:
    return Cell(NA, dim)


def percent(value: float | None, dim: str) -> Cell:
    return na(dim) if value is None else Cell(f"{value:.0f}%")


def age(seconds: float) -> str:
    """A short age: ``0.4s``, ``12s``, ``3m``, ``2h``."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"


def spark(values: Iterable[float | None], high: float = 100.0) -> str:
    """One block character per value scaled to ``high``; a gap (None) is a space."""
    out = []
    top = len(BLOCKS) - 1
    for v in values:
        if v is None:
            out.append(" ")
        else:
            out.append(BLOCKS[max(0, min(top, round(v / high * top)))])
    return "".join(out)


class SparkSeries:
    """Recent values per key in time buckets, fed incrementally from the monitor's history.

    A bucket holds the newest value seen in it, so the line depends on the readings and not on
    how often the screen evaluated (live ticks, replay jumps): the same recording always draws
    the same sparkline. ``feed`` reads only snapshots newer than the last one it saw.
    """

    def __init__(self, width: int, bucket_s: float,
                 extract: Callable[[NodeSnapshot], Iterable[tuple[object, float | None]]]) -> None:
        self.width = width
        self.bucket_s = max(bucket_s, 0.001)
        self._extract = extract
        self._series: dict[object, deque[tuple[int, float | None]]] = {}
        self._last_seen: float | None = None

    def feed(self, history: Iterable[NodeSnapshot]) -> None:
        last = self._last_seen
        for snap in history:
            if last is not None and snap.timestamp <= last:
                continue
            bucket = int(snap.timestamp // self.bucket_s)
            for key, value in self._extract(snap):
                series = self._series.get(key)
                if series is None:
                    series = self._series[key] = deque(maxlen=self.width)
                if series and series[-1][0] == bucket:
                    series[-1] = (bucket, value)
                else:
                    series.append((bucket, value))
            self._last_seen = snap.timestamp

    def line(self, key: object, now: float, high: float = 100.0) -> str:
        """The last ``width`` buckets up to ``now``, oldest left; missing buckets are blank."""
        series = self._series.get(key)
        end = int(now // self.bucket_s)
        values: list[float | None] = [None] * self.width
        if series:
            for bucket, value in series:
                slot = self.width - 1 - (end - bucket)
                if 0 <= slot < self.width:
                    values[slot] = value
        return spark(values, high)
