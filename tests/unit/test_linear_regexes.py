"""The regexes run on outside text stay linear on the runs that made them quadratic.

Each case feeds a parser a run of n and of 4n characters in the shape its regex expects and
compares this process's CPU time (time.process_time: other work shares the machine, so never
the wall clock): linear work grows about 4x, quadratic 16x. The assertion allows 8x, and a
floor keeps timer noise on tiny times from deciding. Each case failed before its fix (the
CUDA OOM parser took 0.37 s per regex on 3000 digits, a custom step regex 35 s on a 64 KB line).
"""

from __future__ import annotations

import time

import pytest

from rltui.parsing import distfail, oom, steps
from rltui.parsing.events import EventReader
from rltui.remote import hostlist


def _cpu(fn, arg) -> float:
    best = float("inf")
    for _ in range(3):  # the least of three: a preempted run only ever adds time
        start = time.process_time()
        fn(arg)
        best = min(best, time.process_time() - start)
    return best


def _events(line: str):
    reader = EventReader(completion_patterns=[r"(?P<a>\d+)/(?P<b>\d+) done"])
    return reader.feed(line, 1, 0.0) + reader.flush()


_CUSTOM = steps.compile_custom("mine", r"(?P<step>\d+)/(?P<total>\d+) loss=(?P<l>[-0-9.e]+)",
                               {"l": "loss"})

CASES = {
    # name: (parser, build(n) -> input)
    "CUDA OOM, current format, digit run": (
        oom.parse_cuda_oom,
        lambda n: "CUDA out of memory. GPU 0 has a total capacity of 1 GiB of which 1 GiB is "
                  "free. " + "1" * n),
    "CUDA OOM, old format, digit run": (
        oom.parse_cuda_oom,
        lambda n: "CUDA out of memory. Tried to allocate 2 MiB (GPU 0; 1 GiB total capacity; "
                  + "1" * n),
    "Ray OOM, digit run": (oom.parse_ray_oom, lambda n: "Memory on the node (IP: " + "1" * n),
    "NCCL watchdog, word run": (
        distfail.parse_watchdog,
        lambda n: "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=" + "a" * n + ")"),
    "event reader, spaces before a Ray repeat": (
        _events, lambda n: "(pid=1) x" + " " * n + "y [repeated 2x across cluster]"),
    "custom step regex, digit run": (lambda t: _CUSTOM.match(t, 1, 0.0), lambda n: "1" * n),
    "completion pattern, digit run": (_events, lambda n: "Training " + "1" * n),
    "hostlist compress, one long digit run": (hostlist.compress, lambda n: ["1" * n + "a"]),
    "hostlist compress, many hosts": (
        hostlist.compress, lambda n: [f"rack{i % 7}-node{i:05d}" for i in range(n // 10)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_four_times_the_input_is_about_four_times_the_work(name):
    parse, build = CASES[name]
    n = 4000
    small = _cpu(parse, build(n))
    large = _cpu(parse, build(4 * n))
    # Quadratic: 16x. Below 20 ms both are noise-sized; then only the floor is asserted.
    assert large < max(8 * small, 0.02), f"{name}: {small:.4f} s -> {large:.4f} s"


@pytest.mark.parametrize("name", list(CASES))
def test_a_long_run_is_cheap(name):
    parse, build = CASES[name]
    # 64K characters: before the fixes several of these took seconds to minutes.
    assert _cpu(parse, build(65536)) < 1.0, name
