"""Rank symptoms. ``rank-exited``: a rank of the job is gone while others remain."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rltui import units
from rltui.diagnosis import playbook
from rltui.diagnosis.evidence import Evidence, at_event, at_ranks
from rltui.diagnosis.exits import Exit, exit_of
from rltui.diagnosis.logs import ERROR_KINDS, events_of, last_error_event, ref
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import DepartedRank, NodeSnapshot, Symptom
from rltui.rankset import label as rank_label


def rank_exited(snap: NodeSnapshot, history: Sequence[NodeSnapshot],
                th: Thresholds) -> list[Symptom]:
    alive = snap.live_procs
    if not alive:
        # The whole job is gone (an ended job), or no process was looked at (logs read
        # offline): torchrun's own report of a failed child says a rank died, or the exits
        # of the job's ranks do (a crash: an error, a signal, a non-zero code).
        return _from_child_failed(snap) or _all_gone(snap, th)
    gone = [d for d in snap.departed
            if d.reason == "missing from WORLD_SIZE"
            or snap.timestamp - d.gone_since >= th.rank_exit_grace_s]
    if not gone:
        return []
    evidence = Evidence()
    found = [exit_of(snap, d) for d in gone]
    for d, ex in zip(gone, found):
        who = f"rank {d.rank}" if d.rank is not None else "a job process"
        how = f", {ex.how}" + (f" ({ex.code_from})" if ex.code_from else "") if ex.how else ""
        if d.reason == "missing from WORLD_SIZE":
            left = (f"; it left at {units.clock(ex.at)}, {units.ago(snap.timestamp - ex.at)} ago "
                    f"({ex.at_from})" if ex.at is not None else "")
            evidence.add(f"{who}: not running although WORLD_SIZE says it should be "
                         f"(single-node job){how}{left}", at_ranks([d.rank]))
        else:
            left = (f", left at {units.clock(ex.at)} ({ex.at_from})"
                    if ex.at is not None and ex.at_from != "last seen alive by rltui" else "")
            evidence.add(f"{who} (pid {d.pid}): {d.reason}{how}{left}, gone for "
                         f"{units.ago(snap.timestamp - _since(d, ex))}", at_ranks([d.rank]))
        info = d.info
        error = last_error_event(snap, d.rank, d.pid,
                                 (info.stdout_path, info.stderr_path) if info else ())
        if error:
            evidence.add(f"{who}'s last error: {ref(*error)}: {error[1].summary}",
                         at_event(*error))
        for log in snap.logs:
            if log.found and log.rank == d.rank and d.rank is not None:
                evidence.add(f"{who}'s log {log.path}: found {log.found}")
    for log, e in events_of(snap, ["child-failed"])[:4]:
        evidence.add(f"{ref(log, e)}: {e.summary}", at_event(log, e))
    alive_ranks = [p.rank for p in alive if p.rank is not None]
    evidence.add(f"still running: {rank_label(alive_ranks) if alive_ranks else '-'} "
                    f"(pids {', '.join(str(p.pid) for p in alive[:8])}"
                    f"{', ...' if len(alive) > 8 else ''})")
    gone_ranks = tuple(sorted(d.rank for d in gone if d.rank is not None))
    label = rank_label(gone_ranks) if gone_ranks else f"{len(gone)} job process(es)"
    return [Symptom(
        id="rank-exited",
        severity="critical",
        title=f"{label} {_what(found)} while {len(alive)} other process(es) remain",
        ranks=gone_ranks,
        **evidence.fields(),
        next_steps=(
            f"Read the end of {label}'s log for a traceback or an OOM: it is the root cause; "
            "the remaining ranks are most likely waiting for it in a collective.",
            playbook.dump_all_ranks(alive),
            playbook.CUDA_BLOCKING,
            playbook.SET_DEBUG_ENV,
        ),
        since=min(_since(d, ex) for d, ex in zip(gone, found)),
    )]


def _all_gone(snap: NodeSnapshot, th: Thresholds) -> list[Symptom]:
    """Every process of the job has exited and one of its ranks crashed: beside other jobs on
    the node, nothing else would say so (the job has no live process left to be stalled)."""
    gone = [d for d in snap.departed if d.reason != "missing from WORLD_SIZE" and d.pid
            and snap.timestamp - d.gone_since >= th.rank_exit_grace_s]
    found = [(d, exit_of(snap, d)) for d in gone]
    crashed = [(d, ex) for d, ex in found if ex.crashed]
    if not crashed:
        return []
    evidence = Evidence()
    for d, ex in crashed[:8]:
        who = f"rank {d.rank}" if d.rank is not None else f"pid {d.pid}"
        evidence.add(f"{who} (pid {d.pid}): {ex.error or ex.how}"
                     + (f", left at {units.clock(ex.at)} ({ex.at_from})" if ex.at else ""),
                     at_ranks([d.rank]))
    ranks = tuple(sorted(d.rank for d, _ in crashed if d.rank is not None))
    label = rank_label(ranks) if ranks else f"{len(crashed)} job process(es)"
    evidence.add(f"no process of the job is left ({len(gone)} exited)")
    return [Symptom(
        id="rank-exited",
        severity="critical",
        title=f"{label} {_what([ex for _, ex in crashed])}; every process of the job exited",
        ranks=ranks,
        **evidence.fields(),
        next_steps=(
            f"Read the end of {label}'s log: the first error in time is the root cause; the "
            "other ranks most likely failed or were stopped because of it.",
            playbook.CUDA_BLOCKING,
        ),
        since=min(_since(d, ex) for d, ex in crashed),
    )]


def _since(d: DepartedRank, ex: Exit) -> float:
    """When it left: its own evidence when rltui never saw it alive (a rank gone before rltui
    started), else when rltui first saw it gone."""
    if d.reason == "missing from WORLD_SIZE" and ex.at is not None:
        return min(ex.at, d.gone_since)
    return d.gone_since


def _what(found: list[Exit]) -> str:
    """``crashed (RuntimeError: boom at train.py:12)``, ``was killed (SIGKILL)``, or
    ``exited``: what the evidence says happened, never an exception that is not there."""
    errors = [ex for ex in found if ex.error]
    if errors:
        first = errors[0]
        more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
        return f"crashed ({_short(first.error)}{more})"
    killed = [ex for ex in found if ex.signal]
    if killed:
        return f"was killed ({killed[0].signal})"
    failed = [ex for ex in found if ex.code not in (None, 0)]
    if failed:
        return f"failed (exit code {failed[0].code})"
    return "exited"


def _short(error: str) -> str:
    """The exception type and where, without its message: ``RuntimeError at trainer.py:130 in
    step`` (the message is in the evidence)."""
    kind = error.split(":", 1)[0].strip()
    if not kind or " " in kind:
        return error[:80]
    where = _WHERE.search(error)
    return f"{kind} at {where.group(1)}" if where else kind


_WHERE = re.compile(r" at (\S+:\d+(?: in \S+)?)(?: \(.*\))?$")


def _from_child_failed(snap: NodeSnapshot) -> list[Symptom]:
    found = events_of(snap, ["child-failed"])
    if not found:
        return []
    ranks = tuple(sorted({r for _, e in found if isinstance(r := e.field("rank"), int)}))
    evidence = Evidence()
    for log, e in found[:8]:
        evidence.add(f"{ref(log, e)}: {e.summary}", at_event(log, e))
    for r in ranks:
        # The rank's own exception, not torchrun's report of it (which is the effect).
        error = last_error_event(snap, r, None,
                                 kinds=[k for k in ERROR_KINDS if k != "child-failed"])
        if error:
            evidence.add(f"rank {r}'s last error: {ref(*error)}: {error[1].summary}",
                         at_event(*error))
    label = rank_label(ranks) if ranks else "a rank"
    return [Symptom(
        id="rank-exited",
        severity="critical",
        title=f"torchrun reports {label} failed",
        ranks=ranks,
        **evidence.fields(),
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
