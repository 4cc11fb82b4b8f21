"""Simulated GPUs for the demo job: one per rank, driven by the phases the ranks publish.

A rank that computes shows 85-100 % utilisation; one that waits on its peers, sits in cleanup or
has finished shows 0-2 %, like a real hung rank whose GPU has nothing queued. Memory is what the
rank last published while its process lives and 0 once it is gone, and the GPU lists the rank's
pid only while it runs. The jitter is a function of rank and wall-clock second, so consecutive
polls vary a little but tests are reproducible. Every sample says ``simulated=True``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from rltui.model import OK, GpuPoll, GpuProcess, GpuSample, Reading
from rltui.sources.base import reading

MiB = 1 << 20
MEM_TOTAL = 81559 * MiB  # what an 80 GB H100 reports
POWER_LIMIT_W = 700.0
NAME = "Simulated GPU (demo)"


class DemoJobLike(Protocol):
    ranks: int

    def rank_pids(self) -> dict[int, int]: ...

    def exit_codes(self) -> dict[int, int | None]: ...

    def rank_state(self, rank: int) -> dict[str, Any] | None: ...


def _jitter(rank: int, tick: int) -> float:
    """A deterministic value in [0, 1] that changes every second, differently per rank."""
    return ((rank + 1) * 2654435761 + tick * 40503) % 1000 / 999.0


class SimGpuSource:
    name = "gpus"

    def __init__(self, job: DemoJobLike, clock: Callable[[], float] = time.time):
        self.job = job
        self.clock = clock

    def _live(self) -> dict[int, int]:
        """rank -> pid for the ranks whose process still runs."""
        codes = self.job.exit_codes()
        return {rank: pid for rank, pid in self.job.rank_pids().items()
                if codes.get(rank) is None}

    def gpu_pid_map(self) -> dict[int, int]:
        """pid -> GPU index, like the NVML source (single node: GPU index = local rank)."""
        return {pid: rank for rank, pid in self._live().items()}

    def poll(self) -> Reading:
        now = self.clock()
        live = self._live()
        gpus = tuple(self._sample(rank, live.get(rank), int(now))
                     for rank in range(self.job.ranks))
        return reading(self.name, OK, GpuPoll(gpus=gpus, driver_version=None, simulated=True),
                       clock=lambda: now)

    def _sample(self, rank: int, pid: int | None, tick: int) -> GpuSample:
        state = self.job.rank_state(rank) if pid is not None else None
        state = state or {}
        busy = pid is not None and state.get("phase") == "compute"
        j = _jitter(rank, tick)
        util = 85.0 + 15.0 * j if busy else 2.0 * j
        mem = 0
        if pid is not None:
            try:
                mem = max(0, min(int(state.get("mem_bytes", 0)), MEM_TOTAL))
            except (TypeError, ValueError):
                mem = 0  # a state file from an odd writer: show nothing rather than fail
        return GpuSample(
            index=rank,
            name=NAME,
            uuid=f"GPU-sim-{rank}",
            util=round(util, 1),
            mem_util=round(util * 0.55, 1),
            mem_used=mem,
            mem_total=MEM_TOTAL,
            power_w=round(70.0 + 6.0 * util + 10.0 * j, 1),
            power_limit_w=POWER_LIMIT_W,
            temperature_c=round(34.0 + 0.4 * util + 2.0 * j, 1),
            sm_clock_mhz=1980 if busy else 345,
            throttle_reasons=(),
            ecc_errors=0,
            processes=(GpuProcess(pid=pid, used_memory=mem),) if pid is not None else (),
            simulated=True,
        )

    def close(self) -> None:
        pass  # the source owns nothing; the job is stopped by whoever started it
