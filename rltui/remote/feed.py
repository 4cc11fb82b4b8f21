"""Where a view of many nodes gets its readings: one agent per node (ssh, srun or local).

A feed is the process side of the cluster view, the same for the app and the headless run:
``start(on_reading)`` and every reading of every node arrives as ``on_reading(host, reading)``
from the feed's own threads, already on this machine's clock (each stream's measured skew
applied), labelled with the name rltui knows the node by (never the name an agent claims for
itself). ``statuses()`` says how each node's stream stands; ``dump_all()`` asks every node
for a stack round now; ``close()`` ends it all. ``RayFeed`` (rltui.remote.ray) offers the
same for a Ray cluster, read through its dashboard instead of agents.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Protocol

from rltui.agent.protocol import Hello, ReadingMessage, Reply
from rltui.cluster.skew import to_local
from rltui.model import Reading
from rltui.remote.status import CLOSED, LOST, StreamStatus
from rltui.remote.stream import AgentStream
from rltui.remote.transports import Launch, run_on

OnReading = Callable[[str, Reading], None]
DUMP_TIMEOUT_S = 60.0  # a round of every rank of a node, each pausing for its own dump
# Sources whose first reading a headless run does not wait for: py-spy rounds come every
# pyspy.interval, and the run asks for one at its end anyway.
NOT_AWAITED = ("stacks",)


class Feed(Protocol):
    kind: str  # "ssh", "slurm", "local", "ray": for the header and the report
    job: str
    # Why the source as a whole cannot be read now (a Ray dashboard that does not answer),
    # with the remedy; "" while it answers. Per-node trouble is in ``statuses()``.
    error: str

    def start(self, on_reading: OnReading) -> None: ...
    def hosts(self) -> list[str]: ...
    def statuses(self) -> list[StreamStatus]: ...
    def settled(self) -> bool: ...
    def intervals(self) -> dict[str, float]: ...
    def run_on(self, host: str) -> str: ...
    def dump_all(self, timeout: float = DUMP_TIMEOUT_S) -> dict[str, Future]: ...
    def close(self) -> None: ...


class AgentFeed:
    """One ``AgentStream`` per launch. ``reconnect``: the app's streams come back by backoff
    after a node drops; a headless run makes one attempt per node."""

    def __init__(self, plan: Sequence[Launch], *, reconnect: bool = True,
                 on_message: Callable[[str, object], None] | None = None,
                 **stream_options) -> None:
        self.kind = plan[0].transport if plan else "ssh"
        self.job = ""
        self.error = ""  # each node's stream says its own trouble
        self._run_on = {x.host: shlex.join(run_on(x)) for x in plan}
        self._on_reading: OnReading | None = None
        self._on_message = on_message
        self._lock = threading.Lock()
        self._sources: dict[str, frozenset[str] | None] = {x.host: None for x in plan}
        self._seen: dict[str, set[str]] = {x.host: set() for x in plan}
        self.streams = [AgentStream.for_launch(x, reconnect=reconnect, on_message=self._message,
                                               **stream_options) for x in plan]

    def _message(self, stream: AgentStream, message: object) -> None:
        # The stream's thread. Readings are labelled with the stream's host: an agent that
        # names another node in its lines must not be able to write into that node's view.
        if isinstance(message, ReadingMessage):
            with self._lock:
                self._seen[stream.host].add(message.source)
            if self._on_reading is not None:
                self._on_reading(stream.host, to_local(message.reading, stream.skew))
        elif isinstance(message, Hello):
            with self._lock:
                self._sources[stream.host] = frozenset(message.sources) - set(NOT_AWAITED)
                if message.job and not self.job:
                    self.job = message.job
        if self._on_message is not None:
            self._on_message(stream.host, message)

    def start(self, on_reading: OnReading) -> None:
        self._on_reading = on_reading
        for stream in self.streams:
            stream.start()

    def hosts(self) -> list[str]:
        return [s.host for s in self.streams]

    def statuses(self) -> list[StreamStatus]:
        return [s.status() for s in self.streams]

    def intervals(self) -> dict[str, float]:
        """Each source's poll interval as the agents' hellos say (the slowest node's): how old
        a reading may be before the header calls it stale."""
        out: dict[str, float] = {}
        for stream in self.streams:
            hello = stream.status().hello
            for name, seconds in (hello.sources if hello is not None else {}).items():
                if seconds > 0:
                    out[name] = max(out.get(name, 0.0), seconds)
        return out

    def run_on(self, host: str) -> str:
        return self._run_on.get(host, "")

    def settled(self) -> bool:
        """Every node has said what it will say soon: it is lost or closed, or each source
        its hello named (py-spy rounds aside) has sent a reading."""
        for stream in self.streams:
            if stream.status().state in (LOST, CLOSED):
                continue
            with self._lock:
                awaited, seen = self._sources[stream.host], self._seen[stream.host]
                if awaited is None or not awaited <= seen:
                    return False
        return True

    def dump_all(self, timeout: float = DUMP_TIMEOUT_S) -> dict[str, Future]:
        """A ``dump`` request to every node at once; each future gives ``(ok, message)``. The
        round itself arrives through ``on_reading`` before the reply (the agent sends it
        first), so a resolved future means the node's round is in."""
        out: dict[str, Future] = {}
        for stream in self.streams:
            done: Future = Future()
            try:
                asked = stream.request("dump", timeout=timeout)
            except Exception as exc:  # noqa: BLE001 - one node must not stop the others
                done.set_result((False, _without_host(str(exc), stream.host)))
            else:
                asked.add_done_callback(_outcome_into(done, stream.host))
            out[stream.host] = done
        return out

    def close(self) -> None:
        for stream in self.streams:
            stream.close(wait=False)  # their grace periods overlap
        # One deadline for all: closing 64 streams must not take 64 grace periods.
        deadline = time.monotonic() + max((s.close_grace for s in self.streams), default=0) + 5.0
        for stream in self.streams:
            stream.join(max(0.0, deadline - time.monotonic()))


def _without_host(message: str, host: str) -> str:
    """"node03 is lost: ..." -> "lost: ...": the caller shows ``host: message``."""
    return message[len(host):].lstrip(" :").removeprefix("is ") if message.startswith(
        host) else message


def _outcome_into(done: Future, host: str) -> Callable[[Future], None]:
    """Turn an agent's reply (or the request's failure) into ``(ok, message)``."""
    def finish(asked: Future) -> None:
        try:
            reply = asked.result()
        except Exception as exc:  # noqa: BLE001 - TimeoutError, ConnectionError
            done.set_result((False, _without_host(str(exc), host) or type(exc).__name__))
            return
        if isinstance(reply, Reply):
            done.set_result((reply.ok, reply.message))
        else:
            done.set_result((False, f"unexpected answer: {reply!r}"))
    return finish
