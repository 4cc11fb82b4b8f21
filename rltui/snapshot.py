"""Fold readings into immutable ``NodeSnapshot`` values. Pure: no I/O, no clock.

The fold is the one place that knows how readings combine, so the app (on its main thread), the
headless ``diagnose`` command and replay all produce the same snapshots from the same readings.
It remembers every job process it has seen, which is how a rank that exits shows up as departed
rather than silently vanishing from the table.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from rltui import model
from rltui.jobs import JobNames, group, missing_from_world
from rltui.logbook import LogBook
from rltui.model import (
    DepartedRank,
    FrPoll,
    GpuPoll,
    LogPoll,
    NodeSnapshot,
    ProcInfo,
    ProcPoll,
    Reading,
    SourceState,
    StackPoll,
    replace,
)

DEFAULT_HISTORY = 600
STACK_SAMPLES = 3  # rounds of dumps kept: enough to call a class stuck or moving
MAX_SEEN = 4096  # processes remembered (live and departed); the longest gone are forgotten


@dataclass
class _Seen:
    info: ProcInfo
    last_seen: float
    gone_since: float | None = None


@dataclass
class Tracker:
    """Mutable accumulator; ``snapshot(now)`` returns an immutable view."""

    host: str = ""
    job: str = ""
    _sources: dict[str, SourceState] = field(default_factory=dict)
    _gpu_poll: GpuPoll | None = None
    _procs: tuple[ProcInfo, ...] = ()
    _seen: dict[int, _Seen] = field(default_factory=dict)
    _extra: dict[str, Reading] = field(default_factory=dict)
    logbook: LogBook = field(default_factory=LogBook)
    now_source: str = ""
    _stacks: deque = field(default_factory=lambda: deque(maxlen=STACK_SAMPLES))
    _job_names: JobNames = field(default_factory=JobNames)
    _jobs_key: tuple = ()
    _jobs: tuple = ()
    _fr: FrPoll | None = None

    def apply(self, reading: Reading) -> None:
        prev = self._sources.get(reading.source)
        ok = reading.status == model.OK
        self._sources[reading.source] = SourceState(
            name=reading.source,
            status=reading.status,
            last_reading=reading.timestamp,
            last_ok=reading.timestamp if ok else (prev.last_ok if prev else None),
            message=reading.message,
            remedy=reading.remedy,
        )
        if reading.source == "gpus":
            # A failed GPU poll keeps no stale numbers: the pane shows the failure instead.
            self._gpu_poll = reading.payload if isinstance(reading.payload, GpuPoll) else None
        elif reading.source == "procs":
            if isinstance(reading.payload, ProcPoll):
                self._apply_procs(reading.payload.procs, reading.timestamp)
        elif reading.source == "logs":
            if isinstance(reading.payload, LogPoll):
                self.logbook.apply(reading.payload, reading.timestamp)
        elif reading.source == "stacks":
            # A failed round (py-spy missing, ptrace denied) keeps the earlier samples: the
            # header says why no new ones come, the last good stacks stay readable.
            poll = reading.payload
            if isinstance(poll, StackPoll) and poll.dumps:
                # The same round can arrive twice (a periodic poll that joined a `d` round).
                if not self._stacks or self._stacks[-1] is not poll:
                    self._stacks.append(poll)
            elif isinstance(poll, StackPoll) and reading.status == model.OK:
                # A good round with nothing to dump: the job is gone, its stacks are history.
                self._stacks.clear()
        elif reading.source == "flight_recorder":
            # The dumps last read stay until new ones come (a failed poll keeps them).
            if isinstance(reading.payload, FrPoll):
                self._fr = reading.payload
        else:
            # Sources added by later issues are kept for their own folds.
            self._extra[reading.source] = reading

    def _apply_procs(self, procs: tuple[ProcInfo, ...], now: float) -> None:
        self._procs = procs
        present = {p.pid for p in procs if not p.is_zombie}
        for p in procs:
            seen = self._seen.get(p.pid)
            if p.is_zombie:
                if seen is None:
                    self._seen[p.pid] = _Seen(p, now, gone_since=now)
                elif seen.gone_since is None:
                    seen.gone_since = now
                    seen.info = p if p.rank is not None else replace(p, rank=seen.info.rank)
                continue
            self._seen[p.pid] = _Seen(p, now)
        for pid, seen in self._seen.items():
            if pid not in present and seen.gone_since is None:
                seen.gone_since = now
        if len(self._seen) > MAX_SEEN:
            # a job relaunched in a loop for days: forget the longest gone first
            gone = sorted((s.gone_since, pid) for pid, s in self._seen.items()
                          if s.gone_since is not None)
            for _, pid in gone[:len(self._seen) - MAX_SEEN]:
                del self._seen[pid]

    def snapshot_rounds(self) -> tuple:
        """The stack rounds kept now, oldest first (what the next snapshot will hold)."""
        return tuple(self._stacks)

    def clear_stacks(self) -> None:
        """Forget the stack rounds (before reading saved dumps that replace them)."""
        self._stacks.clear()

    def extra(self, source: str) -> Reading | None:
        return self._extra.get(source)

    def snapshot(self, now: float) -> NodeSnapshot:
        gp = self._gpu_poll
        gone = [(pid, seen) for pid, seen in sorted(self._seen.items())
                if seen.gone_since is not None]
        # The processes change far less often than snapshots are taken: group them again only
        # when who is running (or gone) changed.
        key = (tuple((p.host, p.pid, p.ppid, p.rank, p.job_env) for p in self._procs),
               tuple(pid for pid, _ in gone))
        if key != self._jobs_key:
            self._jobs_key = key
            self._jobs = group(self._procs, [seen.info for _, seen in gone], self._job_names)
        jobs = self._jobs
        job_of = {m: j for j in jobs for m in j.members}
        live_ranks = {(job_of.get((p.host, p.pid)), p.rank) for p in self._procs
                      if not p.is_zombie and p.rank is not None}
        departed = []
        for pid, seen in gone:
            job = job_of.get((seen.info.host, pid))
            if seen.info.rank is not None and (job, seen.info.rank) in live_ranks:
                continue  # the rank was restarted under a new pid (elastic restart)
            departed.append(DepartedRank(
                pid=pid,
                rank=seen.info.rank,
                last_seen=seen.last_seen,
                gone_since=seen.gone_since,
                reason="zombie" if seen.info.is_zombie else "exited",
                info=seen.info,
            ))
        mine: dict[object, list[ProcInfo]] = {}
        for p in self._procs:
            mine.setdefault(job_of.get((p.host, p.pid)), []).append(p)
        known: dict[object, set] = {}
        for d in departed:
            known.setdefault(job_of.get((d.info.host, d.pid)) if d.info else None,
                             set()).add(d.rank)
        for job in jobs:
            departed.extend(missing_from_world(mine.get(job, []), now, known.get(job, set())))
        return NodeSnapshot(
            timestamp=now,
            host=self.host,
            job=self.job,
            gpus=gp.gpus if gp else (),
            gpu_simulated=gp.simulated if gp else False,
            foreign_gpu_pids=gp.foreign_pids if gp else (),
            procs=self._procs,
            departed=tuple(departed),
            sources=tuple(self._sources[k] for k in sorted(self._sources)),
            logs=self.logbook.states(),
            unmatched_logs=self.logbook.unmatched,
            now_source=self.now_source,
            stacks=tuple(self._stacks),
            flight_recorder=self._fr,
            jobs=jobs,
        )


# History is bounded by bytes as well as by count: at the default 600 snapshots an 8-rank,
# 8-GPU node's history alone grew the monitor by tens of MiB (each job keeps one too), and a
# 512-rank node's would reach hundreds. The checks read at most a few minutes back
# (stall floor 60 s, sustained GPU idle 30 s), so at least HISTORY_MIN_KEEP snapshots stay.
DEFAULT_HISTORY_BYTES = 4 * 2**20
HISTORY_MIN_KEEP = 120

# Rough resident bytes of the objects a snapshot holds of its own (new each poll): a GPU
# sample, a process (its command line is shared from the source's cache), a log file's state
# (its step records are shared, the tuples are not), a source state; measured with a deep
# sys.getsizeof walk of typical values.
_SNAP_BYTES, _GPU_BYTES, _PROC_BYTES, _LOG_BYTES, _REF_BYTES, _SOURCE_BYTES = (
    600, 420, 560, 460, 8, 200)


def approx_bytes(snap: NodeSnapshot) -> int:
    """An estimate of a snapshot's own size, cheap enough to take at every append."""
    return (_SNAP_BYTES + _GPU_BYTES * len(snap.gpus)
            + _PROC_BYTES * (len(snap.procs) + len(snap.departed))
            + sum(_LOG_BYTES + _REF_BYTES * (len(f.recent_steps) + len(f.events))
                  for f in snap.logs)
            + _SOURCE_BYTES * len(snap.sources) + _REF_BYTES * len(snap.stacks))


@dataclass
class History:
    """Bounded history of snapshots, oldest first: at most ``maxlen`` of them and, beyond
    ``min_keep``, at most about ``max_bytes`` (approx_bytes)."""

    maxlen: int = DEFAULT_HISTORY
    _items: deque[NodeSnapshot] = field(default_factory=deque)
    max_bytes: int = DEFAULT_HISTORY_BYTES
    min_keep: int = HISTORY_MIN_KEEP

    def __post_init__(self) -> None:
        self._items = deque(self._items, maxlen=self.maxlen)
        self._sizes: deque[int] = deque((approx_bytes(s) for s in self._items),
                                        maxlen=self.maxlen)
        self._bytes = sum(self._sizes)

    def append(self, snap: NodeSnapshot) -> None:
        if len(self._items) == self.maxlen:
            self._bytes -= self._sizes[0]  # the deque drops it
        size = approx_bytes(snap)
        self._items.append(snap)
        self._sizes.append(size)
        self._bytes += size
        while self._bytes > self.max_bytes and len(self._items) > self.min_keep:
            self._items.popleft()
            self._bytes -= self._sizes.popleft()

    @property
    def bytes(self) -> int:
        """The estimated size of what is kept."""
        return self._bytes

    def __iter__(self):
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def since(self, t: float) -> Iterable[NodeSnapshot]:
        return (s for s in self._items if s.timestamp >= t)

    @property
    def items(self) -> tuple[NodeSnapshot, ...]:
        return tuple(self._items)
