"""``ClusterMonitor``: readings of many hosts in, one cluster snapshot and diagnosis out. Pure.

One single-node ``Monitor`` per host folds that host's readings exactly as the app folds its own
node's (departed ranks, stack rounds, log state), after the readings are put on this machine's
clock (``skew``). ``evaluate(now)`` takes every host's snapshot, merges them (``merge``,
``stackmerge``) and diagnoses the whole job (``diagnose``). The caller owns time and the hosts'
stream states: it says what ``now`` is and which hosts are live, slow or lost; nothing here reads
a clock, a pipe or a process.

Memory: each host keeps a short history (``host_history`` snapshots: enough for panes that read
it incrementally), and the merged history keeps only what the rules read from it, the GPUs, for
the idle-vs-busy window (``gpu_idle_sustain_s``) and one snapshot before it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from rltui.cluster import merge as merging
from rltui.cluster import ranks as rank_rules
from rltui.cluster.diagnose import classify_rounds, diagnose_cluster, stack_inputs
from rltui.cluster.skew import to_local
from rltui.cluster.stackmerge import merged_samples
from rltui.cluster.view import (
    CLOSED,
    CONNECTING,
    LIVE,
    LOST,
    SLOW,
    ClusterSnapshot,
    HostStatus,
    NodeView,
)
from rltui.diagnosis import diagnose, flightrec
from rltui.diagnosis.hangs import departed_pids
from rltui.diagnosis.stacks import StackReport, classify
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import Diagnosis, NodeSnapshot, Reading, StackPoll, replace
from rltui.monitor import Monitor

HOST_HISTORY = 32
HISTORY_MARGIN_S = 5.0  # beyond the longest window a rule reads from the history


class ClusterMonitor:
    def __init__(self, hosts: Iterable[str] = (), *, job: str = "",
                 thresholds: Thresholds | None = None,
                 node_ranks: Mapping[str, int] | None = None,
                 host_history: int = HOST_HISTORY) -> None:
        self.job = job
        self.thresholds = thresholds or Thresholds()
        self.host_history = host_history
        self.monitors: dict[str, Monitor] = {}  # in the order hosts were added
        self._slot: dict[str, int] = {}
        self._status: dict[str, HostStatus] = {}
        self._skew: dict[str, float | None] = {}
        self._last: dict[str, float] = {}  # newest reading time per host, this clock
        self._node_ranks: dict[str, int] = dict(node_ranks or {})
        self._history: deque[NodeSnapshot] = deque()
        self._stack_memo: tuple | None = None
        self._report_memo: tuple | None = None
        self.snapshot: ClusterSnapshot | None = None
        self.diagnosis: Diagnosis | None = None
        # Why the source of every node cannot be read (a Ray dashboard that does not answer);
        # the caller sets it from its feed, "" while it answers.
        self.feed_error = ""
        for host in hosts:
            self.add_host(host)

    # -- input ------------------------------------------------------------------------------------

    def add_host(self, host: str, node_rank: int | None = None) -> Monitor:
        """Register a host (idempotent); ``node_rank``: only when truly known (see ranks.py)."""
        if node_rank is not None:
            self._node_ranks[host] = node_rank
        if host not in self.monitors:
            self.monitors[host] = Monitor(host=host, job=self.job, thresholds=self.thresholds,
                                          history_len=self.host_history)
            self._slot[host] = len(self._slot)
        return self.monitors[host]

    def ingest(self, host: str, reading: Reading, skew_s: float | None = None) -> Reading:
        """Fold one reading of ``host``. ``skew_s``: receive time - agent time (what
        ``AgentStream.skew`` gives; None before its first estimate). Returns the reading as
        folded, on this machine's clock."""
        self.add_host(host)
        local = to_local(reading, skew_s)
        self.monitors[host].ingest(local)
        if skew_s is not None:
            self._skew[host] = skew_s
        self._last[host] = max(self._last.get(host, local.timestamp), local.timestamp)
        return local

    def ingest_message(self, message: Any, skew_s: float | None = None) -> Reading:
        """A decoded ``ReadingMessage`` (rltui.agent.protocol): its host and reading."""
        return self.ingest(message.host, message.reading, skew_s)

    def set_status(self, host: str, state: str, last_seen: float | None = None,
                   reason: str = "") -> None:
        """The host's stream state as the caller knows it (live, slow, lost, closed, ...)."""
        self.add_host(host)
        self._status[host] = HostStatus(host=host, state=state, last_seen=last_seen,
                                        reason=reason)

    def update_status(self, status: Any) -> None:
        """From a ``StreamStatus`` (or anything with host, state, last_seen, reason, skew)."""
        st = HostStatus.of(status)
        self.set_status(st.host, st.state, st.last_seen, st.reason)
        skew = getattr(status, "skew", None)
        if skew is not None:
            self._skew[status.host] = skew

    def follow(self, feed: Any) -> None:
        """Take what a feed (rltui.remote.feed) says of its nodes as a whole: each stream's
        status, the job's name once known, and why the source cannot be read, if so."""
        for status in feed.statuses():
            self.update_status(status)
        if feed.job and not self.job:
            self.job = feed.job
        self.feed_error = feed.error

    def status(self, host: str) -> HostStatus:
        """The caller's word when given; else live once a reading arrived, connecting before."""
        given = self._status.get(host)
        last = self._last.get(host)
        if given is not None:
            return given if given.last_seen is not None or last is None else HostStatus(
                host, given.state, last, given.reason)
        return HostStatus(host, LIVE if last is not None else CONNECTING, last)

    # -- output -----------------------------------------------------------------------------------

    def _views(self, now: float) -> list[NodeView]:
        views = []
        for host, monitor in self.monitors.items():
            status = self.status(host)
            snap = monitor.observe(now) if host in self._last else None
            views.append(NodeView(
                host=host, status=status, snapshot=snap, skew=self._skew.get(host),
                node_rank=rank_rules.node_rank_of(snap.procs if snap else (),
                                                  self._node_ranks.get(host)),
                slot=self._slot[host], merged=snap is not None and status.reporting))
        return views

    def _samples(self, views: list[NodeView], m: merging.Merged
                 ) -> tuple[tuple[StackPoll, ...], tuple[str, ...]]:
        """Merged samples, rebuilt only when some host's rounds (or what filters them)
        changed: the app evaluates every second, the stacks change every N seconds."""
        key = (self.thresholds.stack_sample_gap_s, m.dropped, tuple(
            (v.host, v.merged, v.status.state, tuple(map(id, v.snapshot.stacks)),
             tuple(sorted(departed_pids(v.snapshot.departed).items())),
             tuple(sorted(m.pid_ranks.get(v.host, {}).items())) if v.snapshot.stacks else ())
            for v in views if v.snapshot is not None))
        if self._stack_memo is not None and self._stack_memo[0] == key:
            return self._stack_memo[1], self._stack_memo[2]
        rounds, notes = merged_samples(views, m.pid_ranks, m.dropped,
                                       self.thresholds.stack_sample_gap_s)
        # The key holds ids: the memo keeps the rounds they name alive while it stands.
        keep = tuple(v.snapshot.stacks for v in views if v.snapshot is not None)
        self._stack_memo = (key, rounds, notes, keep)
        return rounds, notes

    def _host_notes(self, views: list[NodeView], now: float) -> list[str]:
        notes = []
        for v in views:
            st = v.status
            if v.snapshot is None:
                if st.state != LOST:  # a lost one is a host-lost symptom, with its reason
                    notes.append(f"{v.host}: {st.state}, no data yet"
                                 + (f" ({st.reason})" if st.reason else ""))
            elif st.state == SLOW:
                notes.append(f"{v.host} is slow: last heard {now - (st.last_seen or now):.0f} s "
                             "ago; its data may be stale")
            elif st.state == CLOSED:
                notes.append(f"{v.host}: closed" + (f" ({st.reason})" if st.reason else "")
                             + "; its ranks are left out")
        return notes

    def observe(self, now: float) -> ClusterSnapshot:
        """Every host's snapshot at ``now`` (this machine's clock), merged; no diagnosis."""
        views = self._views(now)
        m = merging.merge(views, now, job=self.job, given=self._node_ranks)
        rounds, stack_notes = self._samples(views, m)
        self._remember(m.snapshot)
        snap = ClusterSnapshot(
            timestamp=now, job=self.job, nodes=tuple(views), ranks=m.ranks, merged=m.snapshot,
            stacks=rounds, duplicates=m.duplicates,
            notes=tuple(self._host_notes(views, now)) + m.notes + stack_notes)
        self.snapshot = snap
        return snap

    def _remember(self, merged: NodeSnapshot) -> None:
        # The rules read only the GPUs of earlier snapshots (gpu-idle-vs-busy's window).
        self._history.append(NodeSnapshot(timestamp=merged.timestamp, gpus=merged.gpus))
        start = merged.timestamp - self.thresholds.gpu_idle_sustain_s - HISTORY_MARGIN_S
        # Keep one snapshot at or before the window's start: it stands for the state then.
        while len(self._history) > 1 and self._history[1].timestamp <= start:
            self._history.popleft()

    @property
    def history(self) -> tuple[NodeSnapshot, ...]:
        return tuple(self._history)

    def evaluate(self, now: float) -> tuple[ClusterSnapshot, Diagnosis]:
        snap = self.observe(now)
        assert snap.merged is not None
        history = self.history
        base = diagnose(snap.merged, history, self.thresholds)
        report = self._report(snap, history, base)
        self.diagnosis = diagnose_cluster(
            snap.merged, history, self.thresholds, nodes=snap.nodes, rows=snap.ranks,
            duplicates=snap.duplicates, rounds=snap.stacks, report=report, notes=snap.notes,
            base=base, feed_error=self.feed_error)
        self.snapshot = snap = replace(snap, stack_report=report)
        return snap, self.diagnosis

    def _report(self, snap: ClusterSnapshot, history: tuple[NodeSnapshot, ...],
                base: Diagnosis) -> StackReport | None:
        """Classified once per set of merged samples, missing ranks and step state."""
        assert snap.merged is not None
        fr = tuple(n.snapshot.flight_recorder for n in snap.nodes if n.snapshot is not None
                   and n.merged and n.snapshot.flight_recorder is not None)
        if not snap.stacks and not any(p.dumps for p in fr):
            return None
        missing, stalled = stack_inputs(snap.merged, snap.stacks, history, self.thresholds,
                                       base)
        key = (tuple(map(id, snap.stacks)), missing, stalled, tuple(map(id, fr)))
        if self._report_memo is not None and self._report_memo[0] == key:
            return self._report_memo[1]
        report = classify_rounds(snap.stacks, missing, stalled) or classify([])
        # every node's Flight Recorder dumps, read beside the merged stacks
        report = flightrec.read_beside(report, snap.merged)
        self._report_memo = (key, report, (snap.stacks, fr))
        return report

    @property
    def stacks(self) -> StackReport | None:
        """The hang report of the latest merged stack samples (like ``Monitor.stacks``)."""
        return self.snapshot.stack_report if self.snapshot is not None else None
