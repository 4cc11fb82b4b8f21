"""The nodes pane (a view across nodes only): one row per node, how its stream stands.

A node that does not answer, answers slowly or dropped is the news, so those rows come first
(lost, then closed, connecting, slow, then live; each group in the order the nodes were
given).
``last seen`` is the age of the node's last line on this machine's clock; ``skew`` is how far
this machine's clock is ahead of the node's (readings are moved by it before any age is
computed, so a node with a wrong clock does not look stalled or fresh). ``reason`` says why a
node is lost, from ssh, srun or the agent, with the remedy.
"""

from __future__ import annotations

from rltui.cluster.view import CLOSED, CONNECTING, LIVE, LOST, SLOW, NodeView
from rltui.rankset import compact
from rltui.redact import scrub_text
from rltui.ui.messages import View
from rltui.ui.widgets.cells import NOT_YET, Cell, set_title
from rltui.ui.widgets.pane import Column, Row, TablePane
from rltui.units import age

_ORDER = {LOST: 0, CLOSED: 1, CONNECTING: 2, SLOW: 3, LIVE: 4}
SKEW_SHOWN_S = 0.05  # below this a skew is noise from the measurement itself


class NodesPane(TablePane):
    COLUMNS = (
        Column("node", "node", 14, 0),
        Column("state", "state", 10, 1),
        Column("seen", "last seen", 9, 2, right=True),
        Column("ranks", "ranks", 12, 3),
        Column("gpus", "GPUs", 9, 5, right=True),
        Column("skew", "skew", 8, 6, right=True),
        Column("node_rank", "node#", 5, 7, right=True),  # its node rank
        Column("reason", "reason", 60, 4),
    )

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Nodes"
        self._ranks: dict[str, str] = {}
        self._summary = "0 nodes"

    def rows(self, view: View) -> list[Row]:
        cluster = view.cluster
        if cluster is None:
            return []
        counts: dict[str, int] = {}
        for n in cluster.nodes:
            counts[n.status.state] = counts.get(n.status.state, 0) + 1
        parts = ", ".join(f"{counts[s]} {s}" for s in sorted(counts, key=_ORDER.get))
        set_title(self, f"Nodes ({len(cluster.nodes)}: {parts})" if parts else "Nodes")
        count = len(cluster.nodes)
        # folded (80x24): the news first, as the rows come (lost, closed, ..., live)
        self._summary = f"{count} node{'' if count == 1 else 's'}" + (f": {parts}" if parts
                                                                     else "")
        by_host: dict[str, list[int]] = {}
        for r in cluster.ranks:
            if r.rank is not None:
                by_host.setdefault(r.host, []).append(r.rank)
        self._ranks = {h: compact(rs) for h, rs in by_host.items()}
        nodes = sorted(cluster.nodes, key=lambda n: (_ORDER.get(n.status.state, 5), n.slot))
        return [(f"n{n.slot}", n) for n in nodes]

    def summary_text(self) -> str:
        """``4 nodes: 1 lost, 3 live``, as the title counts them."""
        return self._summary

    def cells(self, item: object) -> dict[str, Cell]:
        assert isinstance(item, NodeView)
        n, view = item, self.view
        pal, dim, now = view.palette, view.palette.dim, view.snapshot.timestamp
        st = n.status
        state_style = {LOST: f"bold {pal.bad}", CLOSED: pal.dim, CONNECTING: pal.dim,
                       SLOW: pal.warn, LIVE: pal.ok}.get(st.state, "")
        seen = (Cell(NOT_YET, dim) if st.last_seen is None
                else Cell(age(max(0.0, now - st.last_seen)),
                          pal.warn if st.state in (SLOW, LOST) else ""))
        gpus = n.gpus
        utils = [g.util for g in gpus if g.util is not None]
        gpu_text = (f"{len(gpus)}" + (f" {sum(utils) / len(utils):.0f}%" if utils else "")
                    if gpus else NOT_YET)
        skew = (Cell(NOT_YET, dim) if n.skew is None
                else Cell(f"{n.skew:+.1f}s" if abs(n.skew) >= SKEW_SHOWN_S else "0s",
                          pal.warn if abs(n.skew) >= 1.0 else dim))
        reason = scrub_text(st.reason) if st.reason else ""
        if not reason and n.snapshot is None and st.state == CONNECTING:
            reason = "waiting for the agent's first reading"
        return {
            "node": Cell(n.host, "bold"),
            "state": Cell(st.state, state_style),
            "seen": seen,
            "ranks": Cell(self._ranks.get(n.host, NOT_YET)),
            "gpus": Cell(gpu_text),
            "skew": skew,
            "node_rank": Cell(NOT_YET if n.node_rank is None else str(n.node_rank), dim),
            "reason": Cell(reason, pal.bad if st.state == LOST else dim),
        }
