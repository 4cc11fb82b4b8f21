"""A headless run across nodes: a feed and the ClusterMonitor it fills, for ``rltui diagnose``
with the host flags (rltui.cli.hosts). The feed's threads only queue; the monitor is touched by
the thread that runs this alone.

The run lasts its duration, then waits at most ``settle_s`` more for hosts that have not yet
sent a first reading of each of their sources, so a short run still sees every node that
answers; then (unless told not to) it asks every node for a stack dump and waits for them.
"""

from __future__ import annotations

import queue
import time
from concurrent.futures import wait

from rltui.cluster import ClusterMonitor
from rltui.remote.feed import Feed
from rltui.remote.status import CLOSED, CONNECTING, LOST

OBSERVE_EVERY_S = 1.0  # merged snapshots for the rules' history (the idle-vs-busy window)


class HeadlessRun:
    """A feed and the monitor it fills; ``run(duration)`` then ``evaluate()``. The feed's
    threads only queue: the monitor is touched by this thread alone."""

    def __init__(self, feed: Feed, monitor: ClusterMonitor, *, settle_s: float,
                 dump_timeout: float | None = None) -> None:
        self.feed = feed
        self.monitor = monitor
        self.settle_s = settle_s
        self.dump_timeout = dump_timeout  # None: no dump request at the end
        self.events: queue.Queue = queue.Queue()
        self.notes: list[str] = []
        for host in feed.hosts():
            monitor.add_host(host)

    def _settled(self) -> bool:
        return self.feed.settled()

    def _drain(self) -> None:
        while True:
            try:
                host, reading = self.events.get_nowait()
            except queue.Empty:
                return
            self.monitor.ingest(host, reading)

    def run(self, duration: float) -> None:
        self.feed.start(lambda host, reading: self.events.put((host, reading)))
        start = time.monotonic()
        end, latest = start + duration, start + duration + self.settle_s
        observed = start
        while True:
            now = time.monotonic()
            if now >= end and (now >= latest or self._settled()):
                break
            wait = (end if now < end else min(latest, now + OBSERVE_EVERY_S)) - now
            try:
                host, reading = self.events.get(timeout=max(0.0, min(wait, OBSERVE_EVERY_S)))
            except queue.Empty:
                continue
            self.monitor.ingest(host, reading)
            if time.monotonic() - observed >= OBSERVE_EVERY_S:
                observed = time.monotonic()
                self.monitor.follow(self.feed)
                self.monitor.observe(time.time())
        if self.dump_timeout is not None:
            self._dump_at_end(self.dump_timeout)
        self._drain()
        self.monitor.follow(self.feed)  # the states now, before closing makes them "closed"
        self._unanswered()

    def _unanswered(self) -> None:
        """A node still connecting when the run ends never answered: for this run it is lost
        (the app would keep waiting; a headless run has to say so)."""
        for status in self.feed.statuses():
            host = status.host
            if status.state == CONNECTING and self.monitor.status(host).last_seen is None:
                self.monitor.set_status(host, LOST, None, status.reason or (
                    "no answer before the run ended (still connecting: a slow jump host "
                    "needs a longer --connect-timeout)"))

    def _dump_at_end(self, timeout: float) -> None:
        """One blocking round on every node at once: the stacks of the diagnosis are then a
        fresh, consistent cut, not the last periodic round (up to pyspy.interval old)."""
        asked = self.feed.dump_all(timeout)
        wait(list(asked.values()), timeout=timeout + 5.0)
        lost = {s.host for s in self.feed.statuses() if s.state in (LOST, CLOSED)}
        for host, future in asked.items():
            ok, message = future.result() if future.done() else (False, "no answer in time")
            if not ok and host not in lost:  # a lost node is a host-lost symptom already
                self.notes.append(f"{host}: the stack dump at the end of the run: {message}")

    def close(self) -> None:
        self.feed.close()
