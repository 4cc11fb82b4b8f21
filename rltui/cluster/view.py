"""What the cluster core hands to views and reports: frozen values, no behaviour beyond lookups.

A ``ClusterSnapshot`` is to many nodes what a ``NodeSnapshot`` is to one: everything known at
``timestamp`` (this machine's clock), per host and merged. Panes read ``nodes`` (each host's own
snapshot and stream state, so the GPU table can group by node) and ``ranks`` (every job process
of every host, by global rank); the rules read ``merged``, one ``NodeSnapshot`` of the whole job
with global ranks and cluster-wide GPU indices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rltui.diagnosis.stacks import StackReport
from rltui.model import GpuSample, NodeSnapshot, ProcInfo, StackPoll

# Host states, as rltui.remote.status names them (repeated here so that this package does not
# depend on the process side; a StreamStatus can be handed over as it is).
CONNECTING = "connecting"
LIVE = "live"
SLOW = "slow"
LOST = "lost"
CLOSED = "closed"
REPORTING = (LIVE, SLOW)  # hosts whose data takes part in the merged view

# Rank states in ClusterRank.state.
RANK_LIVE = "live"
RANK_UNKNOWN = "unknown"  # its host is lost or closed: last seen alive, fate not known
# ... and DepartedRank's reasons: "exited", "zombie", "missing from WORLD_SIZE".

# Cluster-wide GPU index = host slot x GPU_STRIDE + the node's own index. Slots are handed out
# in the order hosts are added and never reused, so an index means the same GPU in every
# merged snapshot of the history (the idle-vs-busy window compares them across time).
GPU_STRIDE = 10_000


def seen_ago(now: float, t: float | None, digits: int = 0) -> str:
    """``"3 s ago"`` (or ``"never"``) for a host's last-seen time, in evidence and tables."""
    return "never" if t is None else f"{max(0.0, now - t):.{digits}f} s ago"


def local_gpu(index: int) -> int:
    """The node's own index of a GPU index of the merged view (the same on one node)."""
    return index % GPU_STRIDE


@dataclass(frozen=True, slots=True)
class HostStatus:
    """What the caller knows about a host's stream: the state (live, slow, lost, ...), when it
    was last heard from (this machine's clock) and, when lost, why."""

    host: str
    state: str = LIVE
    last_seen: float | None = None
    reason: str = ""

    @property
    def reporting(self) -> bool:
        return self.state in REPORTING

    @classmethod
    def of(cls, status: Any) -> HostStatus:
        """From anything with ``host``, ``state``, ``last_seen`` and ``reason`` (a
        ``rltui.remote.status.StreamStatus``)."""
        return cls(host=status.host, state=status.state, last_seen=status.last_seen,
                   reason=status.reason or "")


@dataclass(frozen=True, slots=True)
class ClusterRank:
    """One job process of one host, with its global rank.

    ``how`` says where the rank came from: ``RANK``, ``NODE_RANK x LOCAL_WORLD_SIZE +
    LOCAL_RANK`` (or ``GROUP_RANK``, or a node rank the caller gave), ``single node`` (WORLD_SIZE
    equals LOCAL_WORLD_SIZE), or why there is none. ``duplicate``: another host claims the same
    global rank; the merged view gives the rank to the first host only.
    """

    rank: int | None
    host: str
    pid: int
    state: str  # RANK_LIVE | RANK_UNKNOWN | a DepartedRank reason
    how: str = ""
    local_rank: int | None = None
    node_rank: int | None = None
    last_seen: float | None = None
    gpu_index: int | None = None  # the node's own GPU index
    info: ProcInfo | None = None
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class NodeView:
    """One host: its stream's state, its own snapshot (None before its first reading), the
    skew applied to its readings, and whether its data is in the merged view."""

    host: str
    status: HostStatus
    snapshot: NodeSnapshot | None = None
    skew: float | None = None  # this clock minus the host's (receive - agent time), seconds
    node_rank: int | None = None  # given by the caller, else the one its processes agree on
    slot: int = 0
    merged: bool = False

    @property
    def gpus(self) -> tuple[GpuSample, ...]:
        return self.snapshot.gpus if self.snapshot is not None else ()


@dataclass(frozen=True, slots=True)
class DuplicateRank:
    """A global rank claimed by processes on more than one host."""

    rank: int
    claims: tuple[tuple[str, int], ...]  # (host, pid), the host that keeps the rank first


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    timestamp: float
    job: str = ""
    nodes: tuple[NodeView, ...] = ()
    ranks: tuple[ClusterRank, ...] = ()  # by global rank (None last), then host, pid
    merged: NodeSnapshot | None = None
    # The merged stack samples (oldest first): each host's latest rounds, aligned from the
    # newest, ranks global; and their classification.
    stacks: tuple[StackPoll, ...] = ()
    stack_report: StackReport | None = None
    duplicates: tuple[DuplicateRank, ...] = ()
    notes: tuple[str, ...] = ()

    def node(self, host: str) -> NodeView | None:
        for n in self.nodes:
            if n.host == host:
                return n
        return None

    def gpus_by_node(self) -> tuple[tuple[str, tuple[GpuSample, ...]], ...]:
        """The GPU table grouped by node, hosts in the order they were added."""
        return tuple((n.host, n.gpus) for n in self.nodes)

    def gpu_of(self, index: int) -> tuple[str, int] | None:
        """(host, the node's own GPU index) of a cluster-wide GPU index of ``merged``."""
        slot, local = divmod(index, GPU_STRIDE)
        for n in self.nodes:
            if n.slot == slot:
                return n.host, local
        return None

    def ranks_on(self, host: str) -> tuple[ClusterRank, ...]:
        return tuple(r for r in self.ranks if r.host == host)

    @property
    def lost(self) -> tuple[NodeView, ...]:
        """Hosts that had data but do not report now (lost, closed, reconnecting): their data
        is not in the merged view and their ranks are unknown."""
        return tuple(n for n in self.nodes if n.snapshot is not None and not n.merged)
