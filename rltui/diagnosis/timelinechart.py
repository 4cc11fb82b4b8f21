"""The timeline as a text chart, one line per rank, drawn from its JSON (``timeline_json``):
the incident report draws it from its own document, the app from the same data. Pure.

Each rank's bar spans the window from the first moment known of any rank to now: ``#`` a
column in which its log reported a step, ``=`` running between them, ``X`` the moment it
stopped, ``.`` after it (waiting, or gone), ``>`` at the end of a rank that still advances.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rltui import units

MIN_JOB = 8  # a job id cut for a narrow screen keeps this many cells ("…e-11451")
LEGEND = ("# step logged   = running   X stopped   . stopped since (waiting or gone)   "
          "> still advancing")


def _cell(t: float, start: float, span: float, width: int) -> int:
    return min(width - 1, max(0, int((t - start) / span * width)))


def bar(r: Mapping[str, Any], start: float, end: float, width: int) -> str:
    """One rank's bar over [start, end] in ``width`` columns."""
    span = max(end - start, 1e-9)
    cells = [" "] * width
    steps = [at for _, at in r.get("steps") or () if start <= at <= end]
    known = [t for t in (steps[0] if steps else None, r.get("stuck_since"),
                         r.get("last_advance_at")) if t is not None]
    stop = r.get("stopped_at")
    first = min(known) if known else stop
    if first is None:
        return "".join(cells)  # nothing known of it: no bar
    until = stop if stop is not None else (r.get("last_advance_at") or first)
    if r.get("state") == "advancing":
        until = end
    a, b = _cell(first, start, span, width), _cell(until, start, span, width)
    for i in range(a, b + 1):
        cells[i] = "="
    for at in steps:
        cells[_cell(at, start, span, width)] = "#"
    if stop is not None:
        s = _cell(stop, start, span, width)
        for i in range(s + 1, width):
            cells[i] = "."
        cells[s] = "X"
    elif r.get("state") == "advancing":
        cells[-1] = ">"
    return "".join(cells)


def job_width(tl: Mapping[str, Any], job_max: int | None = None) -> int:
    """The job column's width: 0 (no column) unless the ranks are of several jobs; at most
    ``job_max`` (a narrow screen), never below MIN_JOB."""
    ranks: Sequence[Mapping[str, Any]] = tl.get("ranks") or ()
    if len({r.get("job") for r in ranks}) <= 1:
        return 0
    widest = max((len(r.get("job") or "-") for r in ranks), default=1)
    return widest if job_max is None else max(MIN_JOB, min(widest, job_max))


def _job(name: str, width: int) -> str:
    """A job's id in ``width`` cells: cut at the front, keeping its end (``-PID`` tells two
    jobs of one script apart)."""
    return name if len(name) <= width else "…" + name[len(name) - width + 1:]


def _head(job_w: int) -> str:
    return ((f"{'rank':>5}  {'job':<{job_w}}  " if job_w else f"{'rank':>5}  ")
            + f"{'state':<9}  {'last step':>9}  {'stopped':<8}  {'by':<6}  ")


def labels_width(tl: Mapping[str, Any], job_max: int | None = None) -> int:
    """The columns a chart line takes besides its bar (the labels and the bar's two borders):
    a screen fits the bar into what is left."""
    return len(_head(job_width(tl, job_max))) + 2


def chart(tl: Mapping[str, Any], width: int = 48, rows: int = 32,
          more_where: str = "", job_max: int | None = None) -> list[str]:
    """The chart's lines: a head naming the window, one line per rank (the first ``rows``, who
    stopped first first) and how many more there are; ``more_where`` says where they are;
    ``job_max``: the job column's most cells (a narrow screen; ids cut at the front)."""
    ranks: Sequence[Mapping[str, Any]] = tl.get("ranks") or ()
    if not ranks:
        return ["No rank to show: no job process, log or stack named one."]
    start, end = tl.get("start"), tl["end"]
    if start is None or start >= end:
        start = end - 1.0
    job_w = job_width(tl, job_max)
    several = job_w > 0
    head = _head(job_w)
    axis = units.clock(start)
    axis += units.clock(end).rjust(width - len(axis)) if width > 2 * len(axis) else ""
    out = [" " * len(head) + " " + axis]
    out.append(head + "|" + "-" * width + "|")
    for r in ranks[:rows]:
        step = "-" if r.get("last_step") is None else str(r["last_step"])
        job = f"{_job(r.get('job') or '-', job_w):<{job_w}}  " if several else ""
        out.append(f"{r['rank']:>5}  {job}{r['state']:<9}  {step:>9}  "
                   f"{units.clock(r.get('stopped_at'), '-'):<8}  {r.get('stopped_by') or '-':<6}  "
                   f"|{bar(r, start, end, width)}|")
    left = len(ranks) - rows + int(tl.get("more") or 0)
    if left > 0:
        out.append(f"... and {left} more rank{'s' if left != 1 else ''}"
                   + (f" ({more_where})" if more_where else ""))
    out.append(LEGEND)
    return out


def summary(tl: Mapping[str, Any]) -> str:
    """One line: who stopped first, when and how it is known (or that nobody stopped)."""
    first = tl.get("first_to_stop")
    if first is None and not any(r.get("state") != "unknown" for r in tl.get("ranks") or ()):
        return ("Nothing tells when the ranks advance: no log reported a step of theirs and no "
                "stack rounds were compared.")
    if first is None:
        return "No rank has stopped advancing."
    together = first.get("together") or ()
    also = f" (with {len(together)} other rank{'s' if len(together) != 1 else ''} at the " \
        "same moment)" if together else ""
    how = {"exit": "it left the job", "stacks": "its stack stayed in place",
           "log": "its log reported no new step"}.get(first.get("stopped_by") or "", "")
    job = f" of job {first['job']}" if first.get("job") else ""
    return (f"Rank {first['rank']}{job} stopped first, at {units.clock(first['stopped_at'])}"
            + (f": {how}" if how else "") + also + ".")
