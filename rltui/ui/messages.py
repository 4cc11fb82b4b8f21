"""What flows into the main thread and out to the panes.

Poll workers run in threads and may only post messages; ``ReadingArrived`` is the one they post.
After each evaluation the app hands every pane the same immutable ``View``: panes render it and
never call a source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from textual.message import Message

from rltui.cluster.view import ClusterSnapshot
from rltui.diagnosis.stacks import StackReport
from rltui.diagnosis.thresholds import Thresholds
from rltui.findings import Findings
from rltui.model import Diagnosis, NodeSnapshot, Reading
from rltui.monitor import JobView
from rltui.snapshot import History
from rltui.ui.themes import Palette


class ReadingArrived(Message):
    """A poll worker finished: ``reading`` is what its source returned."""

    def __init__(self, reading: Reading) -> None:
        super().__init__()
        self.reading = reading

    def can_replace(self, message: Message) -> bool:
        # A queued reading of the same source is superseded by a newer one: the fold keeps the
        # latest state per source, so a burst (a slow main thread) costs one ingest, not many.
        # Not so for logs: each of their readings carries only the lines new since the last
        # one, so dropping one would lose lines, steps and tracebacks. Nor for stacks: each
        # round is a sample, and stuck-or-moving is read across samples.
        return (isinstance(message, ReadingArrived)
                and message.reading.source == self.reading.source
                and self.reading.source not in ("logs", "stacks"))


class DriverCall(Message):
    """A driver's thread asks for ``call`` on the main thread (the driver has no message
    handlers of its own: the app runs the call)."""

    def __init__(self, call: Callable[[], None]) -> None:
        super().__init__()
        self.call = call


@dataclass(frozen=True, slots=True)
class ReplayState:
    position: float  # seconds since the scenario's first reading
    duration: float
    speed: float
    paused: bool
    finished: bool


@dataclass(frozen=True, slots=True)
class View:
    """Everything a pane may render, from one evaluation."""

    snapshot: NodeSnapshot
    diagnosis: Diagnosis
    history: History  # the monitor's bounded history (shared, read-only for panes)
    thresholds: Thresholds
    palette: Palette
    mode: str  # live | demo | replay | offline
    intervals: dict[str, float] = field(default_factory=dict)  # source -> poll interval, s
    paused: bool = False
    replay: ReplayState | None = None
    stacks: StackReport | None = None  # the hang report of the latest py-spy rounds
    # Across nodes: every node's own snapshot and stream state, the ranks by host; ``snapshot``
    # is then the merged job (global ranks, cluster-wide GPU indices, host:path logs).
    cluster: ClusterSnapshot | None = None
    # The jobs on the node, worst first (rltui.jobs), and the one shown alone (None: all).
    jobs: tuple[JobView, ...] = ()
    focus: str | None = None
    stacks_job: str | None = None  # the job whose hang report ``stacks`` is

    def findings(self) -> Findings:
        """What this evaluation found, for the reports every front end writes alike."""
        return Findings(snapshot=self.snapshot, diagnosis=self.diagnosis, mode=self.mode,
                        stacks=self.stacks, stacks_job=self.stacks_job, jobs=self.jobs,
                        focus=self.focus, cluster=self.cluster, thresholds=self.thresholds)
