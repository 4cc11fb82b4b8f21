"""Rank symptoms. ``rank-exited``: a rank of the job is gone while others remain."""

from __future__ import annotations

from typing import Sequence

from rltui.diagnosis import playbook
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import NodeSnapshot, Symptom
from rltui.rankset import compact


def rank_exited(snap: NodeSnapshot, history: Sequence[NodeSnapshot],
                th: Thresholds) -> list[Symptom]:
    alive = snap.live_procs
    if not alive:
        return []  # the whole job is gone: an ended job, not a rank that left the others waiting
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
    alive_ranks = [p.rank for p in alive if p.rank is not None]
    evidence.append(f"still running: ranks {compact(alive_ranks) or '-'} "
                    f"(pids {', '.join(str(p.pid) for p in alive[:8])}"
                    f"{', ...' if len(alive) > 8 else ''})")
    gone_ranks = tuple(sorted(d.rank for d in gone if d.rank is not None))
    label = f"rank {compact(gone_ranks)}" if gone_ranks else f"{len(gone)} job process(es)"
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
