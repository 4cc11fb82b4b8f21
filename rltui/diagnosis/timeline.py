"""The timeline: per rank, its steps over time, when it last advanced and when it stopped,
sorted by who stopped first. Pure: a snapshot (and the hang report of its stack rounds) in, a
``Timeline`` out; ``timeline_json`` is the ``timeline`` of the diagnose document and the
incident report (docs/diagnose-json.md), ``rltui.diagnosis.timelinechart`` draws it.

Three witnesses say that a rank stopped, the strongest first:

* ``exit``: it left the job (a departed rank), at the time its best witness gives
  (``rltui.diagnosis.exits``);
* ``stacks``: py-spy found it in the same place in every sampled round (a stuck class of the
  hang report, read as ``rltui.diagnosis.stacks`` reads it);
* ``log``: its log reported no step for longer than the steps-stalled limit (the rule's own
  limit, so the timeline and the symptom agree).

A step the log reported within that limit says it advances, whatever its stacks look like (a
job that spends most of its time in one all_reduce is there in most dumps: rltui.diagnosis.
hangs says the same). ``stopped_at`` is the last moment it was seen advancing (its last step)
when one is known, else the moment the witness first saw it stopped (the round that first found
it where it still is, the time it left): the rank that stopped first is the one whose progress
ended first. Ties go to the rank that left, then to the one with the lower last step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from rltui.diagnosis.exits import exit_of
from rltui.diagnosis.logs import finished, stall_limit
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import LogFileState, NodeSnapshot, ProcInfo, replace

if TYPE_CHECKING:
    from rltui.diagnosis.stacks import StackReport

MAX_RANKS = 4096  # entries kept (a 4,096-rank job whole); the rest are counted in ``more``
MAX_STEPS = 32  # steps per rank in the JSON and the chart (the newest; a log keeps 64)

# States, in the order the timeline lists ranks that share no stop time.
STOPPED, EXITED, UNKNOWN, FINISHED, ADVANCING = (
    "stopped", "exited", "unknown", "finished", "advancing")
_GROUP = {STOPPED: 1, EXITED: 1, UNKNOWN: 2, FINISHED: 3, ADVANCING: 4}
WITNESSES = ("exit", "stacks", "log")  # strongest first; also the order of a tie


class RankLine(msgspec.Struct, frozen=True):
    """One rank of the timeline. Times are POSIX seconds; ``steps`` are (step, time) pairs,
    oldest first, the newest ``MAX_STEPS`` its logs hold."""

    rank: int
    job: str | None = None
    state: str = UNKNOWN  # stopped | exited | unknown | finished | advancing
    stopped_at: float | None = None  # None while it advances (or finished, or unknown)
    stopped_by: str | None = None  # exit | stacks | log
    last_advance_at: float | None = None  # its last step, or a stack round that found it moved
    steps: tuple[tuple[int, float], ...] = ()
    steps_seen: int = 0
    last_step: int | None = None
    last_step_at: float | None = None
    left_at: float | None = None  # exited: when it left
    stuck_since: float | None = None  # the first stack round that found it where it still is

    @property
    def first_step(self) -> tuple[int, float] | None:
        return self.steps[0] if self.steps else None


class Timeline(msgspec.Struct, frozen=True):
    end: float  # the snapshot's time ("now")
    start: float | None = None  # the earliest time any rank's entry knows; None: nothing known
    ranks: tuple[RankLine, ...] = ()  # who stopped first first, ranks still advancing last
    more: int = 0  # ranks left out past MAX_RANKS

    @property
    def first_to_stop(self) -> RankLine | None:
        first = self.ranks[0] if self.ranks else None
        return first if first is not None and first.stopped_at is not None else None

    def together(self, line: RankLine) -> tuple[int, ...]:
        """The other ranks that stopped at the same moment as ``line`` (the same time stamp)."""
        return tuple(r.rank for r in self.ranks
                     if r is not line and r.stopped_at is not None
                     and r.stopped_at == line.stopped_at)


class _Rank:
    """What the witnesses say of one rank while the timeline is gathered."""

    __slots__ = ("rank", "job", "alive", "left", "left_at", "logs", "stack", "stuck_since",
                 "moved_at")

    def __init__(self, rank: int, job: str | None) -> None:
        self.rank, self.job = rank, job
        self.alive = self.left = False
        self.left_at: float | None = None
        self.logs: list[LogFileState] = []
        self.stack = ""  # stuck | moving | "" (no stacks, or one glance)
        self.stuck_since: float | None = None
        self.moved_at: float | None = None


def build(snap: NodeSnapshot, stacks: StackReport | None = None,
          th: Thresholds | None = None, stacks_job: str | None = None) -> Timeline:
    """The timeline of ``snap``; ``stacks``: the hang report of its stack rounds, when read
    (of the job ``stacks_job`` when the node runs several)."""
    th = th or Thresholds()
    job_of = {m: j.id for j in snap.jobs for m in j.members}
    ranks: dict[tuple[str | None, int], _Rank] = {}

    def entry(job: str | None, rank: int) -> _Rank:
        e = ranks.get((job, rank))
        if e is None:
            e = ranks[(job, rank)] = _Rank(rank, job)
        return e

    for p in snap.procs:
        if p.rank is not None and not p.is_zombie:
            entry(job_of.get((p.host, p.pid)), p.rank).alive = True
    for d in snap.departed:
        if d.rank is None:
            continue
        job = job_of.get((d.info.host if d.info else "", d.pid)) if d.pid else \
            _missing_from(snap, d.rank, job_of)
        e = entry(job, d.rank)
        if not e.alive:  # a rank restarted under a new pid is the live one
            e.left = True
            at = exit_of(snap, d).at
            if at is not None and (e.left_at is None or at > e.left_at):
                e.left_at = at
    jobs_of_rank: dict[int, set[str | None]] = {}
    for job, rank in ranks:
        jobs_of_rank.setdefault(rank, set()).add(job)
    owners = _owners(snap)
    for log in snap.logs:
        p = owners.get(("pid", log.host, log.pid)) or owners.get(("path", log.path))
        rank = log.rank if log.rank is not None else (p.rank if p is not None else None)
        if rank is None:
            continue
        job = job_of.get((p.host, p.pid)) if p is not None else None
        if job is None and len(jobs_of_rank.get(rank, ())) == 1:
            job = next(iter(jobs_of_rank[rank]))
        elif job is None and p is None:
            # no process writes it (its rank left): of the jobs with that rank number, the
            # one whose rank left and has no process now
            gone = [j for j in jobs_of_rank.get(rank, ()) if ranks[(j, rank)].left
                    and not ranks[(j, rank)].alive]
            job = gone[0] if len(gone) == 1 else None
        entry(job, rank).logs.append(log)
    if stacks is not None and snap.stacks:
        _read_stacks(ranks, snap, stacks, th, stacks_job)
    lines = _waiting_for_the_gone([_line(e, snap.timestamp, th) for e in ranks.values()],
                                  snap.timestamp)
    lines.sort(key=_order)
    kept = tuple(lines[:MAX_RANKS])
    starts = [t for r in kept for t in (r.first_step[1] if r.first_step else None,
                                        r.stuck_since, r.left_at, r.stopped_at)
              if t is not None and t <= snap.timestamp]
    return Timeline(end=snap.timestamp, start=min(starts) if starts else None, ranks=kept,
                    more=len(lines) - len(kept))


def _owners(snap: NodeSnapshot) -> dict[tuple, ProcInfo]:
    """The processes (live, then gone) by (host, pid) and by the files of their stdout and
    stderr: whose a log is (one pass, not one per log: 4,096 ranks with a log each)."""
    out: dict[tuple, ProcInfo] = {}
    gone = [d.info for d in snap.departed if d.info is not None]
    for p in list(snap.procs) + gone:
        out.setdefault(("pid", p.host, p.pid), p)
        for path in (p.stdout_path, p.stderr_path):
            if path:
                out.setdefault(("path", path), p)
    return out


def _read_stacks(ranks: dict, snap: NodeSnapshot, stacks: StackReport, th: Thresholds,
                 stacks_job: str | None) -> None:
    """Each rank's class state (stuck or moving across the sampled rounds) and the first
    sampled round that holds it: stuck since then at the latest."""
    from rltui.diagnosis.hangs import samples  # the rounds the hang report compared
    rounds = samples(snap.stacks, th.stack_sample_gap_s)
    first_round: dict[int, float] = {}
    for poll in rounds:
        for d in poll.dumps:
            if d.rank is not None and d.rank not in first_round:
                first_round[d.rank] = poll.started
    state = {m: c.state for c in stacks.classes for m in c.members if m >= 0}
    for (job, rank), e in ranks.items():
        if stacks_job is not None and job not in (stacks_job, None):
            continue  # the report reads another job's stacks
        s = state.get(rank)
        if s == "stuck":
            e.stack, e.stuck_since = s, first_round.get(rank)
        elif s == "moving":
            e.stack, e.moved_at = s, rounds[-1].started


def _line(e: _Rank, now: float, th: Thresholds) -> RankLine:
    steps = sorted({(s.step, s.when) for log in e.logs for s in log.recent_steps},
                   key=lambda sw: (sw[1], sw[0]))[-MAX_STEPS:]
    last = max((log for log in e.logs if log.last_step_time is not None),
               key=lambda log: log.last_step_time or 0.0, default=None)
    last_step_at = last.last_step_time if last is not None else None
    stepping = [log for log in e.logs if log.steps_seen and log.last_step_time is not None]
    done = bool(stepping) and any(finished(log) for log in stepping)
    # the rule's floor first: the median of every log's steps costs (4,096 logs)
    fresh = any(now - (log.last_step_time or 0.0) <= th.stall_floor_s
                or now - (log.last_step_time or 0.0) <= stall_limit(log, th)[0]
                for log in stepping if not finished(log))
    advance = last_step_at
    if e.moved_at is not None and (advance is None or e.moved_at > advance):
        advance = e.moved_at
    common = dict(rank=e.rank, job=e.job, last_advance_at=advance, steps=tuple(steps),
                  steps_seen=sum(log.steps_seen for log in e.logs),
                  last_step=last.last_step if last is not None else None,
                  last_step_at=last_step_at, left_at=e.left_at, stuck_since=e.stuck_since)
    if done and not fresh:
        return RankLine(state=FINISHED, **common)
    if e.left and not e.alive:
        at = last_step_at if last_step_at is not None else e.left_at
        return RankLine(state=EXITED, stopped_at=at, stopped_by="exit", **common)
    if fresh:
        return RankLine(state=ADVANCING, **common)
    if e.stack == "stuck":
        at = last_step_at if last_step_at is not None else e.stuck_since
        return RankLine(state=STOPPED, stopped_at=at, stopped_by="stacks", **common)
    if e.stack == "moving":
        return RankLine(state=ADVANCING, **common)
    if stepping:
        return RankLine(state=STOPPED, stopped_at=last_step_at, stopped_by="log", **common)
    return RankLine(state=UNKNOWN, **common)


# A rank whose peer left and that has logged no step since is waiting for it (a collective the
# peer never joins), not advancing, once this many of its own step intervals have passed
# (at least WAIT_MIN_S): the steps-stalled limit is minutes, and the chart would show it
# running on past the crash that stopped the job.
WAIT_STEPS = 3
WAIT_MIN_S = 10.0


def _waiting_for_the_gone(lines: list[RankLine], now: float) -> list[RankLine]:
    left: dict[str | None, float] = {}
    for r in lines:
        if r.state == EXITED and r.left_at is not None:
            left[r.job] = min(left.get(r.job, r.left_at), r.left_at)
    if not left:
        return lines
    out = []
    for r in lines:
        gone_at = left.get(r.job)
        if gone_at is not None and r.last_step_at is not None and r.last_step_at <= gone_at \
                and gone_at - r.last_step_at <= _wait_s(r) and (
                    (r.state == ADVANCING and now - gone_at >= _wait_s(r))
                    or (r.state == STOPPED and r.stopped_by in ("log", "stacks"))):
            # It stepped on until its peer left and not since: it stopped when the peer left,
            # listed after it (a tie: exit first). A peer that left long after the rank's last
            # step (a watchdog's kill of a hang) is no cause and changes nothing.
            r = replace(r, state=STOPPED, stopped_at=gone_at, stopped_by=r.stopped_by or "log")
        out.append(r)
    return out


def _missing_from(snap: NodeSnapshot, rank: int, job_of: dict) -> str | None:
    """The job a rank missing from a WORLD_SIZE (no process, no pid) is missing from: the one
    job whose world holds that rank number and none of whose processes is that rank."""
    live = {(job_of.get((p.host, p.pid)), p.rank) for p in snap.procs if p.rank is not None}
    found = [j.id for j in snap.jobs if j.world_size is not None and rank < j.world_size
             and (j.id, rank) not in live]
    return found[0] if len(found) == 1 else None


def _wait_s(r: RankLine) -> float:
    times = [t for _, t in r.steps]
    gaps = sorted(b - a for a, b in zip(times, times[1:]) if b > a)
    return max(WAIT_MIN_S, WAIT_STEPS * gaps[len(gaps) // 2]) if gaps else WAIT_MIN_S


def _order(r: RankLine) -> tuple:
    """Who stopped first first: by the stop's time, the rank that left before a tie, then the
    lower last step; those without a time after, ranks still advancing last."""
    if r.stopped_at is not None:
        return (0, r.stopped_at, WITNESSES.index(r.stopped_by or "log"),
                -1 if r.last_step is None else r.last_step, r.job or "", r.rank)
    return (_GROUP[r.state], 0.0, 0, 0, r.job or "", r.rank)


def timeline_json(t: Timeline) -> dict[str, Any]:
    """The ``timeline`` of the diagnose document and the incident report."""
    first = t.first_to_stop
    return {
        "start": t.start,
        "end": t.end,
        "first_to_stop": None if first is None else {
            "rank": first.rank, "job": first.job, "stopped_at": first.stopped_at,
            "stopped_by": first.stopped_by, "together": list(t.together(first))},
        "ranks": [_rank_json(r) for r in t.ranks],
        "more": t.more,
    }


def _rank_json(r: RankLine) -> dict[str, Any]:
    first = r.first_step
    return {
        "rank": r.rank, "job": r.job, "state": r.state,
        "stopped_at": r.stopped_at, "stopped_by": r.stopped_by,
        "last_advance_at": r.last_advance_at,
        "first_step": first[0] if first else None,
        "first_step_at": first[1] if first else None,
        "last_step": r.last_step, "last_step_at": r.last_step_at,
        "steps_seen": r.steps_seen, "left_at": r.left_at, "stuck_since": r.stuck_since,
        "steps": [[s, at] for s, at in r.steps],
    }


def of_snapshot(snap: NodeSnapshot, stacks: StackReport | None = None,
                th: Thresholds | None = None,
                stacks_job: str | None = None) -> dict[str, Any]:
    """``timeline_json(build(...))``: what the reports hold."""
    return timeline_json(build(snap, stacks, th, stacks_job))

