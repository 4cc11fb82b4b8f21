"""Cost of a round of live stack dumps: one process's dump against a round over 16 processes
dumped concurrently (``max_concurrent`` 16); goal: the round takes at most 1.5 times one dump.

Both are measured in the same run against the same 16 idle Python processes, through
``StackSource.poll`` (periodic, nonblocking), so pool and parsing costs are in both. py-spy is
CPU-bound for most of a dump, so the ratio depends on the cores free: with 16 or more it can
approach 1, with 2 it cannot go below about 8. Run:
``python -m pytest tests/benchmarks/test_stacks_concurrency.py --benchmark-only -s``
or, without pytest: ``python tests/benchmarks/test_stacks_concurrency.py``
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rltui.config import PySpy
from rltui.model import OK, ProcInfo
from rltui.sources.stacks import StackSource

PROCESSES = 16
ROUNDS = 10
GOAL = 1.5

TARGET = """\
import os, time
def wait_here():
    os.write(1, b"ready\\n")
    while True:
        time.sleep(0.1)
wait_here()
"""


def py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return shutil.which("py-spy") or (str(beside) if os.access(beside, os.X_OK) else None)


def start_targets(n: int) -> list[subprocess.Popen]:
    procs = [subprocess.Popen([sys.executable, "-c", TARGET], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
             for _ in range(n)]
    for proc in procs:  # blocks until each one sits in wait_here
        if proc.stdout.readline() != b"ready\n":
            raise RuntimeError(f"target {proc.pid} did not start")
    return procs


def stop_targets(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def checked_poll(source: StackSource, n: int) -> None:
    reading = source.poll()
    assert reading.status == OK and len(reading.payload.dumps) == n, reading.message
    assert all(d.status == OK for d in reading.payload.dumps), reading.message


def children_cpu() -> float:
    """CPU seconds of the exited (waited-for) children so far: the py-spy processes."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def median_time(fn, rounds: int = ROUNDS) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class Bench:
    """One source over one process, one over all of them; both warmed up."""

    def __init__(self, path: str, pids: list[int]) -> None:
        settings = PySpy(path=path, max_concurrent=PROCESSES)
        infos = [ProcInfo(pid=pid, rank=rank) for rank, pid in enumerate(pids)]
        self.n = len(infos)
        self.one = StackSource(lambda: infos[:1], settings)
        self.all = StackSource(lambda: infos, settings)
        self.one_dump()
        self.round()

    def one_dump(self) -> None:
        checked_poll(self.one, 1)

    def round(self) -> None:
        checked_poll(self.all, self.n)

    def close(self) -> None:
        self.one.close()
        self.all.close()


@pytest.fixture(scope="module")
def bench():
    path = py_spy()
    if path is None:
        pytest.skip("py-spy is not installed")
    procs = start_targets(PROCESSES)
    b = Bench(path, [p.pid for p in procs])
    yield b
    b.close()
    stop_targets(procs)


def test_round_of_16_against_one_dump(benchmark, bench):
    cpu = children_cpu()
    one = median_time(bench.one_dump)
    per_dump = (children_cpu() - cpu) / ROUNDS
    benchmark.pedantic(bench.round, rounds=ROUNDS, iterations=1)
    round16 = benchmark.stats.stats.median
    benchmark.extra_info.update(one_dump_s=one, round_s=round16, ratio=round16 / one, goal=GOAL,
                                py_spy_cpu_s=per_dump, processes=PROCESSES, cpus=os.cpu_count())
    print("\n" + summary(one, round16, per_dump))


def summary(one: float, round16: float, per_dump: float) -> str:
    cpus = os.cpu_count() or 1
    return (f"one dump {one * 1000:.1f} ms, round of {PROCESSES} {round16 * 1000:.1f} ms, "
            f"ratio {round16 / one:.2f} (goal <= {GOAL}); py-spy CPU per dump "
            f"{per_dump * 1000:.1f} ms, so {cpus} CPUs cannot do the round in less than "
            f"{PROCESSES * per_dump / cpus * 1000:.0f} ms")


def main() -> None:
    path = py_spy()
    if path is None:
        sys.exit("py-spy is not installed")
    procs = start_targets(PROCESSES)
    try:
        b = Bench(path, [p.pid for p in procs])
        cpu = children_cpu()
        one = median_time(b.one_dump)
        per_dump = (children_cpu() - cpu) / ROUNDS
        round16 = median_time(b.round)
        b.close()
    finally:
        stop_targets(procs)
    print(summary(one, round16, per_dump))


if __name__ == "__main__":
    main()
