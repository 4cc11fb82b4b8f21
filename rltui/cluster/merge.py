"""Many hosts' ``NodeSnapshot`` values -> the ranks table and one merged ``NodeSnapshot``. Pure.

The merged snapshot is the whole job seen as one node, so that the single-node rules read it
unchanged: ranks are global, GPU indices cluster-wide (``slot x GPU_STRIDE + index``: unique,
and stable across the history), log paths and the processes' stdout/stderr paths carry their
host (``node02:/logs/rank4.log``: two nodes' files of one name stay apart, and a rule that
matches a log to a process by path still can). Only reporting hosts (live or slow) take part: a
lost host's last snapshot says what its ranks were doing when it was last heard from, not now,
so its ranks are neither alive nor departed in the merged view but unknown.

A global rank claimed by two hosts is not merged: the first host (reporting hosts before silent
ones, each in the order hosts were added) keeps it; the other claimants lose their rank in the
merged view (counted as processes without a rank) and the duplicate is reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from rltui.cluster import ranks as rank_rules
from rltui.cluster.view import (
    GPU_STRIDE,
    RANK_LIVE,
    RANK_UNKNOWN,
    ClusterRank,
    DuplicateRank,
    NodeView,
)
from rltui.model import (
    OK,
    DepartedRank,
    FrDump,
    FrPoll,
    LogPoll,
    NodeSnapshot,
    ProcInfo,
    SourceState,
    replace,
)
from rltui.rankset import label
from rltui.remote.hostlist import compress

MAX_WORLD = 1 << 16  # a WORLD_SIZE above this is not believed (coverage note skipped)


@dataclass(frozen=True, slots=True)
class Merged:
    snapshot: NodeSnapshot
    ranks: tuple[ClusterRank, ...]
    duplicates: tuple[DuplicateRank, ...]
    # host -> pid -> the global rank that process has in the merged view (None: none, or lost
    # to a duplicate); every host with a snapshot, lost ones too.
    pid_ranks: Mapping[str, Mapping[int, int | None]]
    dropped: frozenset[tuple[str, int]]  # (host, pid) that lost their rank to a duplicate
    notes: tuple[str, ...]


def _on_host(host: str, path: str | None) -> str | None:
    return None if path is None else f"{host}:{path}"


@lru_cache(maxsize=16)
def _hostlist(hosts: tuple[str, ...]) -> str:
    # Evaluated every second with the same hosts: compress walks each name, once is enough.
    return compress(hosts)


def log_poll_on_host(poll: LogPoll, host: str) -> LogPoll:
    """A host's log reading with its paths as the merged view names them (``host:path``),
    for a log book of every host's lines."""
    return replace(poll, files=tuple(replace(u, path=f"{host}:{u.path}") for u in poll.files),
                   unmatched=tuple(f"{host}:{g}" for g in poll.unmatched))


def _merged_proc(p: ProcInfo, host: str, rank: int | None, slot: int) -> ProcInfo:
    changes: dict = {"rank": rank, "host": host,
                     "stdout_path": _on_host(host, p.stdout_path),
                     "stderr_path": _on_host(host, p.stderr_path)}
    if p.gpu_index is not None:
        changes["gpu_index"] = slot * GPU_STRIDE + p.gpu_index
    return replace(p, **changes)


def _sources(nodes: Sequence[NodeView]) -> tuple[SourceState, ...]:
    """One state per source kind across hosts: ok when every host's is ok, else the first
    failing host's status with each failing host's message. The oldest last reading stands
    for all (a source is as stale as its stalest host)."""
    by_kind: dict[str, list[tuple[str, SourceState]]] = {}
    for n in nodes:
        assert n.snapshot is not None
        for s in n.snapshot.sources:
            by_kind.setdefault(s.name, []).append((n.host, s))
    out = []
    for kind in sorted(by_kind):
        states = by_kind[kind]
        bad = [(h, s) for h, s in states if s.status != OK]
        lasts = [s.last_reading for _, s in states if s.last_reading is not None]
        oks = [s.last_ok for _, s in states]
        message = "; ".join(f"{h}: {s.message}" if s.message else h for h, s in bad[:4])
        if len(bad) > 4:
            message += f"; and {len(bad) - 4} more hosts"
        out.append(SourceState(
            name=kind, status=bad[0][1].status if bad else OK,
            last_reading=min(lasts) if lasts else None,
            last_ok=None if None in oks else min(oks),  # type: ignore[type-var]
            message=message, remedy=bad[0][1].remedy if bad else ""))
    return tuple(out)


def merge(nodes: Sequence[NodeView], now: float, *, job: str = "",
          given: Mapping[str, int] | None = None) -> Merged:
    """``nodes`` in host order; ``given``: node ranks the caller knows, by host."""
    given = given or {}
    pid_ranks: dict[str, dict[int, int | None]] = {}
    hows: dict[tuple[str, int], str] = {}
    claims: dict[int, list[tuple[str, int]]] = {}
    with_data = [n for n in nodes if n.snapshot is not None]
    for n in with_data:
        assert n.snapshot is not None
        table = pid_ranks[n.host] = {}
        known = list(n.snapshot.procs) + [d.info for d in n.snapshot.departed if d.info]
        for p in known:
            rank, how = rank_rules.global_rank(p, given.get(n.host))
            table[p.pid] = rank
            hows[(n.host, p.pid)] = how
    # Reporting hosts claim first: a rank a lost host last had and a live host has now is
    # kept by the live one (a replacement node, say), and still reported.
    for n in sorted(with_data, key=lambda n: not n.merged):
        assert n.snapshot is not None
        for p in n.snapshot.live_procs:
            rank = pid_ranks[n.host][p.pid]
            if rank is not None:
                claims.setdefault(rank, []).append((n.host, p.pid))
    dups = rank_rules.duplicates(claims)
    dropped = frozenset(c for d in dups for c in d.claims[1:])
    for host, pid in dropped:
        pid_ranks[host][pid] = None

    rows: list[ClusterRank] = []
    procs: list[ProcInfo] = []
    departed: list[DepartedRank] = []
    gpus, logs, foreign = [], [], []
    fr_dumps: list[FrDump] = []
    fr_problems: list[str] = []
    fr_said: list[bool] = []
    simulated = False
    merged_nodes = [n for n in with_data if n.merged]
    for n in with_data:
        snap = n.snapshot
        assert snap is not None
        table = pid_ranks[n.host]
        node_rank = n.node_rank
        procs_state = snap.source("procs")
        seen = procs_state.last_reading if procs_state is not None else None
        if not n.merged and n.status.last_seen is not None:
            seen = n.status.last_seen
        for p in snap.live_procs:
            rows.append(ClusterRank(
                rank=table[p.pid], host=n.host, pid=p.pid,
                state=RANK_LIVE if n.merged else RANK_UNKNOWN, how=hows[(n.host, p.pid)],
                local_rank=p.local_rank, node_rank=node_rank, last_seen=seen,
                gpu_index=p.gpu_index, info=p, duplicate=(n.host, p.pid) in dropped))
        for d in snap.departed:
            rank = table.get(d.pid, d.rank) if d.pid else d.rank
            rows.append(ClusterRank(
                rank=rank, host=n.host, pid=d.pid, state=d.reason,
                how=hows.get((n.host, d.pid), rank_rules.FROM_RANK), node_rank=node_rank,
                local_rank=d.info.local_rank if d.info else None, last_seen=d.last_seen,
                gpu_index=d.info.gpu_index if d.info else None, info=d.info))
        if not n.merged:
            continue
        procs.extend(_merged_proc(p, n.host, table[p.pid], n.slot) for p in snap.procs)
        for d in snap.departed:
            rank = table.get(d.pid, d.rank) if d.pid else d.rank
            info = _merged_proc(d.info, n.host, rank, n.slot) if d.info else None
            departed.append(replace(d, rank=rank, info=info))
        gpus.extend(replace(g, index=n.slot * GPU_STRIDE + g.index)
                    for g in snap.gpus if 0 <= g.index < GPU_STRIDE)
        for log in snap.logs:
            rank = log.rank if log.rank is not None else table.get(log.pid or -1)
            # With a rank the pid is not needed to match the log, and pids repeat across
            # nodes (containers start every job at a low pid).
            logs.append(replace(log, path=f"{n.host}:{log.path}", rank=rank, host=n.host,
                                pid=None if rank is not None else log.pid))
        foreign.extend(snap.foreign_gpu_pids)
        simulated |= snap.gpu_simulated
        fr = snap.flight_recorder
        if fr is not None:
            # the dump files are named by global rank; pids mean nothing off their host
            fr_dumps.extend(replace(d, host=n.host, source=f"{n.host}:{d.source}", pid=None)
                            for d in fr.dumps)
            fr_problems.extend(f"{n.host}: {p}" for p in fr.problems)
            if fr.enabled is not None:
                fr_said.append(fr.enabled)

    # A rank gone from one node and alive on another was restarted there (elastic).
    live = {p.rank for p in procs if p.rank is not None and not p.is_zombie}
    departed = [d for d in departed if d.rank is None or d.rank not in live]
    merged = NodeSnapshot(
        # The nodes in the view; with none reporting, the nodes asked (never an empty name).
        timestamp=now, host=_hostlist(tuple(n.host for n in merged_nodes or nodes)), job=job,
        gpus=tuple(gpus), gpu_simulated=simulated, foreign_gpu_pids=tuple(foreign),
        procs=tuple(procs), departed=tuple(departed), sources=_sources(merged_nodes),
        logs=tuple(logs),
        flight_recorder=FrPoll(dumps=tuple(fr_dumps), problems=tuple(fr_problems),
                               enabled=any(fr_said) if fr_said else None)
        if fr_dumps or fr_problems or fr_said else None)
    rows.sort(key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.host,
                             r.pid))
    return Merged(snapshot=merged, ranks=tuple(rows), duplicates=dups, pid_ranks=pid_ranks,
                  dropped=dropped, notes=tuple(_notes(rows) + _same_host_claims(claims)))


MAX_LISTED_PIDS = 4
MAX_CLAIM_NOTES = 8


def _same_host_claims(claims: Mapping[int, list[tuple[str, int]]]) -> list[str]:
    """A note per rank that several live processes of one host claim. Not a duplicate across
    nodes (Ray worker groups each number from 0 on one node), but worth a look: two jobs on
    the node, or an environment that lies."""
    notes = []
    for rank in sorted(claims):
        by_host: dict[str, list[int]] = {}
        for host, pid in claims[rank]:
            by_host.setdefault(host, []).append(pid)
        for host, pids in by_host.items():
            if len(pids) > 1:
                shown = ", ".join(map(str, sorted(pids)[:MAX_LISTED_PIDS]))
                more = f" and {len(pids) - MAX_LISTED_PIDS} more" if len(
                    pids) > MAX_LISTED_PIDS else ""
                notes.append(f"{host}: {len(pids)} processes claim rank {rank} (pids {shown}"
                             f"{more}): two jobs on one node, Ray worker groups, or a wrong "
                             "environment")
    if len(notes) > MAX_CLAIM_NOTES:  # a note a rank, up to a screenful
        notes[MAX_CLAIM_NOTES - 1:] = [f"... and {len(notes) - MAX_CLAIM_NOTES + 1} more ranks "
                                       "claimed by several processes of one host"]
    return notes


def _notes(rows: Sequence[ClusterRank]) -> list[str]:
    notes = []
    unranked: dict[str, dict[str, int]] = {}
    for r in rows:
        if r.rank is None and not r.duplicate and r.state == RANK_LIVE and r.how not in (
                rank_rules.NO_RANK,):
            unranked.setdefault(r.host, {}).setdefault(r.how, 0)
            unranked[r.host][r.how] += 1
    for host, whys in unranked.items():
        for why, count in whys.items():
            notes.append(f"{host}: {count} process(es) with {why}: global rank unknown "
                         "(shown by host and pid, left out of the stack comparison)")
    worlds = {r.info.world_size for r in rows if r.info is not None and r.rank is not None}
    if len(worlds) == 1:
        world = worlds.pop()
        if world is not None and 0 < world <= MAX_WORLD:
            seen = {r.rank for r in rows if r.rank is not None}
            absent = set(range(world)) - seen
            if absent:
                notes.append(f"{label(absent)} of WORLD_SIZE {world} are on no watched host "
                             "(a host missing from the list?)")
    return notes


def unknown_ranks(rows: Sequence[ClusterRank], host: str) -> tuple[int, ...]:
    """The global ranks a lost host last had alive."""
    return tuple(sorted({r.rank for r in rows if r.host == host and r.state == RANK_UNKNOWN
                         and r.rank is not None}))

