"""Live sources for UI tests: each poll returns a fresh, time-stamped Reading.

A GPU is the one thing a test machine cannot have, so these stand in for NVML and psutil.
``gate`` holds a poll until the test opens it (to test that a slow source is never polled
twice at once); ``error`` makes ``poll`` raise (the app must turn it into a state).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rltui.model import OK, UNAVAILABLE, GpuPoll, ProcPoll, Reading
from rltui.sources.bundle import Bundle, SourceSpec
from tests.fakes.scenarios import NO_NVML, NO_NVML_REMEDY, busy_util, gpu, proc


class FakeSource:
    def __init__(self, name: str, make: Callable[[int], Reading]) -> None:
        self.name = name
        self.make = make
        self.polls = 0
        self.closed = 0
        self.gate: threading.Event | None = None
        self.error: Exception | None = None
        self._lock = threading.Lock()

    def poll(self) -> Reading:
        with self._lock:
            self.polls += 1
            n = self.polls
        if self.gate is not None:
            self.gate.wait(10)
        if self.error is not None:
            raise self.error
        return self.make(n)

    def close(self) -> None:
        self.closed += 1


def gpus_ok(count: int = 4) -> FakeSource:
    return FakeSource("gpus", lambda n: Reading(
        "gpus", time.time(), OK,
        GpuPoll(gpus=tuple(gpu(i, busy_util(i, n), pids=(4100 + i,)) for i in range(count)))))


def gpus_unavailable() -> FakeSource:
    return FakeSource("gpus", lambda n: Reading("gpus", time.time(), UNAVAILABLE, None,
                                                NO_NVML, NO_NVML_REMEDY))


def procs_ok(count: int = 4) -> FakeSource:
    return FakeSource("procs", lambda n: Reading(
        "procs", time.time(), OK,
        ProcPoll(procs=tuple(proc(r, world=count, cpu=float(n % 100)) for r in range(count)))))


def live_bundle(*sources: FakeSource, interval: float = 0.05,
                closers: list[Callable[[], None]] | None = None) -> Bundle:
    return Bundle(mode="live", host="test-node", job="fake job",
                  specs=[SourceSpec(s, interval) for s in sources], closers=closers or [])


class FakeStackSource:
    """Stands in for the py-spy source: ``poll`` is a periodic round, ``dump_now`` the ``d``
    key's; both return the real saved dumps of ``fixtures/stacks/FOLDER`` (or ``failure``, a
    (status, message, remedy) triple, as a failed round)."""

    name = "stacks"

    def __init__(self, folder: str = "cleanup-deadlock",
                 failure: tuple[str, str, str] | None = None) -> None:
        from tests.fakes.scenarios import saved_dumps
        self.dumps = saved_dumps(folder)
        self.failure = failure
        self.polls = 0
        self.on_demand = 0
        self.closed = 0

    def _round(self, trigger: str) -> Reading:
        from rltui.model import StackPoll
        now = time.time()
        if self.failure is not None:
            status, message, remedy = self.failure
            return Reading("stacks", now, status, None, message, remedy)  # as the real one
        return Reading("stacks", now, OK, StackPoll(
            dumps=self.dumps, started=now, finished=now, trigger=trigger,
            nonblocking=trigger == "periodic", command="py-spy dump --pid {pid} --json"))

    def poll(self) -> Reading:
        self.polls += 1
        return self._round("periodic")

    def dump_now(self) -> Reading:
        self.on_demand += 1
        return self._round("on-demand")

    def close(self) -> None:
        self.closed += 1
