"""Rank symptoms. ``rank-exited``: a rank of the job is gone while others remain."""

from __future__ import annotations

from typing import Sequence

from rltui.diagnosis import playbook
from rltui.diagnosis.logs import ERROR_KINDS, events_of, last_error, ref
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import NodeSnapshot, Symptom
from rltui.rankset import label as rank_label


def rank_exited(snap: NodeSnapshot, history: Sequence[NodeSnapshot],
                th: Thresholds) -> list[Symptom]:
    alive = snap.live_procs
    if not alive:
        # The whole job is gone (an ended job), or no process was looked at (logs read
        # offline): only torchrun's own report of a failed child says a rank died.
        return _from_child_failed(snap)
    gone = [d for d in snap.departed
            if d.reason == "missing from WORLD_SIZE"
            or snap.timestamp - d.gone_since >= th.rank_exit_grace_s]
    if not gone:
        return []
    evidence = []
    for d in gone:
        who = f"rank {d.rank}" if d.rank is not None else "a job process"
        if d.reason == "missing from WORLD_SIZE":
            evidence.append(f"{who}: not running although WORLD_SIZE says it should be "
                            "(single-node job)")
        else:
            evidence.append(f"{who} (pid {d.pid}): {d.reason}, gone for "
                            f"{snap.timestamp - d.gone_since:.0f} s")
        info = d.info
        error = last_error(snap, d.rank, d.pid,
                           (info.stdout_path, info.stderr_path) if info else ())
        if error:
            evidence.append(f"{who}'s last error: {error}")
    for log, e in events_of(snap, ["child-failed"])[:4]:
        evidence.append(f"{ref(log, e)}: {e.summary}")
    alive_ranks = [p.rank for p in alive if p.rank is not None]
    evidence.append(f"still running: {rank_label(alive_ranks) if alive_ranks else '-'} "
                    f"(pids {', '.join(str(p.pid) for p in alive[:8])}"
                    f"{', ...' if len(alive) > 8 else ''})")
    gone_ranks = tuple(sorted(d.rank for d in gone if d.rank is not None))
    label = rank_label(gone_ranks) if gone_ranks else f"{len(gone)} job process(es)"
    return [Symptom(
        id="rank-exited",
        severity="critical",
        title=f"{label} exited while {len(alive)} other process(es) remain",
        ranks=gone_ranks,
        evidence=tuple(evidence),
        next_steps=(
            f"Read the end of {label}'s log for a traceback or an OOM: it is the root cause; "
            "the remaining ranks are most likely waiting for it in a collective.",
            playbook.dump_all_ranks(alive),
            playbook.CUDA_BLOCKING,
            playbook.SET_DEBUG_ENV,
        ),
        since=min(d.gone_since for d in gone),
    )]


def _from_child_failed(snap: NodeSnapshot) -> list[Symptom]:
    found = events_of(snap, ["child-failed"])
    if not found:
        return []
    ranks = tuple(sorted({r for _, e in found if isinstance(r := e.field("rank"), int)}))
    evidence = [f"{ref(log, e)}: {e.summary}" for log, e in found[:8]]
    for r in ranks:
        # The rank's own exception, not torchrun's report of it (which is the effect).
        error = last_error(snap, r, None, kinds=[k for k in ERROR_KINDS if k != "child-failed"])
        if error:
            evidence.append(f"rank {r}'s last error: {error}")
    label = rank_label(ranks) if ranks else "a rank"
    return [Symptom(
        id="rank-exited",
        severity="critical",
        title=f"torchrun reports {label} failed",
        ranks=ranks,
        evidence=tuple(evidence),
        next_steps=(
            f"Read {label}'s own log for the traceback: the exit code in torchrun's report is "
            "the effect, the exception before it is the cause (-9/SIGKILL with no traceback: "
            "the host's OOM killer, see dmesg).",
            playbook.CUDA_BLOCKING,
        ),
        since=min((e.time or e.arrival for _, e in found), default=None),
    )]


def no_job_found(snap: NodeSnapshot, history: Sequence[NodeSnapshot],
                 th: Thresholds) -> list[Symptom]:
    """Nothing to watch is not healthy: the process source ran and found no job process, none
    ever left, and no saved stacks or logs stand in for a job."""
    procs = snap.source("procs")
    if procs is None or snap.procs or snap.departed:
        return []
    if any(history_snap.procs or history_snap.departed for history_snap in history):
        return []  # the job was seen; rank_exited says where it went
    if snap.stacks or any(log.lines_seen for log in snap.logs):
        return []
    return [nothing_found(snap.job or "Python processes with RANK or LOCAL_RANK in their "
                                      "environment")]


def nothing_found(searched: str) -> Symptom:
    """The no-job-found symptom, saying what was searched."""
    return Symptom(
        id="no-job-found",
        severity="warning",
        title="No training job found",
        evidence=(f"searched: {searched}",),
        next_steps=(
            "Choose the job: --pid PID (the launcher or a rank; its children are followed), "
            "or --match REGEX on the command line (e.g. 'main_ppo|torchrun').",
            "Choose one job of several: --job ID (`rltui jobs` lists them).",
            "Read what the job left instead: --log 'logs/*.log', --stacks DIR.",
        ),
    )
