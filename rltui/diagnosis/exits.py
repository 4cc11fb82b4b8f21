"""How and when a departed rank left: its exit code or signal, its time, its error, and where
each was read. Pure.

The best witness first: torchrun's failure summary (``exitcode``, ``time`` of the failure) and
the rank's own ``error.json`` (what it raised, the signal that killed it, its time); then its
log's last error (a traceback's exception line and frame, the line's time); then what rltui saw
itself (when the process was last seen alive). A rank that was gone before rltui started has
only what its files say.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from rltui.model import DepartedRank, LogEvent, LogFileState, NodeSnapshot

ERRORS = ("traceback", "cuda-oom", "failure", "nccl-timeout", "engine-oom")


class Exit(msgspec.Struct, frozen=True):
    rank: int | None
    pid: int
    code: int | None = None  # exit code; torchrun reports a signal as its negative number
    signal: str = ""  # "SIGKILL"
    at: float | None = None  # when it left (POSIX seconds)
    at_from: str = ""  # where the time was read: "torchrun's summary", "error.json", ...
    error: str = ""  # "RuntimeError: CUDA error: ..." (one line)
    where: str = ""  # the innermost frame of its traceback: "trainer.py:130 in step"
    code_from: str = ""  # where the exit code was read

    @property
    def how(self) -> str:
        """``exit code 1``, ``killed by SIGKILL``, or "" when unknown."""
        if self.signal:
            return f"killed by {self.signal}"
        if self.code is not None:
            return f"exit code {self.code}"
        return ""

    @property
    def crashed(self) -> bool:
        """It raised or was killed: not a clean exit (code 0 and no error)."""
        return bool(self.error or self.signal or (self.code not in (None, 0)))


def _failure_time(value: object) -> float | None:
    """torchrun's summary time: ``2024-05-02_10:15:17`` (local time of the node)."""
    if not isinstance(value, str):
        return None
    for fmt in ("%Y-%m-%d_%H:%M:%S", "%Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(value.strip(), fmt).timestamp()
        except ValueError:
            continue
    return None


def _rank_logs(snap: NodeSnapshot, d: DepartedRank) -> list[LogFileState]:
    paths = {d.info.stdout_path, d.info.stderr_path} - {None} if d.info else set()
    return [log for log in snap.logs
            if (d.pid and log.pid == d.pid) or log.path in paths
            or (d.rank is not None and log.rank == d.rank and log.pid in (None, d.pid))]


def exit_of(snap: NodeSnapshot, d: DepartedRank) -> Exit:
    signal = error = where = at_from = code_from = ""
    code_v: int | None = None
    at: float | None = None
    # torchrun's summary, in any log of the job (the launcher's)
    for log in snap.logs:
        for e in log.events:
            if e.kind != "child-failed" or e.field("form") == "error-file":
                continue
            if e.field("rank") != d.rank and not (d.pid and e.field("pid") == d.pid):
                continue
            if isinstance(e.field("exitcode"), int):
                code_v, code_from = int(e.field("exitcode")), "torchrun's summary"
            signal = str(e.field("signal") or "") or signal
            t = _failure_time(e.field("failure_time"))
            if t is not None:
                at, at_from = t, "torchrun's summary"
    mine = _rank_logs(snap, d)
    for log in mine:
        for e in log.events:
            if e.kind == "child-failed" and e.field("form") == "error-file":
                error = str(e.field("error") or "") or error
                where = str(e.field("last_frame") or "") or where
                signal = signal or str(e.field("signal") or "")
                if at is None and e.time is not None:
                    at, at_from = e.time, "its error.json"
    last: tuple[LogEvent, LogFileState] | None = None
    for log in mine:
        for e in log.events:
            if e.kind in ERRORS and (last is None or _when(e) > _when(last[0])):
                last = (e, log)
    if last is not None:
        e, log = last
        if not error:
            error = e.summary
            where = str(e.field("last_frame") or "") or where
        if at is None:
            at, at_from = (e.time, "its log's time stamp") if e.time is not None else (
                e.arrival, f"when its log {log.path} last changed")
    if at is None and d.last_seen:
        at, at_from = d.last_seen, "last seen alive by rltui"
    if at is None:
        ends = [log.last_line_arrival for log in mine if log.last_line_arrival is not None]
        if ends:
            at, at_from = max(ends), "its log's last line"
    return Exit(rank=d.rank, pid=d.pid, code=code_v, signal=signal, at=at,
                at_from=at_from, error=error[:300], where=where[:200], code_from=code_from)


def _when(e: LogEvent) -> tuple[float, int]:
    return (e.time if e.time is not None else e.arrival, e.line_no)


def exits(snap: NodeSnapshot) -> list[Exit]:
    """One per departed rank of the snapshot, in its order."""
    return [exit_of(snap, d) for d in snap.departed]
