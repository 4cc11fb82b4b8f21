"""The training processes on this node: who they are, which rank and GPU, where they log.

It runs every ~0.5 s on nodes with hundreds of processes, and reading /proc costs tens of
microseconds per file, so nearly everything is cached per process (keyed by pid, validated by
create time): whether the process belongs to the job, its environment-derived fields, command
line and role. A poll lists the PIDs, reads the few dynamic numbers (state, CPU, RSS, threads,
parent) of the job's processes, and re-checks about 1/10 of the cached decisions: an entry is
re-checked every ``recheck_s`` seconds, because a process can change what it is without a new
PID (``exec``, or a Ray worker setting its ``ray::`` title after start). Output-file targets are
re-read every ``fd_recheck_s`` seconds (a job can reopen its log). docs/processes.md has the user
side of the rules.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import psutil

from rltui.jobs import ties
from rltui.model import DENIED, ERROR, OK, ProcInfo, ProcPoll, Reading, replace
from rltui.parsing.procinfo import (  # noqa: F401 - re-exported for callers and tests
    DEBUG_ENV,
    ENGINES,
    JOB_ENV,
    LAUNCHER_MODULES,
    _program,
    _pythonish,
    env_gpu,
    launcher_of,
    parse_int,
    ray_bystander,
    ray_class,
    role_of,
)
from rltui.redact import redact_argv, redact_env
from rltui.sources.base import reading

RECHECK_S = 5.0
FD_RECHECK_S = 10.0
# The live monitor lists every process on the node this often (new jobs, processes that became
# ranks, re-parented ones); between those scans it follows the job's own processes and the new
# children of their main threads. 0: every poll is a full scan.
FULL_SCAN_S = 5.0

DEFAULT_LOOKED_FOR = ("Python processes with RANK or LOCAL_RANK in their environment, "
                      "torchrun, deepspeed and accelerate launchers and ray:: workers")
DEFAULT_HOW = "env RANK/LOCAL_RANK, launchers, ray:: titles"

ENV_DENIED = "environment not readable: permission denied"
ENV_GONE = "environment not readable: the process had already exited"
CMDLINE_DENIED = "command line not readable: permission denied"
FDS_DENIED = "output files not readable: permission denied"
STATS_DENIED = "some process statistics not readable"


def output_target(pid: int, fd: int) -> tuple[str | None, bool]:
    """(path, denied) of a process's fd when it is an existing regular file.

    ttys, pipes, sockets, /dev/null and deleted files give None: there is no log to follow.
    """
    link = os.path.join(psutil.PROCFS_PATH, str(pid), "fd", str(fd))
    try:
        target = os.readlink(link)
        info = os.stat(link)  # follows the link to the open file itself, even when deleted
    except PermissionError:
        return None, True
    except OSError:
        return None, False  # closed fd, exited process
    if not stat.S_ISREG(info.st_mode) or info.st_nlink == 0:
        return None, False
    return target, False


# -- cache ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Static:
    """What does not change while a process keeps its command line."""

    name: str
    cmdline: tuple[str, ...]  # redacted
    role: str
    ray: bool
    rank: int | None
    local_rank: int | None
    world_size: int | None
    local_world_size: int | None
    node_rank: int | None
    env_gpu: int | None
    debug_env: tuple[tuple[str, str], ...]
    job_env: tuple[tuple[str, str], ...]
    launcher: str
    reason: str  # why some of it could not be read


@dataclass(slots=True)
class _Entry:
    proc: psutil.Process  # our own object: cpu_percent(None) measures since our last poll
    fingerprint: int  # hash of the raw command line at the last check
    checked: float  # monotonic time of the last check
    static: _Static | None = None  # None: not a job process
    denied: bool = False  # could not tell whether it is a job process
    primed: bool = False  # cpu_percent has a previous sample
    zombie: bool = False
    out: tuple[str | None, str | None] = (None, None)
    out_denied: bool = False
    out_checked: float = float("-inf")


def _static(proc: psutil.Process, cmdline: tuple[str, ...], name: str, reason: str = "",
            env: Mapping[str, str] | None = None) -> _Static:
    if env is None:
        env, env_reason = _environ(proc)
        reason = "; ".join(r for r in (reason, env_reason) if r)
    shown = {k: env[k] for k in DEBUG_ENV if k in env}
    ties = {k: env[k][:256] for k in JOB_ENV if k in env}
    return _Static(
        name=name, cmdline=redact_argv(cmdline), role=role_of(cmdline, name),
        ray=bool(cmdline) and cmdline[0].startswith("ray::"),
        rank=parse_int(env.get("RANK")),
        # verl's Ray workers start with RAY_LOCAL_*; they set LOCAL_RANK only in-process,
        # which /proc never shows
        local_rank=parse_int(env.get("LOCAL_RANK", env.get("RAY_LOCAL_RANK"))),
        world_size=parse_int(env.get("WORLD_SIZE")),
        local_world_size=parse_int(env.get("LOCAL_WORLD_SIZE",
                                           env.get("RAY_LOCAL_WORLD_SIZE"))),
        node_rank=_node_rank(env), env_gpu=env_gpu(env),
        debug_env=tuple(sorted(redact_env(shown).items())),
        job_env=tuple(sorted(redact_env(ties).items())), launcher=launcher_of(cmdline),
        reason=reason)


def _node_rank(env: Mapping[str, str]) -> int | None:
    node = parse_int(env.get("NODE_RANK"))
    return node if node is not None else parse_int(env.get("GROUP_RANK"))


def _environ(proc: psutil.Process) -> tuple[dict[str, str], str]:
    try:
        return proc.environ(), ""
    except psutil.ZombieProcess:
        return {}, ENV_GONE
    except psutil.AccessDenied:
        return {}, ENV_DENIED


def _self_and_ancestors() -> frozenset[int]:
    """rltui and whatever started it (shell, sudo) must never look like the job."""
    me = psutil.Process()
    try:
        return frozenset([me.pid] + [p.pid for p in me.parents()])
    except psutil.Error:
        return frozenset([me.pid])


# -- the source ----------------------------------------------------------------------------------

class ProcSource:
    """Finds the job's processes; ``poll()`` returns a "procs" Reading with a ``ProcPoll``.

    Which processes: ``pids`` (a list, or a callable giving the live list) wins, with their
    descendants when ``include_children``; else ``match``, a regex searched in the joined
    command line; else the default rule (DEFAULT_LOOKED_FOR). ``gpu_map`` gives pid -> GPU index
    as NVML sees it and takes precedence over what the environment implies. An invalid
    ``match`` raises ``re.error`` here, before any poll.
    """

    name = "procs"

    def __init__(self, match: str | None = None,
                 pids: Sequence[int] | Callable[[], Sequence[int]] = (),
                 gpu_map: Callable[[], dict[int, int]] | None = None,
                 include_children: bool = False, clock: Callable[[], float] = time.time, *,
                 recheck_s: float = RECHECK_S, fd_recheck_s: float = FD_RECHECK_S,
                 full_scan_s: float = 0.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._pattern = match
        self._match = re.compile(match) if match else None
        self._pids = pids
        self._pid_mode = callable(pids) or bool(pids)
        self._gpu_map = gpu_map
        self._children = include_children
        self._clock = clock
        self._recheck_s = recheck_s
        self._fd_recheck_s = fd_recheck_s
        self._full_scan_s = full_scan_s
        self._monotonic = monotonic
        self._next_full = float("-inf")
        self._denied = 0  # Python processes the last full scan could not inspect
        self._entries: dict[int, _Entry] = {}
        # Descendants once selected, followed for as long as they live: when the launcher given
        # to --pid exits, its children are re-parented (to init or a subreaper) and are no
        # longer anybody's children that we could look up, yet they are the job.
        self._followed: dict[int, psutil.Process] = {}
        self._excluded = _self_and_ancestors()

    def close(self) -> None:
        self._entries.clear()

    def poll(self) -> Reading:
        def out(status: str, payload=None, message="", remedy="") -> Reading:
            return reading(self.name, status, payload, message, remedy, clock=lambda: stamp)

        stamp = self._clock()
        mono = self._monotonic()
        full = mono >= self._next_full
        if full:
            self._next_full = mono + self._full_scan_s
        try:
            wanted = self._wanted_pids() if self._pid_mode else None
        except Exception as exc:  # noqa: BLE001 - a caller's PID list; its failure is a state
            return out(ERROR, message=f"could not get the PID list: {exc}",
                       remedy="The job that supplies the PIDs may have stopped; restart it.")
        try:
            if wanted is not None:
                found, denied, how = self._by_pid(wanted, mono, full), 0, self._pid_how(wanted)
            else:
                found, denied = self._scan(mono) if full else self._follow(mono)
                how = f"--match {self._pattern}" if self._match else DEFAULT_HOW
        except (OSError, psutil.Error) as exc:
            return out(ERROR, message=f"cannot list processes: {exc}",
                       remedy="rltui reads /proc; run it on the Linux node of the job.")
        nvml = self._nvml()
        infos = [i for i in (self._info(e, mono, nvml) for e in found) if i is not None]
        if wanted is None:
            infos = _fold_helpers(infos)
        infos.sort(key=lambda p: (p.rank is None, p.rank or 0, p.local_rank or 0, p.pid))
        payload = ProcPoll(procs=tuple(infos), how=how, denied=denied)
        denied_note = (f"{denied} Python process(es) could not be inspected "
                       "(permission denied)") if denied else ""
        if infos:
            return out(OK, payload, denied_note,
                       "Run rltui as the job's user or root to see them." if denied else "")
        if denied:
            return out(DENIED, payload, f"no training processes found; {denied_note}",
                       "Run rltui as the job's user or root, or name the job with --pid PID.")
        return out(OK, payload, *self._nothing_found(wanted))

    # -- which processes

    def _wanted_pids(self) -> list[int]:
        pids = self._pids() if callable(self._pids) else self._pids
        return [int(p) for p in pids]

    def _pid_how(self, wanted: list[int]) -> str:
        shown = " ".join(str(p) for p in wanted[:8]) + (" ..." if len(wanted) > 8 else "")
        return f"--pid {shown}" + (" and children" if self._children else "")

    def _nothing_found(self, wanted: list[int] | None) -> tuple[str, str]:
        if wanted is not None:
            if not wanted:
                return "no PIDs to watch yet", ""
            return (f"none of the given PIDs is running ({self._pid_how(wanted)})",
                    "Check the PIDs with ps, or let rltui find the job (omit --pid).")
        if self._match:
            return (f"no process matches --match {self._pattern!r}",
                    "The regex is searched in the whole command line; compare with "
                    "`ps -eo pid,args`.")
        return (f"no training processes found (looked for {DEFAULT_LOOKED_FOR})",
                "Name the job: --pid PID or --match REGEX (searched in its command line).")

    def _scan(self, mono: float) -> tuple[list[_Entry], int]:
        live = psutil.pids()
        present = set(live)
        for pid in [p for p in self._entries if p not in present]:
            del self._entries[pid]
        entries = [self._entry(pid, mono, force_job=False) for pid in live
                   if pid not in self._excluded]
        self._denied = sum(e.denied for e in entries if e is not None)
        return [e for e in entries if e is not None and e.static is not None], self._denied

    def _follow(self, mono: float) -> tuple[list[_Entry], int]:
        """Between full scans: the job's processes as last seen, and the children their main
        threads started since (a rank's DataLoader workers, a launcher's new ranks), without
        listing the node. Anything else new waits for the next full scan."""
        job = [pid for pid, e in self._entries.items() if e.static is not None]
        pids = dict.fromkeys(job)
        for pid in job:
            for kid in _main_thread_children(pid):
                if kid not in self._entries and kid not in self._excluded:
                    pids.setdefault(kid)
        entries = [self._entry(pid, mono, force_job=False) for pid in pids]
        return [e for e in entries if e is not None and e.static is not None], self._denied

    def _by_pid(self, wanted: list[int], mono: float, full: bool = True) -> list[_Entry]:
        pids = dict.fromkeys(p for p in wanted if p not in self._excluded)
        if self._children:
            # psutil.Process.is_running compares the start time too: a followed PID reused by
            # another process is dropped, never adopted.
            self._followed = {p: proc for p, proc in self._followed.items()
                              if p not in pids and _running(proc)}
            pids.update(dict.fromkeys(self._followed))
            if full:  # psutil's children() reads every /proc/*/stat: only now and then
                for pid in list(pids):
                    try:
                        kids = (self._followed.get(pid) or psutil.Process(pid)).children(
                            recursive=True)
                    except psutil.Error:
                        continue
                    for kid in kids:
                        if kid.pid not in self._excluded and kid.pid not in wanted:
                            pids.setdefault(kid.pid)
                            self._followed.setdefault(kid.pid, kid)
            else:  # the new children of the main threads of the processes already followed
                todo = list(pids)
                while todo:
                    for kid in _main_thread_children(todo.pop()):
                        if kid in pids or kid in self._excluded or kid in wanted:
                            continue
                        try:
                            proc = psutil.Process(kid)
                        except psutil.Error:
                            continue
                        pids.setdefault(kid)
                        self._followed.setdefault(kid, proc)
                        todo.append(kid)
        for pid in [p for p in self._entries if p not in pids]:
            del self._entries[pid]
        return [e for e in (self._entry(pid, mono, force_job=True) for pid in pids) if e]

    def _entry(self, pid: int, mono: float, force_job: bool) -> _Entry | None:
        """The cached entry for ``pid``, re-checked when due (zombies never change again)."""
        entry = self._entries.get(pid)
        if entry is None or (not entry.zombie and mono - entry.checked >= self._recheck_s):
            entry = self._check(pid, entry, mono, force_job)
        return entry

    def _check(self, pid: int, old: _Entry | None, mono: float, force_job: bool) -> _Entry | None:
        """(Re)decide what ``pid`` is; None when it is gone. An unchanged command line keeps the
        cached entry (and its CPU baseline): re-checking costs one read, not four."""
        try:
            proc = old.proc if old is not None else psutil.Process(pid)
            cmdline, reason = _cmdline(proc)
            if old is not None:
                if cmdline is None:  # a job process that just exited stays, as a zombie
                    old.checked, old.zombie = mono, True
                    return old
                if hash(cmdline) == old.fingerprint:
                    old.checked = mono
                    return old
                if not proc.is_running():  # the PID belongs to another process now
                    return self._check(pid, None, mono, force_job)
            if cmdline == () and not reason and _mid_exec(proc):
                # Between its exec and its arguments (the parent's fork returned, the kernel
                # has not laid out argv yet): not cached, so the next poll (a full scan's or a
                # follow's) reads it again instead of taking it for no job process for
                # RECHECK_S.
                self._entries.pop(pid, None)
                return None
            cmdline = cmdline or ()
            # A burst of new processes (the first scan) would all come due in the same poll;
            # staggering their first re-check by PID spreads that cost over recheck_s.
            checked = mono if old is not None else mono - self._recheck_s * (pid % 16) / 16
            entry = _Entry(proc=proc, fingerprint=hash(cmdline), checked=checked)
            if old is not None:
                entry.primed, entry.out, entry.out_checked = old.primed, old.out, old.out_checked
            self._entries[pid] = entry

            def name() -> str:
                try:
                    return proc.name()
                except (psutil.AccessDenied, psutil.ZombieProcess):
                    return ""

            if force_job:
                entry.static = _static(proc, cmdline, name(), reason)
            elif reason:
                entry.denied = True
            elif self._match is not None:
                if self._match.search(" ".join(cmdline) or name()):
                    entry.static = _static(proc, cmdline, name())
            elif cmdline:  # kernel threads and zombies have none: nothing to go on
                _classify_default(entry, cmdline, name)
            return entry
        except psutil.NoSuchProcess:
            self._entries.pop(pid, None)
            return None
        except OSError:  # an odd /proc read error: keep what we knew, try again next time
            if old is None:
                self._entries.pop(pid, None)
            else:
                self._entries[pid] = old
            return old

    # -- per-process values

    def _nvml(self) -> dict[int, int]:
        if self._gpu_map is None:
            return {}
        try:
            return dict(self._gpu_map())
        except Exception:  # noqa: BLE001 - NVML trouble shows in the gpus source, not here
            return {}

    def _info(self, entry: _Entry, mono: float, nvml: dict[int, int]) -> ProcInfo | None:
        proc, s = entry.proc, entry.static
        assert s is not None
        reasons = [s.reason] if s.reason else []
        denied: list[bool] = []

        def get(fn: Callable, default=None):
            try:
                return fn()
            except psutil.ZombieProcess:  # some reads fail once a process is a zombie
                return default
            except (psutil.AccessDenied, OSError):
                denied.append(True)
                return default

        try:
            with proc.oneshot():  # one read of /proc/PID/stat for all of these
                state, ppid, created = get(proc.status, ""), get(proc.ppid), get(proc.create_time)
                cpu, mem = get(lambda: proc.cpu_percent(None)), get(proc.memory_info)
                threads = get(proc.num_threads)
        except psutil.NoSuchProcess:
            self._entries.pop(proc.pid, None)
            return None
        if denied:
            reasons.append(STATS_DENIED)
        entry.zombie = state == psutil.STATUS_ZOMBIE
        if cpu is not None and not entry.primed:
            entry.primed, cpu = True, None  # psutil's first sample is a meaningless 0.0
        if s.ray and not entry.zombie:
            s = self._retitle(entry)
        if not entry.zombie and mono - entry.out_checked >= self._fd_recheck_s:
            (out, d_out), (err, d_err) = output_target(proc.pid, 1), output_target(proc.pid, 2)
            entry.out, entry.out_denied, entry.out_checked = (out, err), d_out or d_err, mono
        if entry.out_denied:
            reasons.append(FDS_DENIED)
        gpu, gpu_from = (nvml[proc.pid], "nvml") if proc.pid in nvml else (
            (s.env_gpu, "env") if s.env_gpu is not None else (None, ""))
        return ProcInfo(
            pid=proc.pid, ppid=ppid, name=s.name, cmdline=s.cmdline, rank=s.rank,
            local_rank=s.local_rank, world_size=s.world_size,
            local_world_size=s.local_world_size, node_rank=s.node_rank, role=s.role,
            cpu_percent=cpu,
            rss=mem.rss if mem is not None else None, state=state, num_threads=threads,
            create_time=created, gpu_index=gpu, gpu_from=gpu_from,
            debug_env=s.debug_env, job_env=s.job_env, launcher=s.launcher,
            stdout_path=entry.out[0], stderr_path=entry.out[1],
            partial=bool(reasons), partial_reason="; ".join(reasons))

    @staticmethod
    def _retitle(entry: _Entry) -> _Static:
        """Ray retitles a worker per method call (``ray::WorkerDict.generate_sequences``):
        the title says what it is doing now, so it is re-read every poll."""
        s = entry.static
        assert s is not None
        try:
            cmdline = tuple(entry.proc.cmdline())
        except psutil.Error:
            return s
        if cmdline and hash(cmdline) != entry.fingerprint:
            entry.fingerprint = hash(cmdline)
            entry.static = s = replace(s, cmdline=redact_argv(cmdline),
                                       role=role_of(cmdline, s.name))
        return s


def _classify_default(entry: _Entry, cmdline: tuple[str, ...], name: Callable[[], str]) -> None:
    if ray_bystander(cmdline[0]):
        return  # Ray's idle pool and its own services: ray:: titles, but no job's processes
    if cmdline[0].startswith("ray::") or launcher_of(cmdline):
        entry.static = _static(entry.proc, cmdline, name())
    elif _pythonish(cmdline[0]) or _pythonish(name()):
        env, reason = _environ(entry.proc)
        if reason == ENV_DENIED:
            entry.denied = True
        elif "RANK" in env or "LOCAL_RANK" in env:
            entry.static = _static(entry.proc, cmdline, name(), env=env)


def _main_thread_children(pid: int) -> list[int]:
    """The children of ``pid``'s main thread, from /proc/PID/task/PID/children (one read;
    children forked by other threads are found by the next full scan). Empty when the kernel
    lacks the file or the process is gone."""
    try:
        with open(os.path.join(psutil.PROCFS_PATH, str(pid), "task", str(pid), "children"),
                  "rb") as fh:
            return [int(p) for p in fh.read().split()]
    except (OSError, ValueError):
        return []


def _mid_exec(proc: psutil.Process) -> bool:
    """Whether a process with an empty command line is a user process caught in its exec
    (kernel threads, children of kthreadd, have none for good)."""
    try:
        return proc.pid != 2 and proc.ppid() != 2 and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running()
    except psutil.Error:
        return False


def _cmdline(proc: psutil.Process) -> tuple[tuple[str, ...] | None, str]:
    """(command line, why unreadable); None for a zombie, whose command line is gone."""
    try:
        return tuple(proc.cmdline()), ""
    except psutil.ZombieProcess:
        return None, ""
    except psutil.AccessDenied:
        return (), CMDLINE_DENIED


def _fold_helpers(infos: list[ProcInfo]) -> list[ProcInfo]:
    """Drop children that inherited their parent's RANK/LOCAL_RANK (DataLoader workers, compile
    workers, engine subprocesses): they are part of that rank, and counting them as ranks would
    make every DataLoader restart look like a rank exiting."""
    by_pid = {p.pid: p for p in infos}

    def helper(p: ProcInfo) -> bool:
        parent = by_pid.get(p.ppid) if p.ppid is not None else None
        return (parent is not None and (p.rank, p.local_rank) != (None, None)
                and (parent.rank, parent.local_rank) == (p.rank, p.local_rank))

    kept = [p for p in infos if not helper(p)]
    orphans = orphaned_helpers(kept)
    return [p for p in kept if p.pid not in orphans] if orphans else kept


# A process that claims a rank but started this long after its job's other ranks did.
ORPHAN_LATE_S = 2.0
# A child forked from a rank starts at least this long after it: the rank had imported torch
# and joined its process group first (seconds; ranks started together start within
# milliseconds of each other).
FORKED_AFTER_S = 0.5


def orphaned_helpers(infos: list[ProcInfo]) -> set[int]:
    """Helpers that outlived their rank: a DataLoader worker (or any child forked after the
    process group was made) keeps the rank's environment, RANK included, and its sockets; when
    the rank dies it is re-parented (to init, or to a subreaper) and would read as that rank
    alive, at the stack the rank had when it forked. Among the job's ranks (same job tie: the
    rendezvous, else the run id, Slurm step or Ray job, as rltui.jobs ties them) a process
    claiming a rank none of the others claims is one

    * when its parent is init while the others share a live parent, and it started
      ``ORPHAN_LATE_S`` after all of them; or
    * whatever the parents (ranks started by hand from a shell that has exited are all
      init's), when it was forked (_forked_late): one thread, where each of the others runs
      the threads of its process group.

    Ranks re-parented together (their launcher died) are kept."""
    # processes sharing any tie are one job (a verl rank 0 may show the Ray job but no
    # rendezvous, its peers both): ties joined transitively, as rltui.jobs joins them
    bucket_of: dict[str, int] = {}
    buckets: dict[int, list[ProcInfo]] = {}
    for p in infos:
        tokens = ties(p) if p.rank is not None else []
        if not tokens:
            continue
        found = sorted({bucket_of[t] for t in tokens if t in bucket_of})
        home = found[0] if found else len(buckets)
        members = buckets.setdefault(home, [])
        for other in found[1:]:
            for q in buckets.pop(other):
                members.append(q)
            for t, b in bucket_of.items():
                if b == other:
                    bucket_of[t] = home
        members.append(p)
        for t in tokens:
            bucket_of[t] = home
    out: set[int] = set()
    for ranked in buckets.values():
        parented = [p for p in ranked if p.ppid not in (None, 0, 1)]
        parents = {p.ppid for p in parented}
        out |= _forked_late(ranked)
        if len(parents) != 1 or len(parented) == len(ranked):
            continue
        started = [p.create_time for p in parented if p.create_time is not None]
        if not started:
            continue
        for p in ranked:
            if p.ppid in (0, 1) and p.create_time is not None \
                    and p.create_time > max(started) + ORPHAN_LATE_S \
                    and any(o.rank == p.rank for o in parented) is False:
                out.add(p.pid)
    return out


def _forked_late(ranked: list[ProcInfo]) -> set[int]:
    """The helpers among one job's ranks told by how they were made, not by their parents
    (which cannot tell them when every rank was re-parented to init, its shell gone, or when
    the helper went to a subreaper). A rank that joined its process group runs the backend's
    threads (gloo's workers, NCCL's watchdog) and a child forked from it only the thread that
    forked it. So a helper runs one thread, its parent is init or no other rank's, and it
    started ``FORKED_AFTER_S`` after every rank that runs several, claiming a rank none of
    them claims. The start-time margin alone is thin: the fork comes when its rank has
    imported torch and joined its group, 2.8 s after it started in one of three runs of
    tests/integration/torchjobs/crash_early.py, against ORPHAN_LATE_S's 2 s. A rank started
    late by hand has joined its group, and has its threads, by the time anyone looks."""
    forked = {p.pid for p in ranked if p.num_threads == 1 and p.create_time is not None
              and (p.ppid in (0, 1) or sum(o.ppid == p.ppid for o in ranked) == 1)}
    joined = [p for p in ranked if p.pid not in forked and not p.is_zombie]
    if not forked or not joined or any(p.create_time is None or (p.num_threads or 0) < 2
                                       for p in joined):
        return set()
    last = max(p.create_time or 0.0 for p in joined)
    claimed = {p.rank for p in ranked if p.pid not in forked}
    return {p.pid for p in ranked if p.pid in forked and p.rank not in claimed
            and (p.create_time or 0.0) > last + FORKED_AFTER_S}
