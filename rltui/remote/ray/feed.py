"""``RayFeed``: a Ray cluster's nodes, workers and stacks, read through its dashboard, with the
interface of rltui's feeds (``start``, ``hosts``, ``statuses``, ``dump_all``, ``close``,
``error``), so the cluster view takes a Ray job without any rltui process on its nodes.

Two threads: one polls the state API every ``interval`` seconds and sends each live node's
"procs" and "gpus" readings; one runs stack rounds every ``stack_interval`` seconds (0: only
on request) and on ``dump_all``, each worker's traceback asked of the dashboard through a
bounded pool, one "stacks" reading per node as soon as that node's workers are in. Readings
carry this machine's clock: the dashboard's own times are not used, so there is no skew.

A node is ``live`` while the state API lists it ALIVE, ``lost`` once Ray marks it DEAD (with
Ray's reason) or drops it, and every node is ``lost`` while the dashboard cannot be read (with
why, and when the next poll is); ``closed`` after ``close()``. Nodes exist only once a poll
succeeded: while the dashboard cannot be read from the start there are none, and ``error``
is the one place that says why (the app makes it a symptom, ``diagnose --ray`` prints it).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from rltui.model import ERROR, OK, TIMEOUT, ProcInfo, Reading
from rltui.redact import scrub_text
from rltui.remote.ray import stacks as ray_stacks
from rltui.remote.ray.address import NEEDS_DASHBOARD, parse_address
from rltui.remote.ray.client import BAD_JSON, DashboardClient, DashboardError
from rltui.remote.ray.client import TIMEOUT as HTTP_TIMEOUT
from rltui.remote.ray.state import (
    ALIVE,
    BadAnswer,
    NodeState,
    RayNode,
    assign_labels,
    gpu_reading,
    node_states,
    read_nodes,
)
from rltui.remote.status import CLOSED, LIVE, LOST, Problem, StreamStatus

OnReading = Callable[[str, Reading], None]
DUMP_CONCURRENCY = 16  # traceback requests in flight at once, all nodes together
PROBLEMS_KEPT = 20
JOIN_S = 2.0  # close() waits this long for each thread (a request in flight may not end)
# Why a node is not dumped, as dump_all says it: short, since the app prints "host: message";
# the whole reason is in the node's status and in ``error``.
DEAD_SHORT = "Ray marked the node dead"
DROPPED_SHORT = "Ray no longer lists the node"
UNREADABLE_SHORT = "the Ray dashboard cannot be read"
CLOSED_SHORT = "the Ray feed is closed"


@dataclass(slots=True)
class _Host:
    label: str
    node_id: str
    state: str = LIVE
    since: float = 0.0
    last_seen: float | None = None
    reason: str = ""
    short: str = ""  # the reason in a few words, for dump_all
    retry_at: float | None = None
    problems: deque = field(default_factory=lambda: deque(maxlen=PROBLEMS_KEPT))


@dataclass(slots=True)
class _Ask:
    """An on-demand round: its deadline (monotonic) and the futures to resolve, by host."""

    deadline: float
    futures: dict[str, Future]


class RayFeed:
    """``RayFeed("head:8265").start(on_reading)``: ``on_reading(host, reading)`` is called
    from the feed's two threads (polls, stack rounds); once ``close()`` is called no new call
    starts. ``address`` is parsed at once: ``AddressError`` for one that cannot be a
    dashboard."""

    kind = "ray"

    def __init__(self, address: str, *, interval: float = 2.0, stack_interval: float = 10.0,
                 timeout: float = 10.0, wall: Callable[[], float] = time.time) -> None:
        self.address = parse_address(address)  # AddressError (a ValueError) says what to give
        self.job = f"ray {self.address.label}"
        self.interval = interval
        self.stack_interval = stack_interval
        self.timeout = timeout
        self._wall = wall
        self._client = DashboardClient(self.address, timeout)
        self._lock = threading.Lock()
        self._hosts: dict[str, _Host] = {}  # by label, in the order nodes were first seen
        self._labels: dict[str, str] = {}  # node id -> label
        self._live: dict[str, NodeState] = {}  # by label: the latest view of each live node
        self._error: DashboardError | None = None
        self._polls = 0
        self._on_reading: OnReading | None = None
        self._stop = threading.Event()
        self._polled = threading.Event()
        self._asks: queue.Queue[_Ask | None] = queue.Queue()
        self._pool = ThreadPoolExecutor(max_workers=DUMP_CONCURRENCY,
                                        thread_name_prefix="rltui-ray-dump")
        self._threads: list[threading.Thread] = []
        self._closed = False

    # -- the feed interface

    def start(self, on_reading: OnReading) -> None:
        if self._threads:
            raise RuntimeError("RayFeed.start: already started")
        self._on_reading = on_reading
        for name, target in (("rltui-ray-poll", self._poll_loop),
                             ("rltui-ray-stacks", self._stack_loop)):
            thread = threading.Thread(target=target, name=name, daemon=True)
            self._threads.append(thread)
            thread.start()

    def hosts(self) -> list[str]:
        with self._lock:
            return list(self._hosts)

    def statuses(self) -> list[StreamStatus]:
        with self._lock:
            return [StreamStatus(host=h.label, state=h.state, since=h.since,
                                 last_seen=h.last_seen, reason=h.reason, skew=None,
                                 problems=tuple(h.problems), attempts=0, retry_at=h.retry_at,
                                 hello=None, pid=None, stderr="")
                    for h in self._hosts.values()]

    def intervals(self) -> dict[str, float]:
        """Each source's poll interval, s: how old a reading may grow before the header calls
        it stale. Stack rounds only on request (``stack_interval`` 0) have none."""
        out = {"procs": self.interval, "gpus": self.interval}
        if self.stack_interval > 0:
            out["stacks"] = self.stack_interval
        return out

    def run_on(self, host: str) -> str:
        """"" for every node: a round's command asks the dashboard, from this machine (which
        reaches it), not a command to run on the node over ssh."""
        return ""

    def settled(self) -> bool:
        """The first poll is done: every live node has sent its procs and gpus readings, or
        the dashboard's trouble is known (``error``)."""
        return self._polled.is_set()

    def wait_settled(self, timeout: float | None = None) -> bool:
        """``settled()``, waiting up to ``timeout`` seconds for it."""
        return self._polled.wait(timeout)

    @property
    def error(self) -> str:
        """Why the dashboard cannot be read now, with the remedy, in one message scrubbed of
        credentials; "" once a poll read it. Set by every failed poll, cleared by the next
        one that succeeds."""
        with self._lock:
            err = self._error
        return "" if err is None else _said(err)

    @property
    def polls(self) -> int:
        """Polls done so far, failed ones included."""
        with self._lock:
            return self._polls

    def dump_all(self, timeout: float = 30.0) -> dict[str, Future]:
        """A stack round of every worker on every live node now. Each future resolves to
        ``(ok, message)`` once that node's round went out through ``on_reading`` (or at once,
        for a node that is lost); every one resolves within about ``timeout`` seconds. The
        messages are short and do not name the node (the app prints ``host: message``)."""
        deadline = time.monotonic() + timeout
        out: dict[str, Future] = {}
        ask = _Ask(deadline, {})
        with self._lock:
            for host in self._hosts.values():
                done: Future = Future()
                out[host.label] = done
                if self._closed:
                    done.set_result((False, f"not dumped: {CLOSED_SHORT}"))
                elif not self._threads:  # no stack thread to run the round
                    done.set_result((False, "not dumped: the Ray feed is not started"))
                elif host.state != LIVE:
                    done.set_result((False, f"not dumped: {host.short or host.state}"))
                else:
                    ask.futures[host.label] = done
            if ask.futures:  # under the lock: close() drains whatever was put before it
                self._asks.put(ask)
        return out

    def close(self) -> None:
        try:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
                now = self._wall()
                for host in self._hosts.values():
                    host.state, host.since, host.retry_at = CLOSED, now, None
                    host.reason, host.short = "closed", CLOSED_SHORT
            self._stop.set()
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._drain_asks()  # before the sentinel: it must stay for the stack thread
            self._asks.put(None)
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join(JOIN_S)
        except Exception:  # noqa: BLE001 - closing must never raise (app shutdown)
            pass

    # -- polling

    def _poll_loop(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                self.poll_once()
            except Exception as exc:  # noqa: BLE001 - a bug here must not end the feed
                self._trouble(DashboardError(ERROR, f"rltui's Ray reader failed: "
                                                    f"{type(exc).__name__}: {exc}",
                                             "This is a bug in rltui."))
            self._polled.set()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - began)))

    def poll_once(self) -> None:
        """One poll: the node, actor and worker lists and the node summary; then the readings.
        Called by the poll thread; tests may call it directly."""
        try:
            self._poll()
        finally:
            with self._lock:
                self._polls += 1

    def _poll(self) -> None:
        label = self.address.label
        try:
            nodes_rows, n_note = self._client.state_list("nodes", detail=True)
            actors, a_note = self._client.state_list(
                "actors", detail=True, filters=[("state", "=", ALIVE)])
            workers, w_note = self._client.state_list(
                "workers", detail=True, filters=[("is_alive", "=", "True")])
        except DashboardError as exc:
            self._trouble(exc)
            return
        summary_error: DashboardError | None = None
        try:
            summary: list | None = self._client.node_summary()
        except DashboardError as exc:
            summary, summary_error = None, exc
        try:
            nodes = read_nodes(nodes_rows)
            try:
                states = node_states(nodes, actors, workers, summary)
            except BadAnswer as exc:  # the optional summary's numbers: read without it
                summary_error = DashboardError(BAD_JSON, f"{label} answered /nodes?view=summary "
                                                         f"with {exc}")
                states = node_states(nodes, actors, workers, None)
        except BadAnswer as exc:
            self._trouble(DashboardError(BAD_JSON, f"{label} answered the state API with {exc}",
                                         NEEDS_DASHBOARD))
            return
        note = "; ".join(filter(None, (n_note, a_note, w_note)))
        now = self._wall()
        out = self._update(nodes, states, now)
        for label, state in out:
            self._emit(label, Reading("procs", now, OK, state.procs, message=note))
            self._emit(label, gpu_reading(state, summary_error.message if summary_error
                                          else "", now))

    def _update(self, nodes: list[RayNode], states: dict[str, NodeState],
                now: float) -> list[tuple[str, NodeState]]:
        """Labels, states and the live view after a poll; the live nodes to send."""
        out = []
        with self._lock:
            if self._closed:
                return []
            self._error = None
            for node_id, label in assign_labels(self._labels, nodes).items():
                self._labels[node_id] = label
                self._hosts[label] = _Host(label, node_id, since=now)
            listed = {n.node_id: n for n in nodes}
            self._live.clear()
            for host in self._hosts.values():
                node = listed.get(host.node_id)
                state = states.get(host.node_id)
                if node is not None and node.alive and state is not None:
                    self._set(host, LIVE, now)
                    host.last_seen = now
                    self._live[host.label] = state
                    out.append((host.label, state))
                elif node is not None:
                    why = scrub_text(node.message) or "no reason given"
                    self._set(host, LOST, now, f"Ray marked the node dead: {why}", DEAD_SHORT)
                else:
                    self._set(host, LOST, now, "Ray's state API no longer lists the node (the "
                                               "cluster was restarted, or Ray dropped the dead "
                                               "node)", DROPPED_SHORT)
        return out

    def _set(self, host: _Host, state: str, now: float, reason: str = "", short: str = "",
             retry_at: float | None = None) -> None:
        if host.state != state:
            host.state, host.since = state, now
        host.reason, host.short, host.retry_at = reason, short, retry_at

    def _trouble(self, exc: DashboardError) -> None:
        """The dashboard cannot be read: every node is lost with why, until the next poll."""
        with self._lock:
            if self._closed:
                return
            self._error = exc
            self._live.clear()
            now = self._wall()
            reason = _said(exc)
            for host in self._hosts.values():
                self._set(host, LOST, now, reason, UNREADABLE_SHORT,
                          retry_at=now + self.interval)

    def _emit(self, label: str, reading: Reading) -> None:
        callback = self._on_reading
        if callback is None or self._stop.is_set():
            return
        try:
            callback(label, reading)
        except Exception as exc:  # noqa: BLE001 - a consumer's bug must not end the feed
            with self._lock:
                host = self._hosts.get(label)
                if host is not None:
                    host.problems.append(Problem(self._wall(), "callback",
                                                 f"{type(exc).__name__}: {exc}"))

    # -- stacks

    def _stack_loop(self) -> None:
        # The first round needs the first poll's targets; close() may come before it.
        while not self._polled.wait(0.2):
            if self._stop.is_set():
                return
        next_round = time.monotonic()
        while not self._stop.is_set():
            wait_s = (next_round - time.monotonic()) if self.stack_interval > 0 else None
            try:
                ask = self._asks.get(timeout=max(0.0, wait_s) if wait_s is not None else None)
            except queue.Empty:
                ask = None
                # A periodic round: each request may take the timeout, a few in turn.
                self._round("periodic", time.monotonic() + 3 * self.timeout, {})
                next_round = time.monotonic() + self.stack_interval
                continue
            if ask is None:  # close()
                break
            self._round("on-demand", ask.deadline, ask.futures)

    def _round(self, trigger: str, deadline: float, futures: dict[str, Future]) -> None:
        try:
            self._run_round(trigger, deadline, futures)
        except Exception as exc:  # noqa: BLE001 - a bug here must not end the feed
            for done in futures.values():
                if not done.done():
                    done.set_result((False, f"rltui's Ray reader failed: {exc}"))

    def _run_round(self, trigger: str, deadline: float, futures: dict[str, Future]) -> None:
        with self._lock:
            plan = dict(self._live)
            reasons = {h.label: h.short or h.state for h in self._hosts.values()}
        for label, done in futures.items():  # lost since dump_all was asked
            if label not in plan and not done.done():
                done.set_result((False, f"not dumped: {reasons.get(label) or 'not live'}"))
        started = self._wall()
        asked: dict[str, list[tuple[ProcInfo, Future]]] = {label: [] for label in plan}
        # Round-robin over nodes, so that one node with many workers does not hold the others
        # back in the pool's queue.
        queues = [(label, state.node, list(state.targets)) for label, state in plan.items()]
        try:
            while any(targets for _, _, targets in queues):
                for label, node, targets in queues:
                    if targets:
                        target = targets.pop(0)
                        asked[label].append((target, self._pool.submit(
                            self._dump_one, node, target, deadline)))
        except RuntimeError:  # the pool was shut down: closing
            for done in futures.values():
                if not done.done():
                    done.set_result((False, f"not dumped: {CLOSED_SHORT}"))
            return
        pending = dict(asked)
        while pending:
            for label in [lb for lb, items in pending.items() if all(f.done() for _, f in items)]:
                items = pending.pop(label)
                dumps = [_result(f, t, started) for t, f in items]
                node = plan[label].node
                command = ray_stacks.traceback_command(self.address.url, node.node_id, node.ip)
                reading = ray_stacks.round_reading(dumps, started=started,
                                                   finished=self._wall(), trigger=trigger,
                                                   command=command)
                self._emit(label, reading)
                done = futures.get(label)
                if done is not None and not done.done():
                    # closed meanwhile: the round was not delivered, so it did not happen
                    done.set_result((False, f"not dumped: {CLOSED_SHORT}")
                                    if self._stop.is_set() else ray_stacks.dumped(reading))
            rest = [f for items in pending.values() for _, f in items if not f.done()]
            if rest:
                wait(rest, return_when=FIRST_COMPLETED)

    def _dump_one(self, node: RayNode, target: ProcInfo, deadline: float):
        stamp = self._wall()
        began = time.monotonic()
        left = deadline - began
        if self._stop.is_set():
            return ray_stacks.failed_dump(target, ERROR, f"not dumped: {CLOSED_SHORT}",
                                          stamp=stamp)
        if left <= 0:
            return ray_stacks.failed_dump(target, TIMEOUT, "not asked: the round's time ran "
                                                           "out", stamp=stamp)
        try:
            status, text = self._client.traceback(node.node_id, node.ip, target.pid,
                                                  timeout=min(self.timeout, left))
        except DashboardError as exc:
            state = TIMEOUT if exc.kind == HTTP_TIMEOUT else ERROR
            return ray_stacks.failed_dump(target, state, exc.message, stamp=stamp,
                                          duration=time.monotonic() - began)
        return ray_stacks.dump_of(target, status, text, stamp=stamp,
                                  duration=time.monotonic() - began)

    def _drain_asks(self) -> None:
        while True:
            try:
                ask = self._asks.get_nowait()
            except queue.Empty:
                return
            if ask is not None:
                for done in ask.futures.values():
                    if not done.done():
                        done.set_result((False, f"not dumped: {CLOSED_SHORT}"))


def _said(exc: DashboardError) -> str:
    """An error as the feed shows it: the message, then the remedy; scrubbed, since the body
    quotes and Ray's reasons in it come from the cluster."""
    return scrub_text(" ".join(filter(None, (exc.message, exc.remedy))))


def _result(done: Future, target: ProcInfo, stamp: float):
    try:
        return done.result()
    except Exception as exc:  # noqa: BLE001 - cancelled by close(), or a bug in one dump
        return ray_stacks.failed_dump(target, ERROR, f"not dumped: {exc or 'cancelled'}",
                                      stamp=stamp)

