"""What ``rltui diagnose --hosts`` adds to the diagnose document and text: the ``nodes`` array
and the nodes table. Pure: it reads a ``ClusterSnapshot``; rltui.cli.hosts and rltui.remote.headless gather it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rltui.cluster.view import LOST, RANK_LIVE, ClusterSnapshot, seen_ago
from rltui.rankset import compact
from rltui.redact import scrub_text


def stack_commands(snap: ClusterSnapshot, run_on: Callable[[str], str]) -> list[str]:
    """Each node's py-spy commands of its latest round, prefixed by how to run a command on
    that node (``run_on(host)``: the ssh or srun command line rltui used, "" for commands that
    run here, as Ray's curl does), for the report."""
    from rltui.incident import stack_commands as node_commands
    return [c for n in snap.nodes if n.snapshot is not None
            for c in node_commands(n.snapshot, prefix=run_on(n.host))]


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


def nodes_text(snap: ClusterSnapshot) -> str:
    """The nodes table under the plain report."""
    lines = ["", f"Nodes: {len(snap.nodes)}"]
    for n in snap.nodes:
        ranks = [r.rank for r in snap.ranks_on(n.host) if r.rank is not None]
        skew = "-" if n.skew is None else f"{n.skew:+.2f}s"
        node_rank = "-" if n.node_rank is None else str(n.node_rank)
        lines.append(f"  {n.host:20} {n.status.state:10} last seen "
                     f"{seen_ago(snap.timestamp, n.status.last_seen, 1):>12}  skew {skew:>8}  "
                     f"node rank {node_rank:>3}  ranks {compact(ranks) if ranks else '-'}")
        if n.status.state == LOST or (n.status.reason and n.snapshot is None):
            lines.append(f"      {scrub_text(n.status.reason) or 'no answer'}")
    return "\n".join(lines) + "\n"
