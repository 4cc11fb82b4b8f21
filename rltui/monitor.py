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

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from rltui import jobs as joblib
from rltui.diagnosis import diagnose, hangs, notes_of, ranks, verdict_of
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import Diagnosis, Job, NodeSnapshot, Reading, replace, severity_rank
from rltui.snapshot import DEFAULT_HISTORY, History, Tracker

if TYPE_CHECKING:
    from rltui.diagnosis.stacks import StackReport

UNCLAIMED = ""  # the key of the evidence no job claims (saved files, logs naming no writer)


class JobView(msgspec.Struct, frozen=True):
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
    def __post_init__(self) -> None:
        # --job or the picker: the outputs are that job's alone (``focus``)
        self._focus: str | None = None
        self.focus_id: str | None = None
        self._focus_problem = ""
        self.tracker = Tracker(host=self.host, job=self.job)
        self.history = History(maxlen=self.history_len)
        self.snapshot: NodeSnapshot | None = None
        self.diagnosis: Diagnosis | None = None
        self.stacks: StackReport | None = None  # the hang report of the latest stack rounds
        self.jobs: tuple[JobView, ...] = ()  # worst first
        self.stacks_job: str | None = None  # whose hang report ``stacks`` is ("" unclaimed)
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
        if self._focus is not None and self.focus_id is None:
            job, self._focus_problem = joblib.resolve(snap.jobs, self._focus)
            self.focus_id = job.id if job is not None else None
        # the logs the user gave that name no writer are the chosen job's
        parts = joblib.partition(snap, self._lens, adopt=self.focus_id)
        self._now = [(job, part, self._watch_of(job)) for job, part in parts]
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
            chosen = self._focused()
            if chosen is not None:
                self.snapshot, self.diagnosis, self.stacks = (
                    chosen.snapshot, chosen.diagnosis, chosen.stacks)
                self.stacks_job = chosen.key
            else:  # the job asked for is not (or no longer) here: say so, show nothing else
                self.snapshot = replace(whole, procs=(), departed=(), logs=(), stacks=(),
                                        gpus=(), jobs=())
                why = self._focus_problem or f"jobs here: {_ids(whole.jobs)}"
                self.diagnosis = Diagnosis(
                    timestamp=whole.timestamp, verdict="warning",
                    symptoms=(ranks.nothing_found(f"--job {self.focus} ({why})"),),
                    notes=tuple(notes_of(whole)))
                self.stacks = None
        else:
            self.diagnosis = _combined(whole, views)
            worst = next((v for v in views if v.stacks is not None), None)
            self.stacks = worst.stacks if worst is not None else None
            self.stacks_job = worst.key if worst is not None else None
        return self.snapshot, self.diagnosis

    @property
    def focus(self) -> str | None:
        return self._focus

    @focus.setter
    def focus(self, wanted: str | None) -> None:
        """What ``--job`` (or the picker) named; resolved to one job id at its first sight and
        held to that id (a second job with the same name later does not move it)."""
        self._focus, self.focus_id, self._focus_problem = wanted, None, ""

    def suggests_hang(self) -> bool:
        """The latest evaluation points at a hang that one more stack round would confirm or
        clear: a job's single sample shows ranks waiting (or on CPU, which a second sample
        tells from a busy loop), or its steps stalled past the floor."""
        from rltui.diagnosis.stacks import BUSY_LOOP, HANG, UNCLEAR, WORKING
        views = [v for v in self.jobs if self.focus_id is None or v.key == self.focus_id]
        for view in views:
            rep = view.stacks
            if rep is not None and rep.samples < 2 and rep.verdict in (HANG, WORKING, UNCLEAR):
                return True
            # ranks on CPU in one function twice: a busy loop, or a step caught twice at the
            # same point of its period; a third sample at another offset tells
            if rep is not None and rep.samples == 2 and rep.symptom_id == BUSY_LOOP:
                return True
        return any(s.id == "steps-stalled" for v in views for s in v.diagnosis.symptoms)

    @property
    def focus_problem(self) -> str:
        """Why ``focus`` names no job, when it is more than "not here" (a name two jobs run)."""
        return self._focus_problem

    def _focused(self) -> JobView | None:
        return next((v for v in self.jobs if v.job is not None and v.job.id == self.focus_id),
                    None) if self.focus_id is not None else None

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
                                                  for s in found.symptoms),
                            incidents=tuple(replace(i, job=job.id) for i in found.incidents))
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
    found = sorted((i for v in views for i in v.diagnosis.incidents),
                   key=lambda i: -severity_rank(i.severity))
    return Diagnosis(timestamp=whole.timestamp, verdict=verdict_of(symptoms),
                     symptoms=tuple(symptoms), notes=tuple(notes_of(whole)),
                     incidents=tuple(found))


def _ids(jobs) -> str:
    return ", ".join(j.id for j in jobs[:8]) + (" ..." if len(jobs) > 8 else "") or "none"
