"""The app across nodes: readings of every node from a feed, folded into a ClusterMonitor.

A mixin of ``RltuiApp`` (rltui/ui/app.py), kept apart so the single-node app reads as before.
The feed's threads never touch the monitor: they append to a queue and, when none is pending,
ask the event loop for one drain (``NodeReadings``), so 64 nodes reading every second wake the
loop a few times a second rather than once per reading, and the main thread folds a burst in
one pass. The UI timer then evaluates the merged job as it does one node.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import wait
from dataclasses import replace
from functools import partial

from textual.message import Message

from rltui.cluster.merge import log_poll_on_host
from rltui.cluster.monitor import ClusterMonitor
from rltui.logbook import LogBook
from rltui.model import LogPoll, Reading
from rltui.ui.messages import View

DUMP_WAIT_MARGIN_S = 5.0  # beyond the requests' own timeout: a future nobody resolves


class NodeReadings(Message):
    """Readings are queued; the main thread folds them (posted once per pending batch)."""


class NodesDumped(Message):
    """The ``d`` round across nodes ended: how many nodes were asked and which failed."""

    def __init__(self, asked: int, failed: list[tuple[str, str]]) -> None:
        super().__init__()
        self.asked, self.failed = asked, failed


class AcrossNodes:
    """State and handlers of the app when its bundle holds a feed (``bundle.feed``)."""

    def _init_across_nodes(self, feed, job: str, thresholds) -> None:
        self.feed = feed
        self.cluster: ClusterMonitor | None = None
        if feed is None:
            return
        self.cluster = ClusterMonitor(feed.hosts(), job=job, thresholds=thresholds)
        # Every node's log lines under host:path, the names the merged snapshot gives them.
        self.logbook = LogBook()
        self._queued: deque[tuple[str, Reading]] = deque()
        self._drain_posted = False
        self._queue_lock = threading.Lock()

    # -- feed threads ------------------------------------------------------------------------
    def _feed_reading(self, host: str, reading: Reading) -> None:
        with self._queue_lock:
            self._queued.append((host, reading))
            if self._drain_posted:
                return
            self._drain_posted = True
        self.post_message(NodeReadings())

    # -- main thread ---------------------------------------------------------------------------
    def on_node_readings(self, message: NodeReadings) -> None:
        with self._queue_lock:
            batch, self._queued = self._queued, deque()
            self._drain_posted = False
        # Folded even while paused (only the screen freezes): a node's log lines come once.
        for host, reading in batch:
            folded = self.cluster.ingest(host, reading)
            if isinstance(folded.payload, LogPoll):
                self.logbook.apply(log_poll_on_host(folded.payload, host), folded.timestamp)
            self.ingested += 1

    def _evaluate_cluster(self, now: float) -> View:
        assert self.cluster is not None and self.feed is not None
        self.cluster.follow(self.feed)
        self.intervals = self.feed.intervals()  # the header's staleness, per the nodes' cadence
        snap, diagnosis = self.cluster.evaluate(now)
        assert snap.merged is not None
        return replace(self._view(snap.merged, diagnosis), cluster=snap,
                       history=self.cluster.history, stacks=snap.stack_report)

    # -- d: every node dumps its ranks -------------------------------------------------------------
    def _dump_nodes(self, in_flight: set[str], worker_name: str, group: str) -> None:
        assert self.feed is not None
        if self.feed.error:
            self.notify(self.feed.error, title="No dump", severity="error", timeout=15)
            return
        hosts = self.feed.hosts()
        if not hosts:
            self.notify("No node is known yet.", severity="warning")
            return
        if worker_name in in_flight:
            self.notify("A dump is already running.", severity="information")
            return
        self.notify(f"Asking {len(hosts)} node(s) to dump every rank with py-spy...",
                    timeout=3)
        in_flight.add(worker_name)
        self.run_worker(partial(self._dump_nodes_in_thread, self.feed), name=worker_name,
                        group=group, description="py-spy dump on every node",
                        exit_on_error=False, start=True, exclusive=False, thread=True)

    def _dump_nodes_in_thread(self, feed) -> None:
        from rltui.remote.feed import DUMP_TIMEOUT_S
        asked = feed.dump_all(DUMP_TIMEOUT_S)
        wait(list(asked.values()), timeout=DUMP_TIMEOUT_S + DUMP_WAIT_MARGIN_S)
        failed = [(host, f.result()[1] if f.done() else "no answer in time")
                  for host, f in asked.items() if not (f.done() and f.result()[0])]
        self.post_message(NodesDumped(len(asked), failed))

    def on_nodes_dumped(self, message: NodesDumped) -> None:
        self._evaluate(self.clock())
        asked, failed = message.asked, message.failed
        if not failed:
            self.notify(f"Dumped: {asked} of {asked} node(s).", title="py-spy", timeout=5)
            return
        lines = "\n".join(f"{host}: {why}" for host, why in failed[:5])
        more = f"\n... and {len(failed) - 5} more" if len(failed) > 5 else ""
        self.notify(f"{asked - len(failed)} of {asked} node(s) dumped.\n{lines}{more}",
                    title="py-spy", severity="error" if len(failed) == asked else "warning",
                    timeout=15)

    def _node_commands(self, view: View) -> list[str]:
        """Each node's py-spy commands of its last round, the way rltui reached the node."""
        from rltui.remote.cluster_report import stack_commands
        assert view.cluster is not None and self.feed is not None
        return stack_commands(view.cluster, self.feed.run_on)
