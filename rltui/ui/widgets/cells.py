"""Cell formatting shared by the table panes: numbers, sizes, ages and sparklines.

Each formatter returns a ``Cell`` (text and a style string) rather than a Rich object: it is
cheap to build and compare, and the table draws it as one styled segment.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from rltui.model import NodeSnapshot

NA = "N/A"  # the device or OS could not tell us
NOT_YET = "-"  # not known yet (no reading, or a feature that fills it later)
BLOCKS = "▁▂▃▄▅▆▇█"


class Cell(NamedTuple):
    text: str
    style: str = ""


def na(dim: str) -> Cell:
    return Cell(NA, dim)


def percent(value: float | None, dim: str) -> Cell:
    return na(dim) if value is None else Cell(f"{value:.0f}%")


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


class HistoryCursor:
    """Walks the monitor's history incrementally: each call yields only the snapshots newer
    than those already seen, so a pane can follow every evaluation (including the ones a
    replay jump made without drawing) without copying the history each tick."""

    def __init__(self) -> None:
        self.last_seen: float | None = None

    def new(self, history: Iterable[NodeSnapshot]) -> Iterator[NodeSnapshot]:
        for snap in history:
            if self.last_seen is not None and snap.timestamp <= self.last_seen:
                continue
            self.last_seen = snap.timestamp
            yield snap


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
        self._cursor = HistoryCursor()

    def feed(self, history: Iterable[NodeSnapshot]) -> None:
        for snap in self._cursor.new(history):
            bucket = int(snap.timestamp // self.bucket_s)
            for key, value in self._extract(snap):
                series = self._series.get(key)
                if series is None:
                    series = self._series[key] = deque(maxlen=self.width)
                if series and series[-1][0] == bucket:
                    series[-1] = (bucket, value)
                else:
                    series.append((bucket, value))

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


def set_title(widget, title: str) -> None:
    """Set a pane's border title only when it changed: Textual repaints the whole widget on
    every assignment, and a full-height pane repainted every second is most of the monitor's
    CPU on a big terminal."""
    if getattr(widget, "_rltui_title", None) != title:
        widget._rltui_title = title
        widget.border_title = title
