"""The pure core the app and the headless commands share: readings in, snapshot and diagnosis out.

``Monitor.ingest`` folds one reading; ``Monitor.evaluate(now)`` takes a snapshot, appends it to
the bounded history and diagnoses it. The app calls both on its main thread; ``rltui diagnose``
calls them in a loop; so what the TUI shows and what ``--json`` prints cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from rltui.diagnosis import diagnose, hangs
from rltui.diagnosis.stacks import StackReport
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
        self.stacks: StackReport | None = None  # the hang report of the latest stack rounds

    def ingest(self, reading: Reading) -> None:
        self.tracker.apply(reading)

    def observe(self, now: float) -> NodeSnapshot:
        """Take a snapshot into the history without diagnosing it."""
        snap = self.tracker.snapshot(now)
        self.history.append(snap)
        self.snapshot = snap
        return snap

    def evaluate(self, now: float) -> tuple[NodeSnapshot, Diagnosis]:
        snap = self.observe(now)
        self.diagnosis = diagnose(snap, self.history.items, self.thresholds)
        # Memoised: the rule above already classified these very rounds.
        self.stacks = hangs.stack_report(snap, self.history.items, self.thresholds)
        return snap, self.diagnosis

    def replay(self, readings: Iterable[Reading]) -> tuple[NodeSnapshot, Diagnosis] | None:
        """Fold readings in order with a snapshot after each, as the live app sees them, and
        diagnose the last one (the rules read earlier snapshots only through the history)."""
        last = None
        for r in readings:
            if last is not None:
                self.ingest(last)
                self.observe(last.timestamp)
            last = r
        if last is None:
            return None
        self.ingest(last)
        return self.evaluate(last.timestamp)
