"""Many nodes as one job: per-host folds, global ranks, one merged snapshot, stack tree and
diagnosis. Pure (no I/O, no clock, no Textual); fed from agent streams by the caller.
docs/cluster.md describes it."""

from rltui.cluster.monitor import ClusterMonitor
from rltui.cluster.ranks import global_rank
from rltui.cluster.skew import to_local
from rltui.cluster.view import ClusterRank, ClusterSnapshot, DuplicateRank, HostStatus, NodeView

__all__ = ["ClusterMonitor", "ClusterRank", "ClusterSnapshot", "DuplicateRank", "HostStatus",
           "NodeView", "global_rank", "to_local"]
