"""Every reporting host's latest py-spy rounds -> merged stack samples with global ranks. Pure.

Each host samples on its own schedule, so rounds are aligned from the newest: the last merged
sample holds every host's latest round, the one before it every host's previous round (the
rounds that count as samples, ``hangs.samples``), and so on; a host with fewer rounds takes part
in the later samples only. The existing classification then reads one merged tree across nodes:
a rank waiting on node B for a rank that exited on node A comes out as pattern A, not as two
half-pictures.

Per host, as the single-node rule does: a process that exited after its last dump is left out
(it is missing now, not waiting where it was). That filter runs here, per host, because pids
repeat across nodes (the single-node rule keys it by pid alone). A process that lost its rank to
a duplicate claim is left out too, and so is every lost host: what its ranks did when it was last
heard from is not what they do now.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rltui.cluster.view import NodeView
from rltui.diagnosis.hangs import departed_pids, samples, still_here
from rltui.model import ProcessDump, StackPoll, replace
from rltui.rankset import label


def _host_samples(node: NodeView, table: Mapping[int, int | None],
                  dropped: frozenset[tuple[str, int]], gap: float) -> list[StackPoll]:
    snap = node.snapshot
    assert snap is not None
    gone = departed_pids(snap.departed)
    out = []
    for poll in samples(snap.stacks, gap):
        dumps: list[ProcessDump] = []
        for d in still_here(poll, gone):
            if (node.host, d.pid) in dropped:
                continue
            rank = table.get(d.pid)
            if rank is None:
                rank = d.rank  # a dump's own rank is RANK from the environment: global
            dumps.append(d if rank == d.rank else replace(d, rank=rank))
        out.append(replace(poll, dumps=tuple(dumps)))
    return out


def _join(polls: Sequence[StackPoll]) -> StackPoll:
    if len(polls) == 1:
        return polls[0]
    return StackPoll(
        dumps=tuple(d for p in polls for d in p.dumps),
        started=min(p.started for p in polls), finished=max(p.finished for p in polls),
        trigger="on-demand" if any(p.trigger == "on-demand" for p in polls) else polls[0].trigger,
        nonblocking=all(p.nonblocking for p in polls), native=any(p.native for p in polls),
        command=polls[0].command)


def merged_samples(nodes: Sequence[NodeView], pid_ranks: Mapping[str, Mapping[int, int | None]],
                   dropped: frozenset[tuple[str, int]], gap: float
                   ) -> tuple[tuple[StackPoll, ...], tuple[str, ...]]:
    """(merged samples oldest first, notes on hosts whose ranks are not in them)."""
    per_host = []
    notes: list[str] = []
    undumped: list[str] = []  # said only when some other host has stacks
    for n in nodes:
        if n.snapshot is None:
            continue
        ranks = sorted({r for r in pid_ranks.get(n.host, {}).values() if r is not None})
        who = label(ranks) if ranks else "its processes"
        if not n.merged:
            if n.snapshot.stacks:
                notes.append(f"{n.host} is {n.status.state}: {who} left out of the stack "
                             "comparison (unknown, not exited)")
            continue
        if not n.snapshot.stacks:
            if ranks:
                undumped.append(f"{n.host}: no stack dump yet: {who} not in the comparison")
            continue
        per_host.append(_host_samples(n, pid_ranks.get(n.host, {}), dropped, gap))
    if not per_host:
        return (), tuple(notes)
    notes += undumped
    depth = max(len(h) for h in per_host)
    merged = []
    for i in range(depth):
        polls = [h[i - (depth - len(h))] for h in per_host if i >= depth - len(h)]
        merged.append(_join(polls))
    return tuple(merged), tuple(notes)
