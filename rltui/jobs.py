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
from dataclasses import dataclass, field

from rltui.model import DepartedRank, Job, LogFileState, NodeSnapshot, ProcInfo, StackPoll, replace

LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0", "", "ip6-localhost"})
_NAME = re.compile(r"[^A-Za-z0-9_.]+")
MAX_WORLD = 4096  # a WORLD_SIZE above this is not believed (no missing ranks are made up)

Member = tuple[str, int]  # (host, pid): pids repeat across nodes


def _clean(value: str) -> str:
    """An environment value as it may be shown: printable, one line, bounded."""
    return "".join(c for c in value.strip() if c.isprintable())[:128]


def master(p: ProcInfo) -> str | None:
    """The rendezvous a rank joins (``MASTER host:port``); a loopback address is one per node,
    and all its spellings are one. A launcher's own environment is its shell's, not its job's."""
    if p.launcher:
        return None
    addr, port = p.env("MASTER_ADDR"), p.env("MASTER_PORT")
    if addr is None or not port or not port.strip():
        return None
    addr = _clean(addr)
    if addr.lower() in LOOPBACK:
        addr = f"{_clean(p.host)}/loopback" if p.host else "127.0.0.1"
    return f"MASTER {addr}:{_clean(port)}"


def ties(p: ProcInfo) -> list[str]:
    """The tokens that tie a process to its job (rule 1), strongest first: its rendezvous, its
    torchrun run id, its Slurm step, its Ray job (of its Ray cluster); empty when it has none."""
    if p.launcher:
        return []
    out = []
    found = master(p)
    if found:
        out.append(found)
    run = p.env("TORCHELASTIC_RUN_ID")
    if run and run.strip().lower() != "none":
        out.append(f"run {_clean(run)}")
    slurm_job, slurm_step = p.env("SLURM_JOB_ID"), p.env("SLURM_STEP_ID")
    if slurm_job and slurm_step:
        out.append(f"slurm {_clean(slurm_job)}.{_clean(slurm_step)}")
    ray = p.env("RAY_JOB_ID")
    if ray:
        # Ray numbers jobs per cluster (01000000 in every fresh one): the cluster is its raylet
        raylet = p.env("RAY_RAYLET_PID") or "?"
        out.append(f"ray {_clean(p.host)}/{_clean(raylet)}/{_clean(ray)}")
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
            # never an id handed out before: a job held by its id (--job, the picker) must not
            # turn into another one that reuses its launcher's pid
            found, n = fresh, 2
            while found in taken or found in self._order:
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
    tied = _tie_by_tokens(by_member, uf)
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


def _tie_by_tokens(by_member: dict[Member, ProcInfo], uf: _Union) -> set[Member]:
    """Rule 1. The rendezvous ties first; a weaker token (run id, Slurm step, Ray job) then
    joins what has no rendezvous of its own to the one rendezvous it shares, but never two
    rendezvous: two torchrun jobs started in one Slurm step, or with one --rdzv-id, stay two."""
    tokens = {m: ties(p) for m, p in by_member.items()}
    for m, found in tokens.items():
        uf.find(m)
        if found and found[0].startswith("MASTER "):
            uf.union(("master", found[0]), m)
    # union(a, b) keeps a's root: joining master-less roots into a master root keeps this set
    # true through the loop below
    master_roots = {uf.find(k) for k in list(uf.parent) if isinstance(k, tuple) and k
                    and k[0] == "master"}
    for level in ("run ", "slurm ", "ray "):
        holders: dict[str, list[Member]] = {}
        for m, found in tokens.items():
            for t in found:
                if t.startswith(level):
                    holders.setdefault(t, []).append(m)
        for group_members in holders.values():
            roots = {uf.find(m) for m in group_members}
            with_master = roots & master_roots
            without = [r for r in roots if r not in with_master]
            target = next(iter(with_master)) if len(with_master) == 1 else None
            if target is None and without:
                target = without[0]
            if target is None:
                continue
            for r in without:
                uf.union(target, r)
    return {m for m, found in tokens.items() if found}


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
        beside_at: dict[Member, set] = {}  # parent -> the jobs of its tied children, this pass
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
            # a launcher is the root of its own job, never its siblings' (a sweep shell
            # starts several)
            beside = set()
            if parent is not None and not p.launcher:
                if parent not in beside_at:
                    beside_at[parent] = {uf.find(x) for x in siblings.get(parent, ())
                                         if joined(x)}
                beside = beside_at[parent]
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
    # The parent is part of the key: two runs of one script from two shells are two jobs.
    alike: dict[tuple, list[_Bucket]] = {}
    for m in sorted(pending, key=lambda m: (m in gone, m[1])):
        p = by_member[m]
        if p.rank is None:
            continue
        buckets = alike.setdefault((m[0], p.ppid, p.cmdline[1:2], p.role), [])
        for bucket in buckets:
            if bucket.takes(p, m in gone):
                uf.union(bucket.first, m)
                tied.add(bucket.first)
                tied.add(m)
                break
        else:
            buckets.append(_Bucket(m, p))
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
            if p.ppid is not None and p.ppid > 1 and (here[0], p.ppid) not in by_member \
                    and not p.launcher:
                near += siblings.get((here[0], p.ppid), ())
            for other in near:
                if other not in tied and not by_member[other].launcher:
                    uf.union(m, other)
                    tied.add(other)
                    stack.append(other)


class _Bucket:
    """Untied ranks of one program taken as one job: distinct ranks, one WORLD_SIZE."""

    __slots__ = ("first", "ranks", "world")

    def __init__(self, m: Member, p: ProcInfo) -> None:
        self.first, self.ranks, self.world = m, {p.rank}, p.world_size

    def takes(self, p: ProcInfo, gone: bool) -> bool:
        if None not in (self.world, p.world_size) and self.world != p.world_size:
            return False
        if not gone and p.rank in self.ranks:
            return False
        self.ranks.add(p.rank)
        self.world = self.world if self.world is not None else p.world_size
        return True


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
    # a pid the kernel hands out again is another process: its start time is in the key
    keys = tokens + [f"pid {h}:{pid}:{by_member[(h, pid)].create_time}"
                     for h, pid in sorted(members)]
    job_id = names.name(keys, f"{name}-{anchor}", taken)
    worlds = [p.world_size for p in procs if p.world_size is not None]
    return Job(
        id=job_id, name=name, members=tuple(sorted(members)),
        ranks=tuple(sorted({p.rank for p in ranked})),
        world_size=max(set(worlds), key=worlds.count) if worlds else None,
        launcher_pid=launcher.pid if launcher else None,
        launcher_cmdline=launcher.cmdline if launcher else (),
        launcher=launcher.launcher if launcher else "",
        tie=", ".join(tokens[:3]) if tokens else "process tree", keys=tuple(tokens),
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


def whole_world_here(procs: Sequence[ProcInfo]) -> int | None:
    """The job's WORLD_SIZE when its live ranks say the whole world runs on this node, else None.

    WORLD_SIZE alone cannot tell: on a multi-node job the other ranks are on other nodes, not
    missing (ranks 4-5 of 8 here would otherwise report 0-3 and 6-7). The world is here when
    every live rank says LOCAL_WORLD_SIZE == WORLD_SIZE (torchrun, on one node), or, where no
    rank sets LOCAL_WORLD_SIZE (ranks started by hand: ``RANK=$i WORLD_SIZE=3 python ...``),
    when they meet at a loopback rendezvous (``MASTER_ADDR=127.0.0.1``, ``localhost``): a rank
    on another node could not reach it, so every rank of the job runs here."""
    ranked = [p for p in procs if p.rank is not None and not p.is_zombie]
    if not ranked:
        return None
    worlds = {p.world_size for p in ranked}
    if len(worlds) != 1 or None in worlds:
        return None
    world = worlds.pop()
    if world is None or world > MAX_WORLD:
        return None
    local_worlds = {p.local_world_size for p in ranked}
    if local_worlds == {world}:
        return world
    if local_worlds == {None} and all(_loopback_rendezvous(p) for p in ranked):
        return world
    return None


def _loopback_rendezvous(p: ProcInfo) -> bool:
    """The rank meets its peers at a loopback address (127.0.0.0/8, ``localhost``, ``::1``)."""
    if master(p) is None:
        return False
    addr = _clean(p.env("MASTER_ADDR") or "").lower()
    return addr in LOOPBACK or addr.startswith("127.")


def missing_from_world(procs: Sequence[ProcInfo], now: float,
                       known: set[int | None]) -> list[DepartedRank]:
    """Ranks a single-node job should have but does not, even if never seen. ``procs``: one
    job's processes (never several jobs': their ranks would hide each other's gaps). Only when
    the whole world runs on this node (whole_world_here)."""
    world = whole_world_here(procs)
    if world is None:
        return []
    present = {p.rank for p in procs if p.rank is not None and not p.is_zombie}
    return [DepartedRank(pid=0, rank=r, last_seen=0.0, gone_since=now,
                         reason="missing from WORLD_SIZE")
            for r in range(world) if r not in present and r not in known]


# -- each job's view of the snapshot ---------------------------------------------------------------

@dataclass
class Lens:
    """Splits snapshots by job, keeping what it cut (the rounds of dumps) so that a job's stack
    rounds stay the same objects from one evaluation to the next (the hang report is memoised
    on them) while the jobs and the rounds do not change."""

    _rounds: dict[int, tuple[StackPoll, tuple, list[StackPoll | None]]] = \
        field(default_factory=dict)

    def split(self, poll: StackPoll, jobs: tuple, index: dict[int, int],
              n: int) -> list[StackPoll | None]:
        """The round cut per job (``n`` jobs, then the unclaimed dumps last); None where a job
        has no dump in it."""
        hit = self._rounds.get(id(poll))
        if hit is not None and hit[0] is poll and hit[1] is jobs:
            return hit[2]
        parts: list[list] = [[] for _ in range(n + 1)]
        for d in poll.dumps:
            parts[index.get(d.pid, n)].append(d)
        out: list[StackPoll | None] = []
        for dumps in parts:
            if not dumps:
                out.append(None)
            elif len(dumps) == len(poll.dumps):
                out.append(poll)
            else:
                out.append(replace(poll, dumps=tuple(dumps)))
        self._rounds[id(poll)] = (poll, jobs, out)
        if len(self._rounds) > 32:  # rounds long gone (the snapshot keeps the last few)
            for key in list(self._rounds)[:len(self._rounds) - 16]:
                del self._rounds[key]
        return out


def partition(snap: NodeSnapshot, lens: Lens | None = None, adopt: str | None = None
              ) -> list[tuple[Job | None, NodeSnapshot]]:
    """The snapshot as each job alone sees it (its processes, departed ranks and the ranks
    missing from its WORLD_SIZE, its logs, dumps and GPUs), then what no job claims (logs
    naming no writer, dumps of pids not running here: saved files) when there is any, with job
    None. Without jobs: the whole snapshot, job None. One pass over the snapshot, whatever the
    number of jobs.

    Logs that name no writer and GPUs that name no process are the job's when it is the only
    job."""
    jobs = snap.jobs
    if not jobs:
        return [(None, snap)]
    lens = lens or Lens()
    n, sole = len(jobs), len(jobs) == 1
    at = {m: i for i, job in enumerate(jobs) for m in job.members}
    by_pid = {pid: i for (_, pid), i in at.items()}
    procs: list[list[ProcInfo]] = [[] for _ in range(n)]
    for p in snap.procs:
        i = at.get((p.host, p.pid))
        if i is not None:
            procs[i].append(p)
    departed: list[list[DepartedRank]] = [[] for _ in range(n)]
    for d in snap.departed:
        i = at.get((d.info.host if d.info else "", d.pid)) if d.pid else None
        if i is not None:
            departed[i].append(d)
    by_path = {x: i for i in range(n) for p in procs[i] for x in (p.stdout_path, p.stderr_path)
               if x}
    ties_at = {t: i for i, job in enumerate(jobs) for t in job.keys}
    # adopt: the job the user chose (--job) takes the logs that name no writer (given for it)
    nobody = next((i for i, job in enumerate(jobs) if job.id == adopt), n)
    logs: list[list[LogFileState]] = [[] for _ in range(n + 1)]
    for log in snap.logs:
        if log.pid is not None:
            i = at.get((log.host, log.pid), n)
        elif log.tie and log.tie in ties_at:
            i = ties_at[log.tie]
        else:
            i = 0 if sole else by_path.get(log.path, nobody)
        logs[i].append(log)
    gpus = _gpus_by_job(snap, procs, by_pid, sole)
    rounds: list[list[StackPoll]] = [[] for _ in range(n + 1)]
    for poll in snap.stacks:
        for i, part in enumerate(lens.split(poll, jobs, by_pid, n)):
            if part is not None:
                rounds[i].append(part)
    fr = _flight_recorder_by_job(snap, by_pid, n, 0 if sole else nobody)
    out: list[tuple[Job | None, NodeSnapshot]] = []
    for i, job in enumerate(jobs):
        gone = departed[i] + missing_from_world(procs[i], snap.timestamp,
                                                {d.rank for d in departed[i]})
        out.append((job, replace(snap, procs=tuple(procs[i]), departed=tuple(gone),
                                 logs=tuple(logs[i]), gpus=gpus[i], stacks=tuple(rounds[i]),
                                 flight_recorder=fr[i], jobs=(job,))))
    if rounds[n] or any(log.lines_seen for log in logs[n]) or gpus[n] or fr[n] is not None:
        # no processes here, but not "no job found": the jobs are elsewhere in the view
        sources = tuple(s for s in snap.sources if s.name != "procs")
        out.append((None, replace(snap, procs=(), departed=(), logs=tuple(logs[n]),
                                  gpus=gpus[n], stacks=tuple(rounds[n]), sources=sources,
                                  flight_recorder=fr[n], jobs=())))
    return out


def _flight_recorder_by_job(snap: NodeSnapshot, by_pid: dict[int, int], n: int,
                            nobody: int) -> list:
    """Each job's Flight Recorder dumps: those found through a process's environment are its
    job's; those the user gave go where logs that name no writer go (the only job, the one
    chosen with --job, else none of them)."""
    poll = snap.flight_recorder
    out: list = [None] * (n + 1)
    if poll is None:
        return out
    parts: list[list] = [[] for _ in range(n + 1)]
    for d in poll.dumps:
        parts[by_pid.get(d.pid, n) if d.pid is not None else nobody].append(d)
    for i, dumps in enumerate(parts):
        if dumps or (i == nobody and poll.problems):
            out[i] = replace(poll, dumps=tuple(dumps),
                             problems=poll.problems if i == nobody else ())
        elif i < n and poll.enabled is not None:
            out[i] = replace(poll, dumps=(), problems=())
    return out


def _gpus_by_job(snap: NodeSnapshot, procs: list[list[ProcInfo]], by_pid: dict[int, int],
                 sole: bool) -> list[tuple]:
    """Each job's GPUs, then (last) those no job's process names: a GPU whose user cannot be
    told (UUIDs in CUDA_VISIBLE_DEVICES, no NVML process list in a container) is judged with the
    other unclaimed ones, not dropped."""
    if sole:
        return [snap.gpus, ()]
    used: dict[int, set[int]] = {}
    for i, mine in enumerate(procs):
        for p in mine:
            if p.gpu_index is not None:
                used.setdefault(p.gpu_index, set()).add(i)
    out: list[list] = [[] for _ in range(len(procs) + 1)]
    for g in snap.gpus:
        owners = set(used.get(g.index, ()))
        owners.update(by_pid[gp.pid] for gp in g.processes if gp.pid in by_pid)
        for i in owners or (len(procs),):
            out[i].append(g)
    return [tuple(x) for x in out]


def resolve(jobs: Sequence[Job], wanted: str) -> tuple[Job | None, str]:
    """The job ``--job`` names: its id, its name when only one job has it, or the pid of its
    launcher or of any of its processes; else (None, why)."""
    for job in jobs:
        if job.id == wanted:
            return job, ""
    named = [j for j in jobs if j.name == wanted]
    if len(named) == 1:
        return named[0], ""
    if len(named) > 1:
        return None, f"{len(named)} jobs run {wanted!r}: {', '.join(j.id for j in named)}"
    if wanted.isascii() and wanted.isdigit() and len(wanted) < 12:
        pid = int(wanted)
        for job in jobs:
            if job.launcher_pid == pid or pid in job.pids:
                return job, ""
    return None, ""
