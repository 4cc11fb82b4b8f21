"""Which processes make one job, and each job's own view of the node. Pure: no I/O, no clock.

A node often runs several jobs (two 4-GPU runs on an 8-GPU node, a rollout server beside its
trainer, a debug run beside production); their ranks carry the same numbers and must never meet:
not in the rank table, not in a stack class, not in a missing-rank count.

What ties processes into one job, strongest first (docs/jobs.md):

1. The rendezvous in their environment: ``MASTER_ADDR:MASTER_PORT`` (a loopback address counts
   on its own host only), ``TORCHELASTIC_RUN_ID`` (except torchrun's default ``none``), a Slurm
   step (``SLURM_JOB_ID.SLURM_STEP_ID``), ``RAY_JOB_ID``. Processes that share any of these are
   one job, whatever their parents: ranks re-parented to pid 1 when their launcher died keep
   their environment, and so their job.
2. The process tree, for a process that has none of those (a launcher, a Ray actor without a
   rendezvous): it joins its parent's job; else its children's, when they are all in one job;
   else its siblings' (same parent, outside the watched processes, not pid 1), when they are
   all in one.
3. Anything left is a job of its own, with the untied processes under it and beside it.

Departed processes take part as they were last seen: a job is followed by its processes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from rltui.model import (DepartedRank, Job, LogFileState, NodeSnapshot, ProcInfo, StackPoll)

LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0", "", "ip6-localhost"})
_NAME = re.compile(r"[^A-Za-z0-9_.]+")
MAX_WORLD = 4096  # a WORLD_SIZE above this is not believed (no missing ranks are made up)

Member = tuple[str, int]  # (host, pid): pids repeat across nodes


def ties(p: ProcInfo) -> list[str]:
    """The rendezvous tokens of a process (rule 1); empty when it has none."""
    out = []
    addr, port = p.env("MASTER_ADDR"), p.env("MASTER_PORT")
    if addr is not None and port:
        # a loopback rendezvous is one per node: on another node it is another job
        where = f"{p.host}/" if p.host and addr.strip().lower() in LOOPBACK else ""
        out.append(f"MASTER {where}{addr}:{port}")
    run = p.env("TORCHELASTIC_RUN_ID")
    if run and run.lower() != "none":
        out.append(f"run {run}")
    slurm_job, slurm_step = p.env("SLURM_JOB_ID"), p.env("SLURM_STEP_ID")
    if slurm_job and slurm_step:
        out.append(f"slurm {slurm_job}.{slurm_step}")
    ray = p.env("RAY_JOB_ID")
    if ray:
        out.append(f"ray {ray}")
    return out


@dataclass
class JobNames:
    """Keeps each job's id stable from poll to poll: a group found again (by any tie or any
    member) keeps the id it had, even when its launcher or its first rank is gone."""

    _ids: dict[str, str] = field(default_factory=dict)
    _order: dict[str, int] = field(default_factory=dict)

    def name(self, keys: Sequence[str], fresh: str, taken: set[str]) -> str:
        for key in keys:
            found = self._ids.get(key)
            if found is not None and found not in taken:
                break
        else:
            found = fresh
            n = 2
            while found in taken or (found in self._order and found != fresh):
                found, n = f"{fresh}.{n}", n + 1
        for key in keys:
            self._ids.setdefault(key, found)
        self._order.setdefault(found, len(self._order))
        if len(self._ids) > 100_000:  # a node that churns processes for weeks
            self._ids.clear()
        return found

    def order(self, job_id: str) -> int:
        return self._order.get(job_id, 1 << 30)


class _Union:
    def __init__(self) -> None:
        self.parent: dict[object, object] = {}

    def find(self, x: object) -> object:
        self.parent.setdefault(x, x)
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: object, b: object) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def group(procs: Iterable[ProcInfo], departed: Iterable[ProcInfo] = (),
          names: JobNames | None = None) -> tuple[Job, ...]:
    """The jobs the processes make, live and ``departed`` (as last seen) alike; a pid seen
    twice counts once, live first. In the order their ids were first handed out."""
    by_member: dict[Member, ProcInfo] = {}
    for p in procs:
        by_member.setdefault((p.host, p.pid), p)
    gone = set()
    for p in departed:
        if (p.host, p.pid) not in by_member:
            by_member[(p.host, p.pid)] = p
            gone.add((p.host, p.pid))
    if not by_member:
        return ()
    uf = _Union()
    tied: set[Member] = set()
    for m, p in by_member.items():
        uf.find(m)
        for token in ties(p):
            uf.union(token, m)
            tied.add(m)
    untied = [m for m in by_member if m not in tied]
    if untied:
        _tie_by_tree(by_member, untied, tied, uf, gone)
    groups: dict[object, list[Member]] = {}
    for m in by_member:
        groups.setdefault(uf.find(m), []).append(m)
    names = names if names is not None else JobNames()
    jobs, taken = [], set()
    # the group with the oldest member names itself first, so ids do not swap between polls
    for members in sorted(groups.values(), key=lambda ms: min(pid for _, pid in ms)):
        job = _job(members, by_member, names, taken)
        taken.add(job.id)
        jobs.append(job)
    jobs.sort(key=lambda j: (names.order(j.id), j.id))
    return tuple(jobs)


def _tie_by_tree(by_member: dict[Member, ProcInfo], untied: list[Member], tied: set[Member],
                 uf: _Union, gone: set[Member]) -> None:
    children: dict[Member, list[Member]] = {}
    siblings: dict[Member, list[Member]] = {}
    for m, p in by_member.items():
        if p.ppid is None:
            continue
        parent = (m[0], p.ppid)
        if parent in by_member:
            children.setdefault(parent, []).append(m)
        elif p.ppid > 1:
            siblings.setdefault(parent, []).append(m)

    def joined(m: Member) -> bool:
        return m in tied

    # Parents before children: a chain of untied processes (deepspeed's runner -> launch)
    # follows its top once that is placed. A few passes settle any order.
    pending = list(untied)
    for _ in range(4):
        left = []
        for m in pending:
            p = by_member[m]
            parent = (m[0], p.ppid) if p.ppid is not None else None
            if parent is not None and parent in by_member and joined(parent):
                uf.union(parent, m)
                tied.add(m)
                continue
            below = {uf.find(c) for c in children.get(m, ()) if joined(c)}
            if len(below) == 1:
                uf.union(next(iter(below)), m)
                tied.add(m)
                continue
            beside = {uf.find(s) for s in siblings.get(parent, ()) if s != m and joined(s)} \
                if parent is not None else set()
            if len(beside) == 1 and len(below) == 0:
                uf.union(next(iter(beside)), m)
                tied.add(m)
                continue
            left.append(m)
        if len(left) == len(pending):
            break
        pending = left
    # Ranks of one program with no tie at all (tcp:// rendezvous, launcher gone): those that
    # fit one world (same program and WORLD_SIZE, distinct ranks) are one job; a rank number
    # seen twice among live processes starts another (a departed one beside a live one of its
    # rank is the rank restarted).
    alike: dict[tuple, list[list[Member]]] = {}
    for m in sorted(pending, key=lambda m: (m in gone, m[1])):
        p = by_member[m]
        if p.rank is None:
            continue
        buckets = alike.setdefault((m[0], p.cmdline[1:2], p.role), [])
        for bucket in buckets:
            others = [by_member[o] for o in bucket]
            if any(None not in (o.world_size, p.world_size) and o.world_size != p.world_size
                   for o in others):
                continue
            if m in gone or all(o.rank != p.rank for o in others):
                uf.union(bucket[0], m)
                tied.add(bucket[0])
                tied.add(m)
                bucket.append(m)
                break
        else:
            buckets.append([m])
    # Rule 3: what is left starts jobs of its own; untied processes under or beside it join.
    for m in sorted(pending, key=lambda m: m[1]):
        if m in tied:
            continue
        tied.add(m)
        stack = [m]
        while stack:
            here = stack.pop()
            p = by_member[here]
            near = list(children.get(here, ()))
            if p.ppid is not None and p.ppid > 1 and (here[0], p.ppid) not in by_member:
                near += siblings.get((here[0], p.ppid), ())
            for other in near:
                if other not in tied:
                    uf.union(m, other)
                    tied.add(other)
                    stack.append(other)


def _job(members: list[Member], by_member: dict[Member, ProcInfo], names: JobNames,
         taken: set[str]) -> Job:
    procs = [by_member[m] for m in members]
    member_set = set(members)
    launchers = [p for p in procs if p.launcher]
    # the outermost launcher: deepspeed's runner rather than the launch it started
    top = [p for p in launchers if (p.host, p.ppid) not in member_set] or launchers
    launcher = min(top, key=lambda p: p.pid) if top else None
    ranked = sorted((p for p in procs if p.rank is not None), key=lambda p: (p.rank, p.pid))
    source = ranked[0] if ranked else (launcher or min(procs, key=lambda p: p.pid))
    name = _NAME.sub("-", _name_of(source, launcher)).strip("-")[:24] or "job"
    anchor = launcher.pid if launcher is not None else min(p.pid for p in procs)
    tokens = sorted({t for p in procs for t in ties(p)})
    keys = tokens + [f"pid {h}:{pid}" for h, pid in sorted(members)]
    job_id = names.name(keys, f"{name}-{anchor}", taken)
    worlds = [p.world_size for p in procs if p.world_size is not None]
    return Job(
        id=job_id, name=name, members=tuple(sorted(members)),
        ranks=tuple(sorted({p.rank for p in ranked})),
        world_size=max(set(worlds), key=worlds.count) if worlds else None,
        launcher_pid=launcher.pid if launcher else None,
        launcher_cmdline=launcher.cmdline if launcher else (),
        launcher=launcher.launcher if launcher else "",
        tie=", ".join(tokens[:3]) if tokens else "process tree",
        hosts=tuple(sorted({h for h, _ in members if h})))


def _name_of(p: ProcInfo, launcher: ProcInfo | None) -> str:
    """The script or module the job runs: its lowest rank's, else what its launcher runs."""
    if p.cmdline and p.cmdline[0].startswith("ray::"):
        return "ray"
    if p.role and p.role not in ("torchrun", "python") and not p.launcher:
        return p.role
    if launcher is not None:
        script = [a for a in launcher.cmdline[1:] if a.endswith(".py")]
        if script:
            return script[-1].rsplit("/", 1)[-1][:-3]
        return launcher.launcher
    return p.role or p.name or "job"


def with_departed(snap_procs: Sequence[ProcInfo],
                  departed: Sequence[DepartedRank]) -> list[ProcInfo]:
    """Every process a snapshot knows, live first, then departed ones as last seen."""
    return list(snap_procs) + [d.info for d in departed if d.info is not None]


def missing_from_world(procs: Sequence[ProcInfo], now: float,
                       known: set[int | None]) -> list[DepartedRank]:
    """Ranks a single-node job should have but does not, even if never seen. ``procs``: one
    job's processes (never several jobs': their ranks would hide each other's gaps).

    Only when every live process says the whole world lives on this node (LOCAL_WORLD_SIZE ==
    WORLD_SIZE). WORLD_SIZE alone cannot tell: on a multi-node job the other ranks are on other
    nodes, not missing (ranks 4-5 of 8 here would otherwise report 0-3 and 6-7).
    """
    ranked = [p for p in procs if p.rank is not None and not p.is_zombie]
    if not ranked:
        return []
    worlds = {p.world_size for p in ranked}
    local_worlds = {p.local_world_size for p in ranked}
    if len(worlds) != 1 or None in worlds:
        return []
    world = worlds.pop()
    if local_worlds != {world} or world is None or world > MAX_WORLD:
        return []
    present = {p.rank for p in ranked}
    return [DepartedRank(pid=0, rank=r, last_seen=0.0, gone_since=now,
                         reason="missing from WORLD_SIZE")
            for r in range(world) if r not in present and r not in known]


# -- one job's view of the snapshot ----------------------------------------------------------------

@dataclass
class Lens:
    """Restricts snapshots to one job each, keeping what it cut (the rounds of dumps) so that
    a job's stack rounds stay the same objects from one evaluation to the next (the hang
    report is memoised on them)."""

    _rounds: dict[tuple, tuple[StackPoll, StackPoll]] = field(default_factory=dict)

    def rounds(self, polls: Sequence[StackPoll], keep) -> tuple[StackPoll, ...]:
        out = []
        live = set()
        for poll in polls:
            key = (id(poll), keep.key)
            live.add(key)
            hit = self._rounds.get(key)
            if hit is None or hit[0] is not poll:
                dumps = tuple(d for d in poll.dumps if keep.dump(d))
                hit = (poll, replace(poll, dumps=dumps) if len(dumps) != len(poll.dumps)
                       else poll)
                self._rounds[key] = hit
            if hit[1].dumps:
                out.append(hit[1])
        if len(self._rounds) > 64 * max(1, len(live)):
            for key in [k for k in self._rounds if k not in live]:
                del self._rounds[key]
        return tuple(out)


@dataclass(frozen=True)
class _Keep:
    key: object
    members: frozenset
    pids: frozenset
    sole: bool  # the only job: what names no process is its too

    def dump(self, d) -> bool:
        return d.pid in self.pids

    def log(self, log: LogFileState, paths: frozenset) -> bool:
        if log.pid is not None:
            return (log.host, log.pid) in self.members
        return self.sole or log.path in paths


def restrict(snap: NodeSnapshot, job: Job, lens: Lens | None = None) -> NodeSnapshot:
    """The snapshot as this job alone sees it: its processes, departed ranks, logs, dumps and
    GPUs. Logs that name no writer and GPUs that name no process are the job's only when it
    is the only job."""
    members = frozenset(job.members)
    sole = len(snap.jobs) <= 1
    keep = _Keep(key=(job.id, members), members=members,
                 pids=frozenset(pid for _, pid in job.members), sole=sole)
    procs = tuple(p for p in snap.procs if (p.host, p.pid) in members)
    departed = [d for d in snap.departed
                if d.pid and (d.info.host if d.info else "", d.pid) in members]
    departed += missing_from_world(procs, snap.timestamp, {d.rank for d in departed})
    paths = frozenset(x for p in procs for x in (p.stdout_path, p.stderr_path) if x)
    logs = tuple(log for log in snap.logs if keep.log(log, paths))
    gpus = snap.gpus if sole else _gpus_of(snap, procs, keep.pids)
    stacks = (lens or Lens()).rounds(snap.stacks, keep)
    return replace(snap, job=job.id, procs=procs, departed=tuple(departed), logs=logs,
                   gpus=gpus, stacks=stacks, jobs=(job,))


def _gpus_of(snap: NodeSnapshot, procs: Sequence[ProcInfo], pids: frozenset) -> tuple:
    used = {p.gpu_index for p in procs if p.gpu_index is not None}
    return tuple(g for g in snap.gpus
                 if g.index in used or any(gp.pid in pids for gp in g.processes))


def unclaimed(snap: NodeSnapshot, lens: Lens | None = None) -> NodeSnapshot | None:
    """What no job of several claims (logs that name no writer, dumps of pids not running
    here: saved files), as a snapshot of its own; None when there is nothing, or when there
    are no jobs at all (then the whole snapshot is that evidence)."""
    if not snap.jobs:
        return None
    members = frozenset(m for j in snap.jobs for m in j.members)
    pids = frozenset(pid for _, pid in members)
    sole = len(snap.jobs) == 1
    paths = frozenset(x for p in snap.procs for x in (p.stdout_path, p.stderr_path) if x)
    logs = tuple(log for log in snap.logs
                 if (log.pid is not None and (log.host, log.pid) not in members)
                 or (log.pid is None and not sole and log.path not in paths))
    keep = _Keep(key=("", members), members=members, pids=pids, sole=False)
    stacks = (lens or Lens()).rounds(snap.stacks, _Unclaimed(keep))
    if not stacks and not any(log.lines_seen for log in logs):
        return None
    # no processes here, but not "no job found": the jobs are elsewhere in the view
    sources = tuple(s for s in snap.sources if s.name != "procs")
    return replace(snap, job="", procs=(), departed=(), logs=logs, gpus=(), stacks=stacks,
                   sources=sources, jobs=())


@dataclass(frozen=True)
class _Unclaimed:
    keep: _Keep

    @property
    def key(self) -> object:
        return ("unclaimed", self.keep.key)

    def dump(self, d) -> bool:
        return d.pid not in self.keep.pids


def find(jobs: Sequence[Job], wanted: str) -> Job | None:
    """The job ``--job`` names: its id, its name when only one job has it, or the pid of its
    launcher or of any of its processes."""
    for job in jobs:
        if job.id == wanted:
            return job
    named = [j for j in jobs if j.name == wanted]
    if len(named) == 1:
        return named[0]
    if wanted.isdigit():
        pid = int(wanted)
        for job in jobs:
            if job.launcher_pid == pid or pid in job.pids:
                return job
    return None
