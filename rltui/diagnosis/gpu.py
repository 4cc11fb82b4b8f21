"""GPU symptoms. ``gpu-idle-vs-busy``: some of the job's GPUs idle while others are busy."""

from __future__ import annotations

from collections.abc import Sequence

from rltui.diagnosis import playbook
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import GpuSample, NodeSnapshot, Symptom
from rltui.rankset import compact


def job_gpus(snap: NodeSnapshot) -> tuple[GpuSample, ...]:
    """The GPUs the job uses: those its processes map to, else those with any process, else
    all (a node given over to one job)."""
    usable = tuple(g for g in snap.gpus if not g.error)
    indices = {p.gpu_index for p in snap.live_procs if p.gpu_index is not None}
    if indices:
        return tuple(g for g in usable if g.index in indices)
    with_procs = tuple(g for g in usable if g.processes)
    return with_procs or usable


def ranks_on(snap: NodeSnapshot, gpu_index: int) -> list[int]:
    return sorted(p.rank for p in snap.live_procs if p.gpu_index == gpu_index and p.rank is not None)


def _split(snap: NodeSnapshot, th: Thresholds, job: set[int]) -> tuple[set[int], set[int]]:
    """Idle and busy GPUs among ``job`` (indices); GPUs without a utilisation reading count
    as neither."""
    idle, busy = set(), set()
    for g in snap.gpus:
        if g.index not in job or g.util is None or g.error:
            continue
        if g.util <= th.gpu_idle_pct:
            idle.add(g.index)
        elif g.util >= th.gpu_busy_pct:
            busy.add(g.index)
    return idle, busy


def idle_vs_busy(snap: NodeSnapshot, history: Sequence[NodeSnapshot],
                 th: Thresholds) -> list[Symptom]:
    # The job's GPUs as of now; the window is judged on those same GPUs.
    job = {g.index for g in job_gpus(snap)}
    idle, busy = _split(snap, th, job)
    if not idle or not busy:
        return []
    # Sustained: the same GPUs stayed idle (and others busy) in every snapshot of the window,
    # and the history reaches back at least the whole window.
    start = snap.timestamp - th.gpu_idle_sustain_s
    window = [s for s in history if s.timestamp >= start and s.timestamp < snap.timestamp]
    older = [s for s in history if s.timestamp < start]
    if th.gpu_idle_sustain_s > 0 and not older:
        return []
    since = snap.timestamp
    # The newest snapshot at or before the window's start stands for the state when the window
    # began: without it a gap in the history would let a fresh split pass as sustained.
    checked = window + older[-1:] if th.gpu_idle_sustain_s > 0 else window
    for s in sorted(checked, key=lambda s: s.timestamp, reverse=True):
        i, b = _split(s, th, job)
        idle &= i
        busy &= b
        if not idle or not busy:
            return []
        since = s.timestamp
    by_index = {g.index: g for g in snap.gpus}
    evidence = []
    for index in sorted(idle | busy):
        g = by_index[index]
        ranks = ranks_on(snap, index)
        who = f" (rank {compact(ranks)})" if ranks else ""
        kind = "idle" if index in idle else "busy"
        evidence.append(f"GPU {index}{who}: {g.util:.0f}% utilisation, {kind}")
    evidence.append(f"Held for at least {snap.timestamp - since:.0f} s (idle <= "
                    f"{th.gpu_idle_pct:g}%, busy >= {th.gpu_busy_pct:g}%, sustain "
                    f"{th.gpu_idle_sustain_s:g} s).")
    if snap.gpu_simulated:
        evidence.append("GPUs are simulated (demo).")
    idle_ranks = sorted(r for i in idle for r in ranks_on(snap, i))
    return [Symptom(
        id="gpu-idle-vs-busy",
        severity="warning",
        title=(f"{len(idle)} of the job's GPUs idle while {len(busy)} busy"
               + (f": rank{'s' if len(idle_ranks) > 1 else ''} {compact(idle_ranks)} probably waiting" if idle_ranks else "")),
        ranks=tuple(idle_ranks),
        evidence=tuple(evidence),
        next_steps=(
            "Idle ranks usually wait in a collective for ranks that finished, crashed or took "
            "another code path; busy ranks are still computing or spinning.",
            playbook.dump_all_ranks(snap.live_procs),
            playbook.CHECK_LOG_ADVANCING,
            playbook.SET_DEBUG_ENV,
        ),
        since=since,
    )]
