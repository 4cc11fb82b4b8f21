"""A feed with fixed contents, for snapshot tests of the app across nodes: every node's readings
and stream states are decided up front, stamped on a fixed clock, so the screen is the same on
every run. The real feed (agent processes over pipes) is tested in tests/ui/test_ui_cluster.py;
this one stands in only where a picture must not depend on timing.
"""

from __future__ import annotations

from concurrent.futures import Future

from rltui.cluster.skew import to_local
from rltui.model import Reading
from rltui.remote.status import LIVE, LOST, StreamStatus
from rltui.sources.replay import load
from tests.fakes.replay_agent import globalise


def status(host: str, state: str, last_seen: float | None, *, skew: float | None = 0.0,
           reason: str = "") -> StreamStatus:
    return StreamStatus(host=host, state=state, since=last_seen or 0.0, last_seen=last_seen,
                        reason=reason, skew=skew, problems=(), attempts=1, retry_at=None,
                        hello=None, pid=None, stderr="")


class FixedFeed:
    kind = "ssh"

    def __init__(self, readings: dict[str, list[Reading]], statuses: list[StreamStatus],
                 job: str = "", intervals: dict[str, float] | None = None) -> None:
        self.readings, self._statuses, self.job = readings, statuses, job
        self._intervals = dict(intervals or {})
        self.error = ""
        self.dumps = 0

    def settled(self) -> bool:
        return True

    def intervals(self) -> dict[str, float]:
        return dict(self._intervals)

    def run_on(self, host: str) -> str:
        return f"ssh {host} --"

    def start(self, on_reading) -> None:
        for host, readings in self.readings.items():
            for reading in readings:
                on_reading(host, reading)

    def hosts(self) -> list[str]:
        return [s.host for s in self._statuses]

    def statuses(self) -> list[StreamStatus]:
        return list(self._statuses)

    def dump_all(self, timeout: float = 0.0) -> dict[str, Future]:
        self.dumps += 1
        out = {}
        for s in self._statuses:
            done: Future = Future()
            done.set_result((s.state == LIVE, "dumped" if s.state == LIVE else s.reason))
            out[s.host] = done
        return out

    def close(self) -> None:
        pass


def scenario_nodes(scenario: str, now: float, live: int = 2, lost: str = "",
                   ranks_per_node: int = 4) -> FixedFeed:
    """``live`` nodes replaying ``scenario`` (global ranks, node01 from rank 0) with the
    recording's end at ``now``, and one lost node named ``lost`` (with ssh's reason)."""
    sc = load(scenario)
    offset = now - sc.end
    world = ranks_per_node * live
    readings, statuses = {}, []
    for i in range(live):
        host = f"node{i + 1:02d}"
        readings[host] = [to_local(globalise(r, i * ranks_per_node, world), offset)
                          for r in sc.readings]
        statuses.append(status(host, LIVE, now - 0.4, skew=0.012 if i == 0 else -120.3))
    if lost:
        statuses.append(status(lost, LOST, None, skew=None, reason=(
            "ssh exited with status 255: ssh: connect to host node03 port 22: No route to "
            "host (the node is down or unreachable from here)")))
    return FixedFeed(readings, statuses, job=sc.job, intervals=sc.intervals())
