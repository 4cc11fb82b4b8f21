"""The running agent: its threads, its requests, and how it ends.

Threads, each cheap and each with one job:

* poll: the fast sources (GPUs, processes, logs) at their cadences, through ``run_schedule``,
  the same loop ``rltui record`` uses; every reading goes straight to stdout.
* stacks: periodic py-spy rounds and ``dump`` requests, one at a time. A round can take
  seconds; on the poll thread it would hold back the GPU and log readings meanwhile.
* requests: reads stdin, answers ``tail`` and ``stop`` at once and queues ``dump`` for the
  stacks thread, so no request waits for the next poll.
* main: the heartbeat (every ``--heartbeat`` seconds, whatever else is written: it comes from
  a thread that never polls, so it says the agent is alive even while a poll hangs in a
  driver), ``--duration``, signals, and the ``bye`` at the end. It sleeps in
  ``select`` on a self-pipe, so a signal (whose handler only notes it and writes a byte) and a
  stop from another thread wake it at once, and no handler ever takes a lock.

The agent ends on ``stop``, stdin EOF (its parent is gone), SIGTERM/SIGINT/SIGHUP or the
duration, each with a ``bye`` naming why; or quietly when stdout is closed.
"""

from __future__ import annotations

import math
import os
import queue
import select
import threading
import time
from collections.abc import Callable

from rltui import __version__
from rltui.agent import requests
from rltui.agent.output import Output
from rltui.agent.protocol import (
    EMPTY,
    Bye,
    ErrorMessage,
    Heartbeat,
    Hello,
    LineSplitter,
    ProtocolError,
    Reply,
    Request,
    decode_request,
)
from rltui.model import Reading
from rltui.sources.base import guarded_poll
from rltui.sources.bundle import Bundle, run_schedule

MAX_QUEUED_DUMPS = 8  # dump requests waiting for the stacks thread; more are refused as busy
JOIN_S = 2.0  # how long the end waits for the poll thread before the sources are closed
READ_CHUNK = 1 << 16

STOP_REQUEST = "stop request"
STDIN_CLOSED = "stdin closed"
STDOUT_CLOSED = "stdout closed"
DURATION = "duration reached"


class Agent:
    def __init__(self, bundle: Bundle, host: str, *, out_fd: int, in_fd: int,
                 heartbeat: float, duration: float | None = None, periodic_stacks: bool = True,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.bundle = bundle
        self.host = host
        self.in_fd = in_fd
        self.heartbeat = heartbeat
        self.duration = duration
        self._mono = monotonic
        self.out = Output(out_fd, host, on_broken=lambda: self.stop(STDOUT_CLOSED))
        self.stopped = threading.Event()
        self.reason = ""
        self._reason_lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self.signalled = ""  # set by a signal handler (no locks there), acted on by run()
        self._dumps: queue.Queue[Request | None] = queue.Queue(MAX_QUEUED_DUMPS)
        self._dump_lock = threading.Lock()
        self._open_dumps: list[Request] = []  # queued or running, not yet answered
        stacks = bundle.stacks
        self._fast = [s for s in bundle.specs if s.source is not stacks]
        periodic = [s.interval for s in bundle.specs if s.source is stacks]
        self._stack_interval = periodic[0] if periodic and periodic_stacks else 0.0
        self._logs = next((s.source for s in bundle.specs if s.source.name == "logs"), None)

    # -- life cycle

    def hello(self) -> Hello:
        sources = {s.source.name: s.interval for s in self._fast}
        if self.bundle.stacks is not None:
            sources[self.bundle.stacks.name] = self._stack_interval  # 0: on request only
        return Hello(self.host, self.out.now(), f"rltui {__version__}", os.getpid(),
                     self.bundle.job, sources)

    def stop(self, reason: str) -> None:
        """Ask the agent to end; the first reason given is the one the bye names."""
        with self._reason_lock:
            if not self.reason:
                self.reason = reason
        self.stopped.set()
        self.wake()

    def wake(self) -> None:
        """Wake the main thread. Lock-free, so a signal handler may call it."""
        try:
            os.write(self._wake_w, b"!")
        except OSError:  # full (it is awake anyway) or closed (it has ended)
            pass

    def run(self) -> str:
        """Say hello, run until something ends the agent, say bye; returns the reason."""
        self.out.send(self.hello())
        threads = [self._thread("stacks", self._stack_loop),
                   self._thread("requests", self._request_loop)]
        poller = None
        if self._fast:
            poller = self._thread("poll", run_schedule, self._fast, math.inf, self._emit,
                                  self.stopped)
            threads.append(poller)
        for thread in threads:
            thread.start()
        try:
            self._supervise()
        finally:
            if not self.out.broken:
                self._say_bye()
            try:
                self._dumps.put_nowait(None)  # wakes the stacks thread to see the stop
            except queue.Full:
                pass  # it takes a request next, sees the stop and ends
            if poller is not None:
                poller.join(JOIN_S)  # sources are closed next: not under a running poll
        # The wake pipe stays open: a late wake() (a signal, a thread's stop) must never write
        # into a descriptor number that has been reused for something else.
        return self.reason

    def _thread(self, name: str, target: Callable, *args) -> threading.Thread:
        def guarded() -> None:
            try:
                target(*args)
            except Exception as exc:  # noqa: BLE001 - a bug: say so and end, never go silent
                self._error(f"the agent's {name} thread failed: {type(exc).__name__}: {exc}")
                self.stop(f"internal error in the {name} thread")
        return threading.Thread(target=guarded, name=f"rltui-agent-{name}", daemon=True)

    def _supervise(self) -> None:
        now = self._mono()
        deadline = now + self.duration if self.duration else math.inf
        beat = now + self.heartbeat
        while not self.stopped.is_set():
            if self.signalled:
                self.stop(self.signalled)
                break
            now = self._mono()
            if now >= deadline:
                self.stop(DURATION)
                break
            if now >= beat:
                self.out.send(Heartbeat(self.host, self.out.now()))
                beat = max(beat + self.heartbeat, now)  # after a stall: one beat, no burst
                continue
            ready, _, _ = select.select([self._wake_r], [], [], min(beat, deadline) - now)
            if ready:
                os.read(self._wake_r, 4096)

    # -- threads

    def _emit(self, reading: Reading) -> None:
        try:
            self.out.send_reading(reading)
        except Exception as exc:  # noqa: BLE001 - one bad reading must not end the stream
            self._error(f"could not send a {reading.source} reading: {type(exc).__name__}: "
                        f"{exc}")

    def _stack_loop(self) -> None:
        source = self.bundle.stacks
        interval = self._stack_interval
        due = self._mono() if interval > 0 and source is not None else math.inf
        while not self.stopped.is_set():
            wait = None if due == math.inf else max(0.0, due - self._mono())
            try:
                request = self._dumps.get(timeout=wait)
            except queue.Empty:
                if not self.stopped.is_set():
                    self._emit(guarded_poll(source))
                due = self._mono() + interval
                continue
            if request is None or self.stopped.is_set():
                break  # the end answers every open dump request before its bye
            if source is None:
                self._answer_dump(request, False, "this agent has no stack source")
                continue
            reading = guarded_poll(source, poll=source.dump_now)
            self._emit(reading)  # the round first, then the reply that refers to it
            self._answer_dump(request, *requests.dump(reading))

    def _queue_dump(self, request: Request) -> None:
        with self._dump_lock:
            try:
                self._dumps.put_nowait(request)
            except queue.Full:
                self._reply(request.id, False, f"busy: {MAX_QUEUED_DUMPS} dump requests are "
                                               f"already waiting")
                return
            self._open_dumps.append(request)  # open until answered, by the stacks or the end

    def _answer_dump(self, request: Request, ok: bool, message: str, data=None) -> None:
        with self._dump_lock:  # held while replying: the end cannot answer it a second time
            if any(r is request for r in self._open_dumps):
                self._open_dumps = [r for r in self._open_dumps if r is not request]
                self._reply(request.id, ok, message, data)

    def _say_bye(self) -> None:
        """Every open dump request gets its reply, then the bye; under the dump lock, so no
        dump reply can slip in after the bye (it would be dropped unsent)."""
        with self._dump_lock:
            for request in self._open_dumps:
                self._reply(request.id, False, f"not done: the agent is stopping "
                                               f"({self.reason or 'stopped'})")
            self._open_dumps = []
            self.out.close_with(Bye(self.host, self.out.now(), self.reason or "stopped"))

    def _request_loop(self) -> None:
        splitter = LineSplitter()
        while not self.stopped.is_set():
            try:
                chunk = os.read(self.in_fd, READ_CHUNK)
            except OSError:
                chunk = b""
            lines = splitter.feed(chunk) if chunk else splitter.end()
            for line in lines:
                if not self.stopped.is_set():
                    self._request(line)
            if not chunk:
                self.stop(STDIN_CLOSED)
                return

    def _request(self, line: bytes) -> None:
        request = decode_request(line)
        if isinstance(request, ProtocolError):
            if request.kind == EMPTY:
                return
            if request.id is not None:
                self._reply(request.id, False, f"bad request: {request.message}")
            else:
                self._error(f"bad request line: {request.message}")
            return
        try:
            if request.op == "stop":
                self._reply(request.id, True, "stopping")
                self.stop(STOP_REQUEST)
            elif request.op == "tail":
                files = self._logs.paths() if self._logs is not None else []
                self._reply(request.id, *requests.tail(request, files))
            elif request.op == "dump":
                self._queue_dump(request)
            else:
                self._reply(request.id, *requests.unknown_op(request))
        except Exception as exc:  # noqa: BLE001 - a failed request is a reply, not a crash
            self._reply(request.id, False, f"{request.op} failed: {type(exc).__name__}: {exc}")

    # -- writing

    def _reply(self, rid: str, ok: bool, message: str = "", data=None) -> None:
        self.out.send(Reply(self.host, self.out.now(), rid, ok, message, data))

    def _error(self, message: str) -> None:
        self.out.send(ErrorMessage(self.host, self.out.now(), message))
