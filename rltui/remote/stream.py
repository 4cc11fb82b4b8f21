"""One agent's stream: run its command, read its JSON lines, track its health, reconnect.

``AgentStream(host, argv)`` runs ``argv`` (an ssh, srun or local command from
rltui.remote.transports) with pipes, and a thread of its own reads stdout, decodes each line
with the wire protocol and hands every message to ``on_message(stream, message)``. Each stream
has its own threads, so a slow node or a slow consumer of one node never delays another's.

States: ``connecting`` (started, nothing valid yet), ``live``, ``slow`` (live, but nothing
for ``slow_after`` heartbeats; evaluated when ``status()`` is asked, which the app does on
every refresh), ``lost`` (the process ended, the pipe closed, or a storm of bad lines; with
``reason`` and ``last_seen``; reconnects with backoff unless retrying cannot help) and
``closed`` (after ``close()``). ``on_state(stream, status)`` is told of every change.

Hostile input never escapes the reader thread: a line over the limit is skipped in bounded
memory, garbage, a wrong schema or a bad reading become a recorded problem and the stream
stays live; ``storm_limit`` bad lines among the last ``storm_window`` make it lost. A newer
protocol version is lost at once, with the message to upgrade.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from rltui.agent import protocol
from rltui.agent.protocol import (
    Bye,
    ErrorMessage,
    Heartbeat,
    Hello,
    Message,
    ProtocolError,
    ReadingMessage,
    Reply,
    Request,
    Unknown,
)
from rltui.remote.pending import PendingRequests
from rltui.remote.status import CLOSED, CONNECTING, LIVE, LOST, SLOW, Problem, StreamStatus
from rltui.remote.timing import Backoff, SkewEstimator
from rltui.remote.transports import (
    LOCAL,
    ExitReason,
    Launch,
    classify_exit,
    explain_spawn_error,
    last_line,
)

# A node whose clock is further than this from ours cannot have its times placed (a skew of
# 1e300 s is a broken or hostile agent): the stream is given up with that reason, permanently
# (docs/multi-node.md, Clock skew).
MAX_SKEW_S = 86_400.0
STDERR_KEPT = 64 << 10  # bytes of an agent's stderr kept to explain its exit
READ_SIZE = 1 << 16


class AgentStream:
    """One node's agent: ``AgentStream(host, argv, ...).start()``, then ``status()``,
    ``request()`` and ``close()``; ``on_message`` and ``on_state`` are called from the
    stream's own thread (the app posts them on to its main thread).

    ``heartbeat`` is the agent's ``--heartbeat``: ``slow_after`` of them without a line is
    slow. ``backoff`` spaces reconnects (``reconnect=False``: none), and a connection up for
    ``stable_after`` s starts the backoff over. ``storm_limit`` bad lines among the last
    ``storm_window`` lose the stream. ``wall``, ``monotonic`` and ``sleep`` are for tests.
    """

    def __init__(self, host: str, argv: Sequence[str], *, transport: str = LOCAL,
                 on_message: Callable[[AgentStream, Message], None] | None = None,
                 on_state: Callable[[AgentStream, StreamStatus], None] | None = None,
                 heartbeat: float = protocol.DEFAULT_HEARTBEAT, slow_after: float = 3.0,
                 reconnect: bool = True, backoff: Backoff | None = None,
                 stable_after: float = 60.0, request_timeout: float = 60.0,
                 close_grace: float = 3.0, storm_window: int = 50, storm_limit: int = 10,
                 problems_kept: int = 20, env: dict[str, str] | None = None,
                 cwd: str | None = None, wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] | None = None) -> None:
        self.host = host
        self.argv = tuple(argv)
        self.transport = transport
        self._on_message = on_message
        self._on_state = on_state
        self.slow_seconds = heartbeat * slow_after
        self.reconnect = reconnect
        self.backoff = backoff or Backoff()
        self.stable_after = stable_after
        self.request_timeout = request_timeout
        self.close_grace = close_grace
        self._env, self._cwd = env, cwd
        self._wall, self._monotonic = wall, monotonic
        # the default sleep wakes up at once on close()
        self._sleep = sleep or (lambda seconds: self._closing.wait(seconds))
        self._closing = threading.Event()
        self._done = threading.Event()
        self._lock = threading.Lock()  # state below
        self._write_lock = threading.Lock()  # whole request lines on stdin
        self._state, self._since = CONNECTING, wall()
        self._last_seen: float | None = None
        self._last_mono = monotonic()
        self._reason = ""
        self._attempts = 0
        self._retry_at: float | None = None
        self._hello: Hello | None = None
        self._skew = SkewEstimator()
        self._problems: deque[Problem] = deque(maxlen=problems_kept)
        self._window: deque[bool] = deque(maxlen=storm_window)
        self._storm_limit = storm_limit
        self._proc: subprocess.Popen | None = None
        self._stderr = bytearray()
        self._fatal: ExitReason | None = None  # set by the reader: why it killed the process
        self._hello_at: float | None = None  # monotonic clock of this attempt's hello
        self._bye: Bye | None = None
        self._pending = PendingRequests(host)
        self._thread = threading.Thread(target=self._run, name=f"rltui-agent-{host}",
                                        daemon=True)

    @classmethod
    def for_launch(cls, launch: Launch, **kwargs) -> AgentStream:
        """The stream of one launch from rltui.remote.transports (not started yet)."""
        return cls(launch.host, launch.argv, transport=launch.transport, **kwargs)

    # -- public -------------------------------------------------------------------------------

    def start(self) -> AgentStream:
        self._thread.start()
        return self

    def status(self) -> StreamStatus:
        """The stream's status now; turns live into slow when nothing came for too long."""
        changed = False
        with self._lock:
            if (self._state == LIVE
                    and self._monotonic() - self._last_mono > self.slow_seconds):
                self._set(SLOW)
                changed = True
            status = self._status()
        if changed:
            self._tell_state(status)
        return status

    @property
    def state(self) -> str:
        return self.status().state

    @property
    def skew(self) -> float | None:
        """Seconds this machine's clock is ahead of the agent's (None before a hello)."""
        with self._lock:
            return self._skew.value

    def to_local(self, agent_time: float) -> float:
        """An agent's timestamp on this machine's clock, for ages: ``now - to_local(t)``."""
        with self._lock:
            return self._skew.to_local(agent_time)

    def request(self, op: str, *, timeout: float | None = None, path: str | None = None,
                lines: int | None = None) -> Future:
        """Send a request; the future resolves to the agent's ``Reply`` (``ok`` may be false),
        or fails with TimeoutError when none comes in ``timeout`` s, or ConnectionError when
        the stream is lost first."""
        rid = self._pending.next_id()
        with self._lock:
            proc, state, reason = self._proc, self._state, self._reason
        if proc is None or state in (LOST, CLOSED):
            future: Future = Future()
            future.set_exception(ConnectionError(
                f"{self.host} is {state}" + (f": {reason}" if reason else "")))
            return future
        line = protocol.encode(Request(rid, op, path, lines))
        future = self._pending.add(rid, op, self.request_timeout if timeout is None else timeout)
        if not self._write(proc, line):
            self._pending.fail(rid, ConnectionError(f"{self.host}: the agent's stdin is closed"))
        return future

    def close(self, wait: bool = True) -> None:
        """Ask the agent to stop (a stop request, then end of input), then terminate it if it
        has not exited within ``close_grace`` s. With ``wait=False`` this returns at once and
        ``join()`` waits; closing many streams that way overlaps their grace periods."""
        if self._closing.is_set():
            if wait:
                self.join()
            return
        self._closing.set()
        with self._lock:
            proc = self._proc
        if proc is not None and proc.poll() is None:
            self._write(proc, protocol.encode(Request("stop", "stop")))
            try:
                proc.stdin.close()
            except OSError:
                pass
        if not self._thread.is_alive() and not self._done.is_set():
            self._finish_unstarted()
        if wait:
            self._escalate(proc)
        else:
            threading.Thread(target=self._escalate, args=(proc,), daemon=True,
                             name=f"rltui-close-{self.host}").start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the stream is done (closed, or lost for good); True when it is."""
        return self._done.wait(timeout)

    # -- the supervisor thread ----------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        reason: ExitReason | None = None
        while not self._closing.is_set():
            reason = self._attempt()
            if self._closing.is_set():
                break
            if self._hello_at is not None and self._monotonic() - self._hello_at >= \
                    self.stable_after:
                failures = 0  # it had been up for a while: start the backoff again
            retry = self.reconnect and not reason.permanent
            delay = self.backoff.delay(failures) if retry else None
            with self._lock:
                self._reason = str(reason)
                self._retry_at = self._wall() + delay if delay is not None else None
                self._set(LOST)
                status = self._status()
            self._pending.fail_all(ConnectionError(f"{self.host} lost: {reason}"))
            self._tell_state(status)
            if delay is None:
                break
            failures += 1
            self._sleep(delay)
        with self._lock:
            closing = self._closing.is_set()
            if closing:
                self._retry_at = None
                self._reason = str(reason) if reason is not None else "closed before it started"
                self._set(CLOSED)
            status = self._status()
        self._pending.fail_all(ConnectionError(f"{self.host} is {status.state}"))
        if closing:
            self._tell_state(status)
        self._done.set()

    def _attempt(self) -> ExitReason:
        """Run the command once, read it to the end; why it ended."""
        self._hello_at = None
        self._bye = None
        self._fatal = None
        with self._lock:
            self._attempts += 1
            self._stderr.clear()
            self._window.clear()
            self._retry_at = None
            self._set(CONNECTING)
            status = self._status()
        self._tell_state(status)
        try:
            proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, bufsize=0, env=self._env, cwd=self._cwd,
                # its own session: a Ctrl-C meant for rltui must not reach ssh or srun, which
                # would print or cancel; close() ends them instead
                start_new_session=True)
        except OSError as exc:
            return explain_spawn_error(self.transport, self.argv[0], exc)
        with self._lock:
            self._proc = proc
        if self._closing.is_set():  # close() came while starting: it saw no process
            self._write(proc, protocol.encode(Request("stop", "stop")))
            proc.stdin.close()
        drain = threading.Thread(target=self._drain_stderr, args=(proc,), daemon=True,
                                 name=f"rltui-stderr-{self.host}")
        drain.start()
        self._read(proc)
        try:
            returncode = proc.wait(timeout=self.close_grace)
        except subprocess.TimeoutExpired:  # stdout closed but still running: not an agent
            proc.kill()
            returncode = proc.wait()
            self._fatal = self._fatal or ExitReason("the agent closed its output but kept "
                                                    "running (rltui ended it)")
        drain.join(timeout=self.close_grace)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass
        with self._lock:
            stderr = bytes(self._stderr)
        if self._fatal is not None:
            return self._fatal
        if self._bye is not None and returncode == 0:
            return ExitReason(f"the agent stopped: {self._bye.reason}")
        return classify_exit(self.transport, returncode, stderr)

    def _read(self, proc: subprocess.Popen) -> None:
        splitter = protocol.LineSplitter()
        fd = proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, READ_SIZE)
            except OSError:
                chunk = b""
            lines = splitter.feed(chunk) if chunk else splitter.end()
            for line in lines:
                if not self._handle(line):
                    proc.kill()  # a storm or a newer protocol: stop reading this one
                    return
            if not chunk:
                return

    def _drain_stderr(self, proc: subprocess.Popen) -> None:
        fd = proc.stderr.fileno()
        while True:
            try:
                chunk = os.read(fd, READ_SIZE)
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                self._stderr += chunk
                del self._stderr[:-STDERR_KEPT]

    # -- one line -----------------------------------------------------------------------------

    def _handle(self, line: bytes) -> bool:
        """Decode and dispatch one line; False when the stream must be given up."""
        msg = protocol.decode(line)
        now = self._wall()
        if isinstance(msg, ProtocolError):
            if msg.kind == protocol.EMPTY:
                return True
            with self._lock:
                self._problems.append(Problem(now, msg.kind, msg.message))
                self._window.append(True)
                bad = sum(self._window)
            if msg.kind == protocol.NEWER_VERSION:
                self._fatal = ExitReason(msg.message, permanent=True)
                return False
            if bad >= self._storm_limit:
                self._fatal = ExitReason(
                    f"{bad} of the last {len(self._window)} lines were not valid agent "
                    f"messages (last: {msg.message})")
                return False
            return True
        if isinstance(msg, (Hello, Heartbeat)) and abs(now - msg.t) > MAX_SKEW_S:
            self._fatal = ExitReason(
                f"the node's clock is {_seconds(msg.t - now)} off this machine's (more than "
                f"{MAX_SKEW_S / 3600:g} h): its times cannot be placed; fix its clock (NTP)",
                permanent=True)
            with self._lock:
                self._problems.append(Problem(now, "clock", self._fatal.reason))
            return False
        if isinstance(msg, ReadingMessage):
            with self._lock:
                if msg.dropped:
                    self._problems.append(Problem(now, "limit", msg.dropped))
        became_live = False
        with self._lock:
            self._window.append(False)
            self._last_seen = now
            self._last_mono = self._monotonic()
            if isinstance(msg, (Hello, Heartbeat)):
                self._skew.add(now, msg.t)
            if isinstance(msg, Hello):
                self._hello = msg
                self._hello_at = self._last_mono
            elif isinstance(msg, Unknown):
                self._problems.append(Problem(now, "unknown", msg.note))
            elif isinstance(msg, ErrorMessage):
                self._problems.append(Problem(now, "agent", msg.message))
            elif isinstance(msg, Bye):
                self._bye = msg
            if self._state in (CONNECTING, SLOW):
                self._set(LIVE)
                became_live = True
                status = self._status()
        if became_live:
            self._tell_state(status)
        if isinstance(msg, Reply):
            if not self._pending.resolve(msg.id, msg) and msg.id != "stop":
                self._note("reply", f"a reply to no pending request (id {msg.id!r:.40})")
        if self._on_message is not None:
            try:
                self._on_message(self, msg)
            except Exception as exc:  # the consumer's bug must not end the stream
                self._note("callback", f"on_message raised {type(exc).__name__}: {exc}")
        return True

    # -- helpers ------------------------------------------------------------------------------

    def _set(self, state: str) -> None:
        """Under the lock."""
        if state != self._state:
            self._state, self._since = state, self._wall()

    def _status(self) -> StreamStatus:
        """Under the lock."""
        proc = self._proc
        return StreamStatus(
            self.host, self._state, self._since, self._last_seen,
            self._reason if self._state in (LOST, CLOSED) else "", self._skew.value,
            tuple(self._problems), self._attempts, self._retry_at, self._hello,
            proc.pid if proc is not None else None,
            last_line(bytes(self._stderr[-4096:]).decode("utf-8", "replace")))

    def _tell_state(self, status: StreamStatus) -> None:
        if self._on_state is None:
            return
        try:
            self._on_state(self, status)
        except Exception as exc:
            self._note("callback", f"on_state raised {type(exc).__name__}: {exc}")

    def _note(self, kind: str, message: str) -> None:
        with self._lock:
            self._problems.append(Problem(self._wall(), kind, message))

    def _write(self, proc: subprocess.Popen, line: bytes) -> bool:
        with self._write_lock:
            try:
                view = memoryview(line)
                while view:
                    view = view[proc.stdin.write(view):]
                return True
            except (OSError, ValueError):  # a closed pipe, or stdin already closed here
                return False

    def _escalate(self, proc: subprocess.Popen | None) -> None:
        """After a stop: wait, then SIGTERM, then SIGKILL the process (not its children:
        ssh and srun pass the end on to the node themselves)."""
        if self._done.wait(self.close_grace) or proc is None:
            return
        for action in (proc.terminate, proc.kill):
            try:
                action()
            except OSError:
                pass
            if self._done.wait(self.close_grace):
                return

    def _finish_unstarted(self) -> None:
        with self._lock:
            self._reason = "closed before it started"
            self._set(CLOSED)
            status = self._status()
        self._done.set()
        self._tell_state(status)


def _seconds(value: float) -> str:
    """A signed duration short enough for one line, however large (1e300 s is '+1e+300 s')."""
    return f"{value:+.3g} s"
