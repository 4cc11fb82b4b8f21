"""What ``rltui diagnose --hosts`` adds to the diagnose document and text: the ``nodes`` array,
a host column for the ranks, and hosts that never answered as a ``host-lost`` symptom. Pure:
it reads a ``ClusterSnapshot`` and a ``Diagnosis``; rltui.remote.cluster_run gathers them.

The cluster core reports a host lost only once it had data (in the app, a host still
connecting at start is not yet a problem). At the end of a headless run a host that never
answered is one: its ranks are not in the diagnosis at all, so it is said with the same id.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rltui.cluster.view import CLOSED, LOST, RANK_LIVE, ClusterSnapshot, NodeView
from rltui.diagnosis import verdict_of
from rltui.model import Diagnosis, Symptom, severity_rank
from rltui.rankset import compact
from rltui.redact import scrub_text

HOST_LOST = "host-lost"  # rltui.cluster.diagnose.HOST_LOST


def unreached(snap: ClusterSnapshot) -> list[NodeView]:
    """Hosts with no data at the end of the run (lost, or still connecting)."""
    return [n for n in snap.nodes if n.snapshot is None and n.status.state != CLOSED]


def with_unreached(snap: ClusterSnapshot, diagnosis: Diagnosis) -> Diagnosis:
    """The diagnosis plus one ``host-lost`` warning for the hosts that never answered."""
    silent = unreached(snap)
    if not silent:
        return diagnosis
    evidence = [f"{n.host}: {n.status.state}"
                + (f": {scrub_text(n.status.reason)}" if n.status.reason
                   else ": no answer before the run ended") for n in silent[:8]]
    if len(silent) > 8:
        evidence.append(f"... and {len(silent) - 8} more hosts")
    names = ", ".join(n.host for n in silent[:4]) + (", ..." if len(silent) > 4 else "")
    title = (f"{names} could not be reached: its ranks are not in this diagnosis"
             if len(silent) == 1 else
             f"{len(silent)} hosts could not be reached ({names}): their ranks are not in "
             "this diagnosis")
    symptom = Symptom(
        id=HOST_LOST, severity="warning", title=title, evidence=tuple(evidence),
        next_steps=(
            "Read the reason: it says what ssh or srun reported and what to do about it.",
            "Check that `ssh HOST true` answers without a prompt (BatchMode), or that the "
            "job still runs there (squeue -j JOBID, sinfo -n HOST).",
            "Give a longer --connect-timeout for nodes behind a slow jump host.",
        ))
    found = sorted((*diagnosis.symptoms, symptom),
                   key=lambda s: (-severity_rank(s.severity), s.id, s.ranks))
    return replace(diagnosis, symptoms=tuple(found), verdict=verdict_of(found))


def nodes_json(snap: ClusterSnapshot) -> list[dict[str, Any]]:
    """One object per host, in the order the hosts were given."""
    out = []
    for n in snap.nodes:
        ranks = sorted({r.rank for r in snap.ranks_on(n.host)
                        if r.rank is not None and r.state == RANK_LIVE})
        unknown = sorted({r.rank for r in snap.ranks_on(n.host)
                          if r.rank is not None and r.state != RANK_LIVE})
        out.append({
            "host": n.host,
            "state": n.status.state,
            "last_seen": n.status.last_seen,
            "reason": scrub_text(n.status.reason),
            "skew_s": n.skew,
            "node_rank": n.node_rank,
            "ranks": ranks,
            "other_ranks": unknown,
            "merged": n.merged,
            "processes": len(n.snapshot.procs) if n.snapshot is not None else 0,
            "gpus": len(n.gpus),
        })
    return out


def _age(now: float, t: float | None) -> str:
    return "never" if t is None else f"{max(0.0, now - t):.1f} s ago"


def nodes_text(snap: ClusterSnapshot) -> str:
    """The nodes table under the plain report."""
    lines = ["", f"Nodes: {len(snap.nodes)}"]
    for n in snap.nodes:
        ranks = [r.rank for r in snap.ranks_on(n.host) if r.rank is not None]
        skew = "-" if n.skew is None else f"{n.skew:+.2f}s"
        node_rank = "-" if n.node_rank is None else str(n.node_rank)
        lines.append(f"  {n.host:20} {n.status.state:10} last seen "
                     f"{_age(snap.timestamp, n.status.last_seen):>12}  skew {skew:>8}  "
                     f"node rank {node_rank:>3}  ranks {compact(ranks) if ranks else '-'}")
        if n.status.state == LOST or (n.status.reason and n.snapshot is None):
            lines.append(f"      {scrub_text(n.status.reason) or 'no answer'}")
    return "\n".join(lines) + "\n"
