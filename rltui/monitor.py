"""The pure core the app and the headless commands share: readings in, snapshot and diagnosis out.

``Monitor.ingest`` folds one reading; ``Monitor.evaluate(now)`` takes a snapshot, appends it to
the bounded history and diagnoses it, job by job (rltui.jobs): each job on the node has its own
snapshot, history, hang memo and diagnosis, so that equal rank numbers in two jobs never meet.
The app calls both on its main thread; ``rltui diagnose`` calls them in a loop; so what the TUI
shows and what ``--json`` prints cannot disagree.

``focus`` narrows the monitor's outputs to one job (``--job``, the app's job picker): then
``snapshot``, ``diagnosis`` and ``stacks`` are that job's. Without it, ``snapshot`` is the whole
node, ``diagnosis`` holds every job's symptoms (each names its job) with the worst job's
verdict, and ``stacks`` is the worst job's hang report.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable

from rltui import jobs as joblib
from rltui.diagnosis import diagnose, hangs, notes_of, ranks, verdict_of
from rltui.diagnosis.stacks import StackReport
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import Diagnosis, Job, NodeSnapshot, Reading, severity_rank
from rltui.snapshot import DEFAULT_HISTORY, History, Tracker

UNCLAIMED = ""  # the key of the evidence no job claims (saved files, logs naming no writer)


@dataclass(frozen=True)
class JobView:
    """One job as its own watcher sees it (``job`` None: the evidence no job claims, or the
    whole node when no job is found)."""

    job: Job | None
    snapshot: NodeSnapshot
    diagnosis: Diagnosis
    stacks: StackReport | None

    @property
    def key(self) -> str:
        return self.job.id if self.job is not None else UNCLAIMED


@dataclass
class _Watch:
    history: History
    memo: hangs.HangMemo = field(default_factory=hangs.HangMemo)


@dataclass
class Monitor:
    host: str = ""
    job: str = ""
    thresholds: Thresholds = field(default_factory=Thresholds)
    history_len: int = DEFAULT_HISTORY
    focus: str | None = None  # a job id: the outputs are that job's alone

    def __post_init__(self) -> None:
        self.tracker = Tracker(host=self.host, job=self.job)
        self.history = History(maxlen=self.history_len)
        self.snapshot: NodeSnapshot | None = None
        self.diagnosis: Diagnosis | None = None
        self.stacks: StackReport | None = None  # the hang report of the latest stack rounds
        self.jobs: tuple[JobView, ...] = ()  # worst first
        self._watches: dict[str, _Watch] = {}
        self._lens = joblib.Lens()
        self._now: list[tuple[Job | None, NodeSnapshot, _Watch]] = []

    def ingest(self, reading: Reading) -> None:
        self.tracker.apply(reading)

    def observe(self, now: float) -> NodeSnapshot:
        """Take a snapshot into the histories (the node's and each job's) without diagnosing
        it."""
        snap = self.tracker.snapshot(now)
        self.history.append(snap)
        self.snapshot = snap
        self._now = [(job, part, self._watch_of(job)) for job, part in self._units(snap)]
        keys = {(job.id if job is not None else UNCLAIMED) for job, _, _ in self._now}
        for key in [k for k in self._watches if k not in keys]:
            del self._watches[key]
        for _, part, watch in self._now:
            watch.history.append(part)
        return snap

    def evaluate(self, now: float) -> tuple[NodeSnapshot, Diagnosis]:
        whole = self.observe(now)
        order = {job.id: i for i, job in enumerate(whole.jobs)}
        views = [self._judge(job, part, watch) for job, part, watch in self._now]
        views.sort(key=lambda v: (-severity_rank(v.diagnosis.verdict), v.job is None,
                                  order.get(v.key, 0)))
        self.jobs = tuple(views)
        if self.focus is not None:
            chosen = self.view(self.focus)
            if chosen is not None:
                self.snapshot, self.diagnosis, self.stacks = (
                    chosen.snapshot, chosen.diagnosis, chosen.stacks)
            else:  # the job asked for is not (or no longer) here: say so, show nothing else
                self.snapshot = replace(whole, procs=(), departed=(), logs=(), stacks=(),
                                        gpus=(), jobs=())
                self.diagnosis = Diagnosis(
                    timestamp=whole.timestamp, verdict="warning",
                    symptoms=(ranks.nothing_found(f"--job {self.focus} (jobs here: "
                                                  f"{_ids(whole.jobs)})"),),
                    notes=tuple(notes_of(whole)))
                self.stacks = None
        else:
            self.diagnosis = _combined(whole, views)
            self.stacks = next((v.stacks for v in views if v.stacks is not None), None)
        return self.snapshot, self.diagnosis

    def view(self, wanted: str) -> JobView | None:
        """The latest view of one job, by id, name or pid (rltui.jobs.find); None when no
        such job is watched now."""
        job = joblib.find([v.job for v in self.jobs if v.job is not None], wanted)
        return next((v for v in self.jobs if v.job is job), None) if job else None

    def _units(self, whole: NodeSnapshot) -> list[tuple[Job | None, NodeSnapshot]]:
        return joblib.partition(whole, self._lens)

    def _watch_of(self, job: Job | None) -> _Watch:
        key = job.id if job is not None else UNCLAIMED
        watch = self._watches.get(key)
        if watch is None:
            watch = self._watches[key] = _Watch(History(maxlen=self.history_len))
        return watch

    def _judge(self, job: Job | None, snap: NodeSnapshot, watch: _Watch) -> JobView:
        history = watch.history.items
        found = diagnose(snap, history, self.thresholds, memo=watch.memo)
        if job is not None:
            found = replace(found, symptoms=tuple(replace(s, job=job.id)
                                                  for s in found.symptoms))
        return JobView(job, snap, found, watch.memo.report(snap, history, self.thresholds))

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


def _combined(whole: NodeSnapshot, views: list[JobView]) -> Diagnosis:
    """Every job's symptoms in one diagnosis (each names its job), the worst verdict."""
    if len(views) == 1 and views[0].job is None:
        return views[0].diagnosis
    symptoms = sorted((s for v in views for s in v.diagnosis.symptoms),
                      key=lambda s: (-severity_rank(s.severity), s.id, s.job, s.ranks))
    return Diagnosis(timestamp=whole.timestamp, verdict=verdict_of(symptoms),
                     symptoms=tuple(symptoms), notes=tuple(notes_of(whole)))


def _ids(jobs) -> str:
    return ", ".join(j.id for j in jobs[:8]) + (" ..." if len(jobs) > 8 else "") or "none"
