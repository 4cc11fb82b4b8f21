"""Global ranks across nodes, from what each process's environment says. Pure.

A process's global rank is, in order:

1. ``RANK`` from its environment (``ProcInfo.rank``): torchrun, DeepSpeed, Ray Train and verl's
   workers all set it, and it is already global;
2. else ``node_rank x LOCAL_WORLD_SIZE + LOCAL_RANK``, the node rank being the process's own
   ``NODE_RANK`` (Lightning, accelerate, torch.distributed.launch) or ``GROUP_RANK`` (torchrun's
   name), else the one the caller gave for the host (only when it truly knows, e.g. one launch
   per node with ``--node_rank=$SLURM_NODEID``: torchrun's c10d rendezvous numbers nodes in
   arrival order, not host-list order);
3. else ``LOCAL_RANK`` when the process says the whole world is on its node (``WORLD_SIZE ==
   LOCAL_WORLD_SIZE``);
4. else none: the process is shown by host and pid, and the merged stack comparison leaves it
   out like any process without a rank.

``ProcInfo`` has no node-rank field yet: until the process source reads ``NODE_RANK`` and
``GROUP_RANK``, they are taken from ``ProcInfo.debug_env`` when present there, and from a
``node_rank`` attribute as soon as ``ProcInfo`` has one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rltui.cluster.view import DuplicateRank
from rltui.model import ProcInfo
from rltui.parsing.procinfo import parse_int

FROM_RANK = "RANK"
FROM_NODE_RANK = "NODE_RANK x LOCAL_WORLD_SIZE + LOCAL_RANK"
FROM_GROUP_RANK = "GROUP_RANK x LOCAL_WORLD_SIZE + LOCAL_RANK"
FROM_GIVEN = "given node rank x LOCAL_WORLD_SIZE + LOCAL_RANK"
FROM_SINGLE_NODE = "LOCAL_RANK (WORLD_SIZE == LOCAL_WORLD_SIZE: one node)"
NO_RANK = "no RANK or LOCAL_RANK"
NO_NODE_RANK = "LOCAL_RANK without RANK, NODE_RANK or GROUP_RANK"
NO_LOCAL_WORLD = "node rank without LOCAL_WORLD_SIZE"


def env_node_rank(p: ProcInfo) -> tuple[int | None, str]:
    """The node rank a process's environment gives, and the variable it came from."""
    if p.node_rank is not None:
        return p.node_rank, FROM_NODE_RANK
    # Recordings and agents from before ProcInfo had node_rank: a debug_env that carries it.
    env = dict(p.debug_env) if p.debug_env else {}
    for name, how in (("NODE_RANK", FROM_NODE_RANK), ("GROUP_RANK", FROM_GROUP_RANK)):
        value = parse_int(env.get(name))
        if value is not None:
            return value, how
    return None, ""


def global_rank(p: ProcInfo, given_node_rank: int | None = None) -> tuple[int | None, str]:
    """(global rank or None, how it was found or why not)."""
    if p.rank is not None:
        return p.rank, FROM_RANK
    if p.local_rank is None:
        return None, NO_RANK
    node, how = env_node_rank(p)
    if node is None and given_node_rank is not None:
        node, how = given_node_rank, FROM_GIVEN
    if node is None:
        if p.world_size is not None and p.world_size == p.local_world_size:
            return p.local_rank, FROM_SINGLE_NODE
        return None, NO_NODE_RANK
    if node == 0:
        return p.local_rank, how  # node 0 needs no local world size
    if p.local_world_size is None:
        return None, NO_LOCAL_WORLD
    return node * p.local_world_size + p.local_rank, how


def node_rank_of(procs: Iterable[ProcInfo], given: int | None = None) -> int | None:
    """The node rank a host's processes agree on (None when they say nothing or disagree);
    ``given`` wins."""
    if given is not None:
        return given
    found = {n for n in (env_node_rank(p)[0] for p in procs) if n is not None}
    return found.pop() if len(found) == 1 else None


def duplicates(claims: Mapping[int, list[tuple[str, int]]]) -> tuple[DuplicateRank, ...]:
    """The ranks more than one host claims, from rank -> [(host, pid), ...] in host order.
    Several processes of one host with one rank (Ray worker groups each numbering from 0) are
    the single-node case and not reported here."""
    out = []
    for rank in sorted(claims):
        found = claims[rank]
        if len({host for host, _ in found}) > 1:
            out.append(DuplicateRank(rank=rank, claims=tuple(found)))
    return tuple(out)
