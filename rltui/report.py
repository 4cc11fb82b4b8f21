"""The headless views of a snapshot and its diagnosis: the ``--json`` document and plain text.

Pure. The JSON schema is public (docs/diagnose-json.md): fields are only ever added, never
renamed, and ``schema`` is bumped only for a change a script would notice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rltui import __version__, units
from rltui.diagnosis import timeline
from rltui.diagnosis.exits import exit_of
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import Diagnosis, NodeSnapshot, severity_rank
from rltui.rankset import compact
from rltui.serialize import to_data

if TYPE_CHECKING:
    from rltui.diagnosis.stacks import StackReport
    from rltui.monitor import JobView

SCHEMA = 1
FAIL_LEVELS = ("warning", "critical")


def should_fail(diagnosis: Diagnosis, fail_on: str) -> bool:
    """True when any symptom is at or above ``fail_on`` (warning | critical)."""
    floor = severity_rank(fail_on)
    return any(severity_rank(s.severity) >= floor for s in diagnosis.symptoms)


def to_json(snap: NodeSnapshot, diagnosis: Diagnosis, mode: str,
            now_source: str = "clock", stacks: StackReport | None = None,
            jobs: Sequence[JobView] = (), focus: str | None = None,
            stacks_job: str | None = None,
            thresholds: Thresholds | None = None) -> dict[str, Any]:
    """The diagnose document (docs/diagnose-json.md); ``stacks``: the hang report of the py-spy
    rounds read, when there are any; ``jobs``: the monitor's job views (worst first);
    ``thresholds``: the ones the diagnosis used (the timeline's stall limit)."""
    gpus = []
    for g in snap.gpus:
        item = to_data(g)
        item["mem_percent"] = g.mem_percent
        gpus.append(item)
    job_of = {m: v.job.id for v in jobs if v.job is not None for m in v.job.members}
    # a rank missing from its WORLD_SIZE has no pid: its job's own view lists it
    missing = [(d.rank, v.job.id) for v in jobs if v.job is not None
               for d in v.snapshot.departed if not d.pid]
    doc = {
        "schema": SCHEMA,
        "tool": f"rltui {__version__}",
        "mode": mode,
        "host": snap.host,
        "job": snap.job,
        "timestamp": snap.timestamp,
        "now_source": now_source,
        "verdict": diagnosis.verdict,
        "symptoms": [to_data(s) for s in diagnosis.symptoms],
        "incidents": [incident_json(i) for i in diagnosis.incidents],
        "gpus": gpus,
        "gpu_simulated": snap.gpu_simulated,
        "foreign_gpu_pids": list(snap.foreign_gpu_pids),
        "ranks": [dict(to_data(p), job=job_of.get((p.host, p.pid)))
                  for p in sorted(snap.procs, key=_rank_key)],
        "departed": [dict(departed_json(snap, d), job=_job_of_departed(d, job_of, missing))
                     for d in snap.departed],
        "sources": [to_data(s) for s in snap.sources],
        "logs": [_log_json(log) for log in snap.logs],
        "unmatched_logs": list(snap.unmatched_logs),
        "notes": list(diagnosis.notes),
    }
    doc["jobs"] = [job_json(v) for v in jobs if v.job is not None]
    if focus is not None:
        doc["focus"] = focus
    if stacks is not None:
        from rltui.diagnosis.stacks import report_json  # loaded once there are stacks
        doc["stacks"] = report_json(stacks)
        if stacks_job is not None:
            doc["stacks"]["job"] = stacks_job
    from rltui.diagnosis.flightrec import analysis_json
    doc["flight_recorder"] = analysis_json(stacks.flight_recorder if stacks else None)
    doc["timeline"] = timeline.of_snapshot(snap, stacks, thresholds, stacks_job)
    return doc


def job_json(view: JobView) -> dict[str, Any]:
    """One job of the ``jobs`` array: who it is, what it holds, its own verdict."""
    job = view.job
    assert job is not None
    return {
        "id": job.id,
        "name": job.name,
        "launcher": ({"pid": job.launcher_pid, "cmdline": list(job.launcher_cmdline),
                      "kind": job.launcher} if job.launcher_pid is not None else None),
        "pids": list(job.pids),
        "ranks": list(job.ranks),
        "world_size": job.world_size,
        "hosts": list(job.hosts),
        "tie": job.tie,
        "verdict": view.diagnosis.verdict,
        "symptoms": [s.id for s in view.diagnosis.symptoms],
        "live": len(view.snapshot.procs),
        "departed": len([d for d in view.snapshot.departed if d.rank is not None]),
    }


def jobs_text(jobs: Sequence[JobView]) -> str:
    """The jobs table (``rltui jobs``, and under the report when there are several)."""
    shown = [v for v in jobs if v.job is not None]
    lines = [f"Jobs: {len(shown)}"]
    for v in shown:
        job = v.job
        assert job is not None
        ranks = compact(job.ranks) if job.ranks else "-"
        world = "?" if job.world_size is None else str(job.world_size)
        launcher = (f"{job.launcher or 'launcher'} {job.launcher_pid}"
                    if job.launcher_pid is not None else "no launcher")
        live = sum(1 for p in v.snapshot.procs if p.rank is not None and not p.is_zombie)
        lines.append(f"  {job.id:28} {v.diagnosis.verdict.upper():8} ranks {ranks:10} of "
                     f"{world:>4}  {live:>4} live  {launcher:20} {job.tie}")
    return "\n".join(lines) + "\n"


def _job_of_departed(d, job_of: dict, missing: list) -> str | None:
    if d.pid:
        return job_of.get((d.info.host if d.info else "", d.pid))
    for i, (rank, job) in enumerate(missing):
        if rank == d.rank:
            del missing[i]  # two jobs may each miss the same rank: one entry each
            return job
    return None


def incident_json(i) -> dict[str, Any]:
    """One incident: its root cause (a symptom id), every symptom id it holds (the root cause
    first), the job, and what happened."""
    return {"root_cause": i.root_cause, "symptoms": list(i.symptoms), "job": i.job,
            "title": i.title, "explanation": i.explanation, "severity": i.severity,
            "ranks": list(i.ranks), "since": i.since}


def departed_json(snap: NodeSnapshot, d) -> dict[str, Any]:
    """A departed process with how and when it left, from the best witness at hand."""
    item = to_data(d)
    ex = exit_of(snap, d)
    item.update({"exit_code": ex.code, "signal": ex.signal or None, "left_at": ex.at,
                 "left_at_from": ex.at_from or None, "exit_code_from": ex.code_from or None,
                 "error": ex.error or None})
    return item


def _log_json(log) -> dict[str, Any]:
    return {
        "path": log.path,
        "found": log.found or None,
        "rank": log.rank,
        "pid": log.pid,
        "format": log.format,
        "status": log.status,
        "message": log.message,
        "lines_seen": log.lines_seen,
        "line_numbers_exact": log.line_base_known,
        "steps_seen": log.steps_seen,
        "last_step": log.last_step,
        "last_step_time": log.last_step_time,
        "total_steps": log.total_steps,
        "events": [{
            "kind": e.kind,
            "line": e.line_no,
            "end_line": e.end_line,
            "time": e.time,
            "summary": e.summary,
            "fields": {k: v for k, v in e.fields},
        } for e in log.events],
    }


def _rank_key(p) -> tuple:
    return (p.rank is None, p.rank if p.rank is not None else 0, p.pid)


def _num(v: float | None, fmt: str = "{:.0f}", unit: str = "") -> str:
    return "N/A" if v is None else fmt.format(v) + unit


def to_text(snap: NodeSnapshot, diagnosis: Diagnosis,
            stacks: StackReport | None = None, jobs: Sequence[JobView] = ()) -> str:
    """A plain report for a terminal or a ticket (with the stack classes when read, and the
    jobs when the node runs several)."""
    when = units.stamp(snap.timestamp)
    several = len([v for v in jobs if v.job is not None]) > 1
    lines = [f"rltui diagnose: {snap.host or '?'}  {snap.job}  at {when}",
             f"verdict: {diagnosis.verdict.upper()}", ""]
    if several:
        lines += jobs_text(jobs).splitlines() + [""]
    grouped = [i for i in diagnosis.incidents if len(i.symptoms) > 1]
    if grouped:
        lines.append("incidents (root cause first):")
        for i in grouped:
            job = f" (job {i.job})" if i.job and several else ""
            lines.append(f"  {i.severity.upper():8} {i.title}{job}")
            lines.append(f"      {i.root_cause} -> {', '.join(i.symptoms[1:])}")
        lines.append("")
    if diagnosis.symptoms:
        for s in diagnosis.symptoms:
            ranks = f" [ranks {compact(s.ranks)}]" if s.ranks else ""
            job = f" (job {s.job})" if s.job and several else ""
            lines.append(f"{s.severity.upper():8} {s.id}: {s.title}{ranks}{job}")
            lines.extend(f"    - {e}" for e in s.evidence)
            lines.append("    next steps:")
            lines.extend(f"      {i}. {step}" for i, step in enumerate(s.next_steps, 1))
            lines.append("")
    else:
        lines += ["No symptoms found.", ""]
    label = " (simulated)" if snap.gpu_simulated else ""
    lines.append(f"GPUs{label}: {len(snap.gpus)}")
    for g in snap.gpus:
        if g.error:
            lines.append(f"  {g.index:>3} {g.name}: {g.error}")
            continue
        lines.append(f"  {g.index:>3} {g.name[:24]:24} util {_num(g.util, unit='%'):>5}  "
                     f"mem {units.gib(g.mem_used, 1, 'G', 'N/A')}/"
                     f"{units.gib(g.mem_total, 1, 'G', 'N/A')}  "
                     f"{_num(g.temperature_c, unit='C')}  {_num(g.power_w, unit='W')}")
    lines.append(f"Job processes: {len(snap.procs)}")
    job_of = {pid: j.id for j in snap.jobs for pid in j.pids} if len(snap.jobs) > 1 else {}
    for p in sorted(snap.procs, key=lambda p: (job_of.get(p.pid, ""), _rank_key(p))):
        rank = "-" if p.rank is None else str(p.rank)
        gpu = "-" if p.gpu_index is None else str(p.gpu_index)
        host = f" {p.host}" if p.host else ""  # across nodes: pids repeat from node to node
        lines.append(f"  rank {rank:>4}{host} pid {p.pid:>7} gpu {gpu:>3} cpu "
                     f"{_num(p.cpu_percent, unit='%'):>5} {p.state:10} {p.role}"
                     + (f"  job {job_of[p.pid]}" if p.pid in job_of else "")
                     + ("  (partial)" if p.partial else ""))
    for d in snap.departed:
        rank = "-" if d.rank is None else str(d.rank)
        ex = exit_of(snap, d)
        left = (f", left {units.clock(ex.at)} ({ex.at_from})"
                if ex.at is not None else "")
        lines.append(f"  rank {rank:>4} pid {d.pid or '-':>7} {d.reason}"
                     + (f", {ex.how}" if ex.how else "") + left)
    if snap.logs:
        lines.append(f"Logs: {len(snap.logs)}")
        for log in snap.logs:
            rank = "-" if log.rank is None else str(log.rank)
            step = "-" if log.last_step is None else str(log.last_step)
            lines.append(f"  rank {rank:>4} {log.format:10} steps {log.steps_seen:>6} last "
                         f"{step:>6} events {len(log.events):>3}  {log.path}"
                         + (f"  ({log.status}: {log.message})" if log.status != "ok" else "")
                         + (f"  (found {log.found})" if log.found else ""))
    if diagnosis.notes:
        lines.append("")
        lines.extend(f"note: {n}" for n in diagnosis.notes)
    text = "\n".join(lines) + "\n"
    return text + stacks_text(stacks) if stacks is not None else text


def stacks_text(stacks: StackReport) -> str:
    """The stack classes under the plain report."""
    from rltui.diagnosis.stacks import where, who
    lines = ["", f"stacks: {stacks.title}"
             + (f" (pattern {stacks.pattern})" if stacks.pattern else ""),
             f"  {stacks.explanation}"]
    for i, c in enumerate(stacks.classes, 1):
        state = "" if c.state == "unknown" else f" [{c.state}]"
        lines.append(f"  #{i} {who(c.members)}: "
                     f"{'in ' + c.op.name if c.op else 'at ' + where(c.deepest)}{state}")
    fa = stacks.flight_recorder
    if fa is not None:
        from rltui.diagnosis.flightrec import groups_text
        lines += ["", "flight recorder:"] + [f"  {t}" for t in groups_text(fa)]
    return "\n".join(lines) + "\n"
