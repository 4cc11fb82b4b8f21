"""What the log feature tells the other panes: which log belongs to which rank, its steps and
the ETA.

Pure (no Textual): the rank table and the log pane ask the same questions of one snapshot, so
they share one ``LogIndex`` per snapshot instead of matching files to processes twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from rltui.model import LogFileState, NodeSnapshot, ProcInfo, StepRecord
from rltui.units import duration

SPARK_STEPS = 8  # step times in the rank table's sparkline
STEP_WINDOW = 16  # step times behind the median (seconds per step, ETA)

def path_tag(path: str) -> str:
    """The tag of a file no rank could be found for: its name without the extension."""
    name = path.rsplit("/", 1)[-1]
    stem = name.split(".", 1)[0] or name
    return stem[:10]


# -- which log is whose -------------------------------------------------------------------------
class LogIndex:
    """Log files of one snapshot by rank, pid and path.

    A file belongs to a rank when the log source says so, else through the process writing it
    (its pid), else when it is a process's stdout/stderr file. Departed ranks are included (as
    last seen), so a rank that died keeps its log and its last step.
    """

    def __init__(self, snap: NodeSnapshot) -> None:
        self.rank_of_path: dict[str, int] = {}
        self._by_rank: dict[int, LogFileState] = {}
        self._files_of_rank: dict[int, list[LogFileState]] = {}
        # By (host, pid): across nodes pids repeat from node to node ("" on one node).
        self._by_pid: dict[tuple[str, int], LogFileState] = {}
        self._by_path: dict[str, LogFileState] = {}
        if not snap.logs:
            return  # the common case on a node without logs: no per-process work at all
        procs: list[ProcInfo] = list(snap.procs)
        procs += [d.info for d in snap.departed if d.info is not None]
        pid_rank = {(p.host, p.pid): p.rank for p in procs if p.rank is not None}
        out_rank = {path: p.rank for p in procs if p.rank is not None
                    for path in (p.stdout_path, p.stderr_path) if path}
        for f in snap.logs:
            self._by_path[f.path] = f
            rank = f.rank
            if rank is None and f.pid is not None:
                rank = pid_rank.get((f.host, f.pid))
            if rank is None:
                rank = out_rank.get(f.path)
            if f.pid is not None:
                _keep_best(self._by_pid, (f.host, f.pid), f)
            if rank is not None:
                self.rank_of_path[f.path] = rank
                _keep_best(self._by_rank, rank, f)
                self._files_of_rank.setdefault(rank, []).append(f)

    @property
    def files(self) -> tuple[LogFileState, ...]:
        return tuple(self._by_path.values())

    @property
    def ranks(self) -> list[int]:
        return sorted(self._by_rank)

    def for_rank(self, rank: int | None) -> LogFileState | None:
        return None if rank is None else self._by_rank.get(rank)

    def files_of_rank(self, rank: int) -> list[LogFileState]:
        return self._files_of_rank.get(rank, [])

    def for_path(self, path: str) -> LogFileState | None:
        return self._by_path.get(path)

    def for_proc(self, p: ProcInfo) -> LogFileState | None:
        """By rank, else by pid, else by the process's stdout/stderr path."""
        if p.rank is not None and p.rank in self._by_rank:
            return self._by_rank[p.rank]
        if (p.host, p.pid) in self._by_pid:
            return self._by_pid[(p.host, p.pid)]
        for path in (p.stdout_path, p.stderr_path):
            if path and path in self._by_path:
                return self._by_path[path]
        return None


def _keep_best(into: dict, key: object, f: LogFileState) -> None:
    """Of a rank's files (stdout and stderr), the one with the newest step speaks for it."""
    old = into.get(key)
    if old is None or (f.last_step_time or float("-inf")) > (old.last_step_time
                                                             or float("-inf")):
        into[key] = f


_indexes: dict[int, tuple[NodeSnapshot, LogIndex]] = {}  # id -> (the snapshot, its index)


def log_index(snap: NodeSnapshot) -> LogIndex:
    """The index of ``snap``, built once however many panes ask (a few snapshots are kept:
    the node's and each job's view of the same evaluation)."""
    hit = _indexes.get(id(snap))
    if hit is not None and hit[0] is snap:
        return hit[1]
    if len(_indexes) >= 16:
        _indexes.pop(next(iter(_indexes)))
    index = LogIndex(snap)
    _indexes[id(snap)] = (snap, index)
    return index


# -- steps ----------------------------------------------------------------------------------------
def step_times(recent: Sequence[StepRecord], window: int = STEP_WINDOW) -> list[float]:
    """Seconds per step between consecutive recorded steps over the last ``window`` steps,
    oldest first. A jump of several steps is divided among them; a restart (the step going
    back) starts the series over. Only the recent pace counts, and the rank table asks this of
    every visible rank at every update, so the window is short."""
    out: list[float] = []
    prev_step = prev_when = None
    for s in recent[-window - 1:]:
        when = s.time if s.time is not None else s.arrival
        if prev_step is not None:
            if s.step < prev_step:
                out = []
            elif s.step > prev_step:
                out.append(max(0.0, (when - prev_when) / (s.step - prev_step)))
        prev_step, prev_when = s.step, when
    return out


def eta(f: LogFileState) -> float | None:
    """Seconds left: remaining steps times the median step time, when the total is known."""
    if f.total_steps is None or f.last_step is None:
        return None
    left = f.total_steps - f.last_step
    if left <= 0:
        return 0.0
    times = step_times(f.recent_steps)
    return left * median(times) if times else None


def step_summary(f: LogFileState) -> str:
    """``step 41/100 · 4.1s/step · eta 4m10s`` (the parts that are known)."""
    if f.last_step is None:
        return ""
    parts = [f"step {f.last_step}" + (f"/{f.total_steps}" if f.total_steps else "")]
    times = step_times(f.recent_steps)
    if times:
        parts.append(f"{duration(median(times))}/step")
    left = eta(f)
    if left is not None:
        parts.append("done" if left == 0 else f"eta {duration(left)}")
    return " · ".join(parts)
