"""The driver across nodes: every node's readings from a feed, folded into a ClusterMonitor.

The feed's threads never touch the monitor: they append to a queue and, when none is pending,
ask the event loop for one drain (a ``DriverCall``), so 64 nodes reading every second wake the
loop a few times a second rather than once per reading, and the main thread folds a burst in
one pass. The UI timer then evaluates the merged job as it does one node.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import wait
from functools import partial
from typing import TYPE_CHECKING

from rltui.cluster.merge import log_poll_on_host
from rltui.cluster.monitor import ClusterMonitor
from rltui.logbook import LogBook
from rltui.model import LogPoll, Reading, replace
from rltui.ui.drivers import Driver
from rltui.ui.messages import DriverCall, View

if TYPE_CHECKING:
    from rltui.remote.feed import Feed
    from rltui.ui.app import RltuiApp

DUMP_WAIT_MARGIN_S = 5.0  # beyond the requests' own timeout: a future nobody resolves
DUMP_WORKER = "stacks on every node"


class NodesDriver(Driver):
    mode = "live"
    actions = frozenset({"refresh", "dump_stacks"})  # the view is the job the nodes were given
    nodes_pane = True
    # the frames' files and the job's config files are on the nodes, not here
    reads_local_files = False
    oom_refusal = ("OOM triage reads the job's config files on this machine: run `rltui oom` "
                   "on the node that ran out of memory.")

    def __init__(self, app: RltuiApp, feed: Feed, job: str) -> None:
        super().__init__(app)
        self.feed = feed
        self.cluster = ClusterMonitor(feed.hosts(), job=job, thresholds=app.settings.thresholds)
        # Every node's log lines under host:path, the names the merged snapshot gives them.
        self._logbook = LogBook()
        self._queued: deque[tuple[str, Reading]] = deque()
        self._drain_posted = False
        self._queue_lock = threading.Lock()
        self._dumping = False

    @property
    def logbook(self) -> LogBook:
        return self._logbook

    def intervals(self) -> dict[str, float]:
        return self.feed.intervals()  # the header's staleness, per the nodes' cadence

    def start(self) -> None:
        self.feed.start(self.feed_reading)
        self.app.evaluate_now(self.app.clock())  # every node "connecting" until its first line

    # -- feed threads ---------------------------------------------------------------------------
    def feed_reading(self, host: str, reading: Reading) -> None:
        with self._queue_lock:
            self._queued.append((host, reading))
            if self._drain_posted:
                return
            self._drain_posted = True
        self.app.post_message(DriverCall(self._drain))

    # -- main thread ----------------------------------------------------------------------------
    def _drain(self) -> None:
        with self._queue_lock:
            batch, self._queued = self._queued, deque()
            self._drain_posted = False
        # Folded even while paused (only the screen freezes): a node's log lines come once.
        for host, reading in batch:
            folded = self.cluster.ingest(host, reading)
            if isinstance(folded.payload, LogPoll):
                self._logbook.apply(log_poll_on_host(folded.payload, host), folded.timestamp)
            self.app.ingested += 1

    def tick(self) -> None:
        if not self.paused:
            self.app.evaluate_now(self.app.clock())

    def evaluate(self, now: float) -> View:
        self.cluster.follow(self.feed)
        snap, diagnosis = self.cluster.evaluate(now)
        assert snap.merged is not None
        return replace(self.app.view_of(snap.merged, diagnosis), cluster=snap,
                       history=self.cluster.history, stacks=snap.stack_report, jobs=(),
                       focus=None, stacks_job=None)

    # -- d: every node dumps its ranks ------------------------------------------------------------
    def dump(self) -> None:
        app = self.app
        if self.feed.error:
            app.notify(self.feed.error, title="No dump", severity="error", timeout=15)
            return
        hosts = self.feed.hosts()
        if not hosts:
            app.notify("No node is known yet.", severity="warning")
            return
        if self._dumping:
            app.notify("A dump is already running.", severity="information")
            return
        app.notify(f"Asking {len(hosts)} node(s) to dump every rank with py-spy...", timeout=3)
        self._dumping = True
        app.run_worker(partial(self._dump_in_thread, self.feed), name=DUMP_WORKER,
                       group="nodes dump", description="py-spy dump on every node",
                       exit_on_error=False, start=True, exclusive=False, thread=True)

    def _dump_in_thread(self, feed: Feed) -> None:
        from rltui.remote.feed import DUMP_TIMEOUT_S
        asked = feed.dump_all(DUMP_TIMEOUT_S)
        wait(list(asked.values()), timeout=DUMP_TIMEOUT_S + DUMP_WAIT_MARGIN_S)
        failed = [(host, f.result()[1] if f.done() else "no answer in time")
                  for host, f in asked.items() if not (f.done() and f.result()[0])]
        self.app.post_message(DriverCall(partial(self._dumped, len(asked), failed)))

    def worker_ended(self, worker, failed: bool) -> None:
        if worker.name == DUMP_WORKER:
            self._dumping = False

    def _dumped(self, asked: int, failed: list[tuple[str, str]]) -> None:
        app = self.app
        app.evaluate_now(app.clock())
        if not failed:
            app.notify(f"Dumped: {asked} of {asked} node(s).", title="py-spy", timeout=5)
            return
        lines = "\n".join(f"{host}: {why}" for host, why in failed[:5])
        more = f"\n... and {len(failed) - 5} more" if len(failed) > 5 else ""
        app.notify(f"{asked - len(failed)} of {asked} node(s) dumped.\n{lines}{more}",
                   title="py-spy", severity="error" if len(failed) == asked else "warning",
                   timeout=15)

    # -- the incident report ------------------------------------------------------------------------
    def stack_commands(self, view: View) -> list[str]:
        """Each node's py-spy commands of its last round, the way rltui reached the node."""
        from rltui.remote.cluster_report import stack_commands
        assert view.cluster is not None
        return stack_commands(view.cluster, self.feed.run_on)
