"""The logs of ranks that are gone, found from what the living processes of their job say.

Started after a rank died (the 3 a.m. case), rltui cannot read the dead rank's stdout from /proc:
the process is gone. Its log is usually still on disk, where its job's other logs are:

* torchrun's log folder: a surviving worker's ``TORCHELASTIC_ERROR_FILE``
  (``<dir>/<run>/attempt_<n>/<local rank>/error.json``) names the attempt folder, which holds
  every local rank's ``stdout.log``, ``stderr.log`` and ``error.json``; the launcher's
  ``--log-dir`` names the folder when no worker is left;
* a file named by rank beside a surviving rank's (``logs/rank0.log`` -> ``logs/rank2.log``);
* Ray's session logs: a worker's own ``worker-<id>-<job>-<pid>.err`` names its Ray job, whose
  other workers' ``.err`` files sit beside it.

Each find says where it came from (shown with the log) and which job it belongs to (the tie
rltui.jobs grouped the job by), so a dead rank's log joins its own job only. Reading the folders
costs a few stat calls per job, at most every ``recheck_s`` seconds.
"""

from __future__ import annotations

import glob
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rltui import jobs as joblib
from rltui.model import ProcInfo
from rltui.parsing import logplaces
from rltui.parsing.procinfo import ray_class

RECHECK_S = 10.0
MAX_PER_JOB = 64  # files found per job (a 1024-rank job's folder is not listed whole)
MAX_STATS = 512  # existence checks per look, all jobs together
MAX_ACTORS_KNOWN = 4096  # Ray worker logs whose actor class is remembered
_RAY_WORKER = re.compile(
    r"^(?P<dir>.*/logs)/worker-[0-9a-f]+-(?P<job>[0-9a-f]+)-(?P<pid>\d+)\.(?:out|err)$")


@dataclass(frozen=True, slots=True)
class Found:
    path: str
    rank: int | None
    found: str  # where it was found, for people
    tie: str  # the job it belongs to (a rltui.jobs tie), "" when its job has none


class DeadLogFinder:
    def __init__(self, recheck_s: float = RECHECK_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.recheck_s = recheck_s
        self.clock = clock
        self._last: float | None = None
        self._key: tuple = ()
        self._found: list[Found] = []
        # a Ray worker log's actor class never changes: read once per file, not every look
        self._actors: dict[str, str | None] = {}

    def find(self, procs: Sequence[ProcInfo], departed: Sequence[ProcInfo] = ()) -> list[Found]:
        """The logs of the jobs of ``procs`` (live) and ``departed`` (as last seen)."""
        key = tuple(sorted((p.host, p.pid) for p in procs))
        now = self.clock()
        if key == self._key and self._last is not None and now - self._last < self.recheck_s:
            return self._found
        self._key, self._last = key, now
        budget = [MAX_STATS]
        out: list[Found] = []
        everyone = list(procs) + list(departed)
        live = {p.pid for p in procs if not p.is_zombie}
        for job in joblib.group(procs, departed):
            mine = set(job.members)
            members = [p for p in everyone if (p.host, p.pid) in mine]
            tie = next(iter(sorted({t for p in members for t in joblib.ties(p)})), "")
            out += _of_job(members, job, tie, budget, live, self._actors)[:MAX_PER_JOB]
        if len(self._actors) > MAX_ACTORS_KNOWN:
            self._actors.clear()
        self._found = out
        return out


def _exists(path: str, budget: list[int]) -> bool:
    if budget[0] <= 0:
        return False
    budget[0] -= 1
    try:
        return os.path.isfile(path)
    except (OSError, ValueError):
        return False


def _of_job(members: list[ProcInfo], job, tie: str, budget: list[int],
            live: set[int] | None = None,
            actors: dict[str, str | None] | None = None) -> list[Found]:
    out: list[Found] = []
    seen: set[str] = set()
    ranked = [p for p in members if p.rank is not None]
    wanted = _ranks_here(ranked)

    def add(path: str, rank: int | None, found: str) -> None:
        if path not in seen and _exists(path, budget):
            seen.add(path)
            out.append(Found(path, rank, found, tie))

    # torchrun's folder, from a worker's error-file path
    for p in members:
        error_file = p.env("TORCHELASTIC_ERROR_FILE")
        where = logplaces.torchrun_attempt(error_file) if error_file else None
        if where is None:
            continue
        attempt, local = where
        locals_ = range(p.local_world_size) if p.local_world_size and \
            p.local_world_size <= logplaces.MAX_RANKS else [local]
        base = p.rank - local if p.rank is not None and p.rank >= local else None
        for path, k in logplaces.torchrun_files(attempt, locals_):
            add(path, base + k if base is not None else None,
                f"in torchrun's log folder {attempt}")
        break  # one attempt folder per job and node
    # the launcher's --log-dir, newest attempt, when no worker named it
    if not out:
        for p in members:
            folder = logplaces.log_dir_option(p.cmdline) if p.launcher == "torchrun" else None
            if not folder:
                continue
            attempts = sorted(glob.glob(os.path.join(glob.escape(folder), "*", "attempt_*")),
                              key=_mtime, reverse=True)[:1]
            for attempt in attempts:
                for k in sorted(int(d) for d in _listdir(attempt) if d.isdigit())[:MAX_PER_JOB]:
                    for name in logplaces.TORCHRUN_FILES:
                        rank = _global(members, k)
                        if rank is None and _single_node(p.cmdline):
                            rank = k
                        add(f"{attempt}/{k}/{name}", rank, f"in torchrun's --log-dir {folder}")
    # a file named by rank beside a surviving rank's
    live_ranks = {p.rank for p in ranked if not p.is_zombie}
    missing = [r for r in wanted if r not in live_ranks]
    if missing:
        for p in ranked:
            for own in (p.stdout_path, p.stderr_path):
                if not own:
                    continue
                for path, r in logplaces.rank_swapped(own, p.rank, missing):
                    add(path, r, f"beside rank {p.rank}'s log {os.path.basename(own)}")
    # Ray: the other workers' .err files of the same Ray job. A file names its worker's pid,
    # not its rank: with one rank missing and one worker of the ranks' actor class gone (Ray
    # writes ":actor_name:<Class>" at the top of an actor's logs), that file is the missing
    # rank's (Ray 2.60 names them worker-<id>-<job>-<pid>.err). A task worker Ray reaped, or an
    # actor of another class, is never taken for the rank.
    alive = live if live is not None else {p.pid for p in members if not p.is_zombie}
    classes = {ray_class(p.cmdline[0]) for p in ranked if p.cmdline and
               p.cmdline[0].startswith("ray::")}
    for p in members:
        for own in (p.stdout_path, p.stderr_path):
            m = _RAY_WORKER.match(own or "")
            if not m:
                continue
            pattern = os.path.join(glob.escape(m.group("dir")), f"worker-*-{m.group('job')}-*.err")
            workers = [(f, w) for f in glob.glob(pattern) if (w := _RAY_WORKER.match(f))]
            known = {} if actors is None else actors
            gone = [f for f, w in workers if int(w.group("pid")) not in alive
                    and (known[f] if f in known else
                         known.setdefault(f, _actor_class(f))) in classes]
            one = gone[0] if len(missing) == 1 and len(gone) == 1 else None
            files = [f for f in sorted((f for f, _ in workers), key=_mtime, reverse=True)
                     [:MAX_PER_JOB] if _size(f)]
            if one is not None and one not in files:
                files.append(one)  # even when quiet or older than the newest ones
            for path in files:
                rank = missing[0] if path == one else None
                add(path, rank, f"in Ray's session logs of job {m.group('job')}"
                    + (f" (the one {next(iter(classes))} worker gone, rank {rank} the one "
                       "missing)" if rank is not None else ""))
            break
    return out


def _actor_class(err_path: str) -> str | None:
    """The actor class a Ray worker's log names (``:actor_name:Trainer``, in its .err or its
    .out), read from the first few KB; None for a task worker or an unreadable file."""
    from rltui.sources.safeopen import read_bytes
    for path in (err_path, err_path[:-4] + ".out"):
        try:
            head = read_bytes(path, 4096).decode("utf-8", "replace")
        except OSError:
            continue
        for line in head.splitlines():
            if line.startswith(":actor_name:"):
                return line[len(":actor_name:"):].strip().split(".")[0] or None
    return None


def _ranks_here(ranked: list[ProcInfo]) -> list[int]:
    """The ranks this node should run: the whole world on a single-node job (as rltui.jobs
    tells one: LOCAL_WORLD_SIZE == WORLD_SIZE, or ranks started by hand at a loopback
    rendezvous), else this node's block (RANK - LOCAL_RANK onwards, LOCAL_WORLD_SIZE of them).
    The other nodes' ranks are not missing here (their files may well be beside these, on a
    shared filesystem)."""
    world = joblib.whole_world_here(ranked)
    if world is not None and world <= logplaces.MAX_RANKS:
        return list(range(world))
    for p in ranked:
        local_world = p.local_world_size
        if p.local_rank is not None and local_world and local_world <= logplaces.MAX_RANKS \
                and p.rank is not None and p.rank >= p.local_rank:
            base = p.rank - p.local_rank
            return list(range(base, base + local_world))
    return []


def _global(members: list[ProcInfo], local: int) -> int | None:
    """A local rank's global rank, from a member whose RANK and LOCAL_RANK are both known."""
    for p in members:
        if p.rank is not None and p.local_rank is not None and p.rank >= p.local_rank:
            return p.rank - p.local_rank + local
    return None


def _single_node(cmdline: Sequence[str]) -> bool:
    """torchrun started for one node: its local ranks are the global ones."""
    args = list(cmdline)
    if "--standalone" in args:
        return True
    for i, arg in enumerate(args):
        if arg in ("--nnodes", "--nnodes=1", "--nnodes=1:1"):
            value = arg.split("=", 1)[1] if "=" in arg else (args[i + 1] if i + 1 < len(args)
                                                             else "")
            return value in ("1", "1:1")
    return False


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
