"""Live py-spy dumps of the job's processes: the "stacks" source.

A round runs ``py-spy dump --pid PID --json`` for every process of the job at once, from a
bounded pool of ``pyspy.max_concurrent`` threads (one py-spy child each), and returns one
"stacks" Reading whose payload is a ``StackPoll``. docs/stack-dumps.md has the user side.

Blocking or not. A periodic round (``poll``) passes ``--nonblocking``: py-spy reads the
process's memory while it runs, so watching never pauses the job, at the price of a stack that
can be torn when a thread moves during the read. An on-demand round (``dump_now``, the person
pressed a key) leaves it out: py-spy stops the threads of one process for as long as it reads
them, so each process comes back as one consistent cut. The pause is the dump itself and no
longer: py-spy detaches when it is done, and when the per-process timeout kills it, the kernel
detaches it (and a stop that py-spy itself left is undone with SIGCONT, see ``_stop_left_by``;
a stop by anyone else is left alone and said in the dump's message).
py-spy cannot read native frames without pausing, so ``--native`` goes to blocking
rounds only.

One round at a time. A call made while a round is in flight starts no second one: ``poll``
returns the in-flight round's reading (of either trigger; a fresh round would cost the same CPU
to say the same), and ``dump_now`` returns an in-flight on-demand round's reading but waits out a
periodic one and then runs its own, because the person asked for a blocking cut. Together with
the pool, at most ``max_concurrent`` py-spy processes ever run.

Failures are states. py-spy missing is one ``unavailable`` reading, ptrace refused for every
process one ``denied`` reading with one remedy; otherwise each dump carries its own status: ok,
denied, timeout (py-spy, and only py-spy, was killed), error, or exited (the process ended
during its dump, which is news about the job rather than a failure to dump it).
"""

from __future__ import annotations

import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import psutil

from rltui.config import PySpy
from rltui.model import (
    DENIED,
    ERROR,
    OK,
    TIMEOUT,
    UNAVAILABLE,
    ProcessDump,
    ProcInfo,
    Reading,
    StackPoll,
    replace,
)
from rltui.sources.base import reading
from rltui.units import MIB

EXITED = "exited"  # a dump's status: the process ended while it was being dumped
MAX_OUTPUT = 64 << 20  # bytes of one py-spy's stdout; a bigger dump is garbage or a fork bomb
MAX_STDERR = 64 << 10
MAX_MESSAGE = 300

INSTALL_REMEDY = "pip install py-spy (or set pyspy.path in the config)"
PTRACE_REMEDY = (
    "py-spy needs ptrace rights on the job's processes: run rltui as root or with sudo, or allow "
    "ptrace with `sudo sysctl kernel.yama.ptrace_scope=0`; in a container add the SYS_PTRACE "
    "capability (docker run --cap-add SYS_PTRACE; Kubernetes: securityContext: capabilities: "
    "add: [SYS_PTRACE])."
)
TIMEOUT_REMEDY = ("A process with many threads, or a busy node, takes longer to dump: raise "
                  "pyspy.timeout in the config.")
CLOSING = "not dumped: stack dumps are shutting down"
STOPPED = "stack dumps are stopped: the source is closed"
LEFT_STOPPED = "the process is stopped, by whom unknown: rltui left it stopped"

_DENIED = re.compile(r"permission denied|operation not permitted|ptrace", re.IGNORECASE)
_CAUSE = re.compile(r"^\d+: (.+)$")
_WORDS = {DENIED: "denied", TIMEOUT: "timed out", ERROR: "failed",
          EXITED: "exited during the dump"}


@dataclass(slots=True)
class _Flight:
    """The round in progress, for the calls that arrive while it runs."""

    trigger: str
    done: threading.Event = field(default_factory=threading.Event)
    result: Reading | None = None


class StackSource:
    """Dumps the stacks of ``targets()`` (called at the start of every round) with py-spy."""

    name = "stacks"

    def __init__(self, targets: Callable[[], Sequence[ProcInfo]], settings: PySpy, *,
                 clock: Callable[[], float] = time.time) -> None:
        self._targets = targets
        self._settings = settings
        self._clock = clock
        self._pool = ThreadPoolExecutor(max_workers=max(1, settings.max_concurrent),
                                        thread_name_prefix="rltui-py-spy")
        self._lock = threading.Lock()
        self._flight: _Flight | None = None
        self._children: set[subprocess.Popen] = set()
        self._closed = False

    def poll(self) -> Reading:
        """A periodic round: nonblocking unless the settings say otherwise."""
        return self._run("periodic")

    def dump_now(self) -> Reading:
        """An on-demand round: blocking, for a consistent cut of each process."""
        return self._run("on-demand")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            children = list(self._children)
        # Queued dumps go first, so that no worker freed by a kill starts another py-spy.
        self._pool.shutdown(wait=False, cancel_futures=True)
        for child in children:
            _kill(child)

    # -- rounds

    def _run(self, trigger: str) -> Reading:
        while True:
            with self._lock:
                flight = self._flight
                if flight is None:
                    flight = self._flight = _Flight(trigger)
                    break
                joins = trigger == "periodic" or flight.trigger == trigger
            flight.done.wait()
            if joins and flight.result is not None:  # None: that round crashed; run our own
                return flight.result
        try:
            flight.result = self._round(trigger)
        finally:
            with self._lock:
                self._flight = None
            flight.done.set()
        return flight.result

    def _round(self, trigger: str) -> Reading:
        s = self._settings
        nonblocking = trigger == "periodic" and s.nonblocking
        native = s.native and not nonblocking
        started = self._clock()

        def out(status: str, payload: StackPoll | None = None, message: str = "",
                remedy: str = "") -> Reading:
            return reading(self.name, status, payload, message, remedy, clock=self._clock)

        if self._closed:
            return out(UNAVAILABLE, message=STOPPED)
        try:
            targets = _unique(self._targets())
        except Exception as exc:  # noqa: BLE001 - the process source's trouble is a state here
            return out(ERROR, message=f"could not get the job's processes: {exc}")
        exe = _executable(s.path)
        if exe is None:
            return out(UNAVAILABLE, message=f"py-spy is not installed (no executable {s.path!r} "
                                            f"found)", remedy=INSTALL_REMEDY)
        args = ["dump", "--pid", "{pid}", "--json"]
        if nonblocking:
            args.append("--nonblocking")
        if native:
            args.append("--native")
        command = " ".join([s.path, *args])

        def payload(dumps: tuple[ProcessDump, ...]) -> StackPoll:
            return StackPoll(dumps=dumps, started=started, finished=self._clock(),
                             trigger=trigger, nonblocking=nonblocking, native=native,
                             command=command)

        if not targets:
            return out(OK, payload(()), "no job processes to dump")
        try:
            futures = [self._pool.submit(self._dump, exe, args, t) for t in targets]
        except RuntimeError:  # close() shut the pool down under us
            return out(UNAVAILABLE, message=STOPPED)
        dumps = tuple(_result(f, t) for f, t in zip(futures, targets))
        status, message, remedy = _sum_up(dumps, command)
        return out(status, payload(dumps) if status == OK else None, message, remedy)

    # -- one process

    def _dump(self, exe: str, args: list[str], target: ProcInfo) -> ProcessDump:
        pid = target.pid
        stamp = self._clock()
        start = time.monotonic()

        def done(status: str, message: str = "", base: ProcessDump | None = None) -> ProcessDump:
            return replace(base or ProcessDump(pid=pid), pid=pid, rank=target.rank,
                           source="live", timestamp=stamp, duration=time.monotonic() - start,
                           status=status, message=message[:MAX_MESSAGE])

        if self._closed:
            return done(ERROR, CLOSING)
        if target.is_zombie:  # the process source saw it exit; py-spy has nothing to read
            return done(EXITED, "the process had already exited")
        argv = [exe, *(str(pid) if a == "{pid}" else a for a in args)]
        # A blocking py-spy pauses the target while it reads. One that attaches with
        # PTRACE_ATTACH queues a SIGSTOP; killed before it collects that stop, it leaves the job
        # stopped. Someone else (a debugger, a Slurm suspend) may stop the job during the dump as
        # well, and the two stops look alike afterwards: see _resume_if_ours for the rule.
        blocking = "--nonblocking" not in args
        stopped_before = blocking and _stopped(pid)
        try:
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE,
                                     env=os.environ | {"RUST_BACKTRACE": "0"})
        except OSError as exc:
            return done(ERROR, f"could not start py-spy: {exc}")
        with self._lock:
            closing = self._closed
            if not closing:
                self._children.add(child)
        if closing:  # close() ran between our check and the spawn: it missed this child
            _kill(child)
        ours = False
        cut = "raised"
        try:
            stdout, stderr, cut = _collect(child, start + self._settings.timeout)
        finally:
            # Only a py-spy that rltui is about to kill mid-dump can leave a stop behind.
            if blocking and not stopped_before and cut and child.poll() is None:
                ours = _stop_left_by(child, pid)
            _kill(child)
            rc = child.wait()
            child.stdout.close()
            child.stderr.close()
            with self._lock:
                self._children.discard(child)
            left = blocking and not _resume_if_ours(pid, ours) and _settled_stopped(pid)
        note = f" ({LEFT_STOPPED})" if left else ""
        if cut == "timeout":
            return done(TIMEOUT, f"py-spy took longer than {self._settings.timeout:g} s and "
                                 f"was stopped" + note)
        if cut == "overflow":
            return done(ERROR, f"py-spy printed more than {MAX_OUTPUT / MIB:g} MiB; not read"
                                + note)
        if rc == 0:
            dump = _parsed(stdout, pid, done)
            return replace(dump, message=(dump.message + note).strip()[:MAX_MESSAGE])
        if _gone(target):
            return done(EXITED, "the process exited during its dump")
        if self._closed:
            return done(ERROR, CLOSING)
        said = _summary(stderr)
        if _DENIED.search(said):
            return done(DENIED, f"ptrace refused: {said}" + note)
        if rc < 0:
            return done(ERROR, f"py-spy was killed by signal {-rc}" + note)
        return done(ERROR, (f"py-spy failed: {said}" if said else f"py-spy exited with {rc}")
                    + note)


def _collect(child: subprocess.Popen, deadline: float) -> tuple[bytes, bytes, str]:
    """py-spy's stdout and stderr, each bounded, and why reading stopped early: "timeout",
    "overflow" (stdout over MAX_OUTPUT) or "" (py-spy exited in time)."""
    out, err = child.stdout.fileno(), child.stderr.fileno()
    bufs = {out: bytearray(), err: bytearray()}
    caps = {out: MAX_OUTPUT, err: MAX_STDERR}
    with selectors.DefaultSelector() as sel:
        for fd in bufs:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(bufs[out]), bytes(bufs[err]), "timeout"
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                room = caps[key.fd] - len(bufs[key.fd])
                if len(chunk) > room and key.fd == out:
                    return b"", bytes(bufs[err]), "overflow"
                bufs[key.fd] += chunk[:room]  # stderr: keep its head, drain the rest
    try:
        child.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return bytes(bufs[out]), bytes(bufs[err]), "timeout"
    return bytes(bufs[out]), bytes(bufs[err]), ""


def _parsed(stdout: bytes, pid: int, done: Callable[..., ProcessDump]) -> ProcessDump:
    text = stdout.decode("utf-8", "replace")
    if not text.strip():
        return done(ERROR, "py-spy exited without printing a dump")
    from rltui.parsing.pyspy import parse_json  # loaded with the first dump, not at import
    try:
        found = parse_json(text, "py-spy output", pid)
    except (ValueError, TypeError, RecursionError) as exc:  # DumpParseError is a ValueError
        return done(ERROR, f"not a py-spy --json dump: {exc}")
    dump = next((d for d in found if d.pid == pid), found[0])
    return done(dump.status, dump.message, dump)


def _gone(target: ProcInfo) -> bool:
    """The process has exited (or is a zombie, or its pid now names another process)."""
    try:
        proc = psutil.Process(target.pid)
        if target.create_time is not None and abs(proc.create_time() - target.create_time) > 0.01:
            return True
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


def _summary(stderr: bytes) -> str:
    """py-spy's error in one line: its first line and the innermost cause, no backtrace."""
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines()]
    if "Stack backtrace:" in lines:
        lines = lines[:lines.index("Stack backtrace:")]
    lines = [line for line in lines if line]
    if not lines:
        return ""
    head = lines[0].removeprefix("Error: ")
    causes = [m.group(1) for line in lines[1:] if (m := _CAUSE.match(line))]
    return f"{head} ({causes[-1]})" if causes else head


def _executable(path: str) -> str | None:
    """``path`` as the shell would find it, else (a bare name) beside our own Python: py-spy
    installed into rltui's virtualenv is there even when that virtualenv is not activated."""
    found = shutil.which(path)
    if found is None and os.sep not in path:
        found = shutil.which(path, path=os.path.dirname(sys.executable))
    return found


def _unique(targets: Sequence[ProcInfo]) -> list[ProcInfo]:
    """One target per pid (the first), in the order given."""
    seen: dict[int, ProcInfo] = {}
    for target in targets:
        seen.setdefault(target.pid, target)
    return list(seen.values())


def _result(future: Future, target: ProcInfo) -> ProcessDump:
    try:
        return future.result()
    except CancelledError:  # close() dropped it before it started
        return ProcessDump(pid=target.pid, rank=target.rank, source="live", status=ERROR,
                           message=CLOSING)


def _stopped(pid: int) -> bool:
    """The process is in job-control stop (state ``T``; ``t``, a tracing stop, ends with the
    tracer)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    # The command name is in parentheses and may hold spaces: the state follows the last ')'.
    return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] == b"T"


_STOP_SIGNALS = (1 << (signal.SIGSTOP - 1) | 1 << (signal.SIGTSTP - 1)
                 | 1 << (signal.SIGTTIN - 1) | 1 << (signal.SIGTTOU - 1))


def _tasks(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def _task_status(pid: int, tid: str) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/task/{tid}/status", encoding="utf-8", errors="replace") as f:
            return dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)
    except OSError:
        return {}


def _task_stat(pid: int, tid: str) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return []
    return stat[stat.rfind(b")") + 2:].split()  # the name may hold spaces and ')'


def _stop_pending(pid: int) -> bool:
    """A stop signal is queued to the process or to one of its threads: someone sent one."""
    for tid in _tasks(pid) or [str(pid)]:
        st = _task_status(pid, tid)
        for key in ("ShdPnd", "SigPnd"):
            try:
                if int(st.get(key, "0").strip(), 16) & _STOP_SIGNALS:
                    return True
            except ValueError:
                continue
    return False


def _stop_left_by(child: subprocess.Popen, pid: int) -> bool:
    """Whether killing ``child`` (a blocking py-spy on ``pid``, still running) will leave the
    job stopped by py-spy's own doing. py-spy is frozen first (our own child: the one process
    rltui may stop), so that what is read here cannot change on py-spy's side before the kill.

    Proof that the stop to come is py-spy's: a thread traced by this py-spy sits in a
    signal-delivery stop of SIGSTOP that py-spy never collected (its PTRACE_ATTACH stop: the
    kernel delivers it once the tracer dies). Proof against: a thread already in job-control
    stop ("T"), or a stop signal queued to the process or a thread, is someone else's stop. A
    py-spy that seizes (PTRACE_SEIZE, py-spy 0.3 on) never queues a SIGSTOP: its death resumes
    the job by itself, so any stop seen afterwards is someone else's."""
    try:
        child.send_signal(signal.SIGSTOP)
    except OSError:
        return False
    deadline = time.monotonic() + 1.0
    while child.poll() is None and _state(_task_stat(child.pid, str(child.pid))) not in (
            b"T", b"t", b"Z", b"") and time.monotonic() < deadline:
        time.sleep(0.001)  # the kernel stops it within microseconds; a bounded wait on that
    ours = False
    for tid in _tasks(pid):
        stat = _task_stat(pid, tid)
        state = _state(stat)
        if state == b"T":
            return False
        tracer = _task_status(pid, tid).get("TracerPid", "0").strip()
        if state == b"t" and tracer == str(child.pid) and stat and stat[-1] == b"%d" % (
                signal.SIGSTOP):
            ours = True
    return ours and not _stop_pending(pid)


def _state(stat: list[bytes]) -> bytes:
    return stat[0] if stat else b""


def _resume_if_ours(pid: int, ours: bool) -> bool:
    """SIGCONT, the only signal rltui sends to a job process, and only to a stop proven to be
    its own py-spy's (``_stop_left_by``) that nobody else has joined since: a stop signal
    queued now came from someone else after the look. Returns whether it resumed the job."""
    if not ours:
        return False
    deadline = time.monotonic() + 1.0  # the freed thread takes its SIGSTOP within microseconds
    while not _stopped(pid) and time.monotonic() < deadline:
        time.sleep(0.001)
    if not _stopped(pid) or _stop_pending(pid) or _traced(pid):
        return False
    try:
        os.kill(pid, signal.SIGCONT)
    except OSError:
        return False
    return True


def _settled_stopped(pid: int) -> bool:
    """Whether the process is stopped once the stops under way have taken hold: after py-spy
    dies, a stop signal queued meanwhile is taken by the freed threads within microseconds.
    Under way: a stop still pending, a thread already stopped, or one still in the tracing
    stop py-spy's death is releasing (it takes the pending stop, or runs, next)."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and not _stopped(pid) and (
            _stop_pending(pid) or any(_state(_task_stat(pid, t)) in (b"T", b"t")
                                      for t in _tasks(pid))):
        time.sleep(0.001)
    return _stopped(pid)


def _traced(pid: int) -> bool:
    return _task_status(pid, str(pid)).get("TracerPid", "0").strip() not in ("0", "")


def _kill(child: subprocess.Popen) -> None:
    try:
        if child.poll() is None:
            child.kill()
    except OSError:  # it exited between the two calls
        pass


def _sum_up(dumps: tuple[ProcessDump, ...], command: str) -> tuple[str, str, str]:
    """(status, message, remedy) of a round of at least one dump, saying which processes it
    left stopped (someone else's stop: rltui never resumes it)."""
    status, message, remedy = _sum_up_dumps(dumps, command)
    left = [d.pid for d in dumps if LEFT_STOPPED in d.message]
    if left:
        pids = ", ".join(map(str, left))
        said = f"pid {pids} {'is' if len(left) == 1 else 'are'} stopped, by whom unknown: " \
               f"rltui left {'it' if len(left) == 1 else 'them'} stopped"
        message = f"{message}; {said}" if message else said
    return status, message, remedy


def _sum_up_dumps(dumps: tuple[ProcessDump, ...], command: str) -> tuple[str, str, str]:
    counts = Counter(d.status for d in dumps)
    live = [d for d in dumps if d.status != EXITED]
    if live and all(d.status == DENIED for d in live):
        message = f"ptrace refused for all {len(live)} job process(es): py-spy may not read them"
        return DENIED, message, PTRACE_REMEDY
    trouble = ", ".join(f"{n} {_WORDS.get(s, s)}" for s, n in counts.items() if s != OK)
    remedy = (PTRACE_REMEDY if counts[DENIED] else TIMEOUT_REMEDY if counts[TIMEOUT]
              else f"Run `{command}` by hand to see py-spy's whole answer." if counts[ERROR]
              else "")
    if counts[OK] or not live:
        message = f"dumped {counts[OK]} of {len(dumps)} processes; {trouble}" if trouble else ""
        return OK, message, remedy
    status = TIMEOUT if all(d.status == TIMEOUT for d in live) else ERROR
    first = next(d for d in live if d.status != DENIED)
    message = f"no process could be dumped ({trouble}); pid {first.pid}: {first.message}"
    return status, message, remedy
