"""The pure core the app and the headless commands share: readings in, snapshot and diagnosis out.

``Monitor.ingest`` folds one reading; ``Monitor.evaluate(now)`` takes a snapshot, appends it to
the bounded history and diagnoses it. The app calls both on its main thread; ``rltui diagnose``
calls them in a loop; so what the TUI shows and what ``--json`` prints cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from rltui.diagnosis import diagnose
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import Diagnosis, NodeSnapshot, Reading
from rltui.snapshot import DEFAULT_HISTORY, History, Tracker


@dataclass
class Monitor:
    host: str = ""
    job: str = ""
    thresholds: Thresholds = field(default_factory=Thresholds)
    history_len: int = DEFAULT_HISTORY

    def __post_init__(self) -> None:
        self.tracker = Tracker(host=self.host, job=self.job)
        self.history = History(maxlen=self.history_len)
        self.snapshot: NodeSnapshot | None = None
        self.diagnosis: Diagnosis | None = None

    def ingest(self, reading: Reading) -> None:
        self.tracker.apply(reading)

    def evaluate(self, now: float) -> tuple[NodeSnapshot, Diagnosis]:
        snap = self.tracker.snapshot(now)
        self.history.append(snap)
        self.snapshot = snap
        self.diagnosis = diagnose(snap, self.history.items, self.thresholds)
        return snap, self.diagnosis

    def replay(self, readings: Iterable[Reading]) -> tuple[NodeSnapshot, Diagnosis] | None:
        """Fold readings in order, evaluating after each (as the live app does)."""
        result = None
        for r in readings:
            self.ingest(r)
            result = self.evaluate(r.timestamp)
        return result
