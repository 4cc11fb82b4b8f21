"""Deterministic scenario folders for UI tests, snapshots and benchmarks.

Each builder writes a scenario with ``rltui.sources.record.Recorder`` (the format ``rltui
replay`` reads) from readings whose times and values are pure functions of the arguments, so
the same builder always draws the same screen. ``bundle(path)`` turns a folder into a replay
bundle for the app.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

from rltui.model import (OK, UNAVAILABLE, GpuPoll, GpuProcess, GpuSample, ProcInfo, ProcPoll,
                         Reading)
from rltui.sources import replay
from rltui.sources.bundle import Bundle, replay_bundle
from rltui.sources.record import Recorder

T0 = 1_700_000_000.0  # scenario start (POSIX seconds); any fixed value will do
GIB = 1024**3
HOST = "gpu-node-07"
GPU_NAME = "NVIDIA H100 80GB HBM3"
NO_NVML = "No NVIDIA driver or NVML library found: GPU data unavailable"
NO_NVML_REMEDY = ("Install the NVIDIA driver (it provides libnvidia-ml.so) or run rltui on a GPU "
                  "node; process checks keep working.")


def gpu(index: int, util: float, mem_gib: float = 62.0, *, pids: tuple[int, ...] = (),
        foreign: bool = False) -> GpuSample:
    return GpuSample(
        index=index, name=GPU_NAME, uuid=f"GPU-{index:08d}-0000-0000-0000-000000000000",
        util=util, mem_util=util * 0.6, mem_used=int(mem_gib * GIB), mem_total=80 * GIB,
        power_w=90.0 + 6.0 * util, power_limit_w=700.0, temperature_c=38.0 + util * 0.3,
        sm_clock_mhz=1980 if util > 5 else 345, throttle_reasons=(), ecc_errors=0,
        processes=tuple(GpuProcess(pid=p, used_memory=int(mem_gib * GIB), local=not foreign)
                        for p in pids),
    )


def proc(rank: int, *, pid_base: int = 4100, world: int = 8, gpu_index: int | None = None,
         cpu: float = 98.0, state: str = "running", role: str = "trainer",
         gpu_from: str = "nvml", partial: bool = False, partial_reason: str = "") -> ProcInfo:
    return ProcInfo(
        pid=pid_base + rank, ppid=4000, name="python",
        cmdline=("python", "train.py", "--config", "ppo.yaml"), rank=rank, local_rank=rank,
        world_size=world, local_world_size=world, role=role, cpu_percent=cpu,
        rss=int(12.5 * GIB), state=state, num_threads=96, create_time=T0 - 600.0,
        gpu_index=rank if gpu_index is None else gpu_index, gpu_from=gpu_from,
        partial=partial, partial_reason=partial_reason,
    )


def busy_util(index: int, second: int) -> float:
    """A deterministic busy utilisation in 90-99%."""
    return 90.0 + (index * 7 + second * 13) % 10


def write(path: str | Path, readings: list[Reading], *, job: str, description: str,
          intervals: dict[str, float] | None = None, host: str = HOST) -> Path:
    with Recorder(path, host=host, job=job, description=description,
                  intervals=intervals or {"gpus": 1.0, "procs": 1.0}) as rec:
        for r in sorted(readings, key=lambda r: r.timestamp):
            rec.write(r)
    return Path(path)


def bundle(path: str | Path, speed: float = 1.0) -> Bundle:
    return replay_bundle(replay.load(path), speed=speed)


def _timeline(duration: float, gpus: Callable[[int], Reading],
              procs: Callable[[int], Reading]) -> list[Reading]:
    """GPU readings on whole seconds, process scans half a second later (their own cadence)."""
    out = []
    for second in range(int(duration) + 1):
        out.append(gpus(second))
        if second < duration:
            out.append(procs(second))
    return out


def _gpus_ok(second: int, samples: tuple[GpuSample, ...], foreign: tuple[int, ...] = ()
             ) -> Reading:
    return Reading("gpus", T0 + second, OK, GpuPoll(gpus=samples, driver_version="550.54.15",
                                                    foreign_pids=foreign))


def _procs_ok(second: int, procs: tuple[ProcInfo, ...]) -> Reading:
    return Reading("procs", T0 + second + 0.5, OK,
                   ProcPoll(procs=procs, how="env RANK/LOCAL_RANK"))


def healthy(path: str | Path, gpus: int = 8, ranks: int = 8, duration: float = 60.0) -> Path:
    """Every rank running on its own GPU, every GPU busy: no symptoms."""
    per_gpu = max(1, ranks // gpus)

    def g(s: int) -> Reading:
        return _gpus_ok(s, tuple(gpu(i, busy_util(i, s), 60.0 + (i % 8) * 0.5,
                                     pids=tuple(4100 + r for r in range(ranks)
                                                if r // per_gpu == i))
                                 for i in range(gpus)))

    def p(s: int) -> Reading:
        return _procs_ok(s, tuple(proc(r, world=ranks, gpu_index=r // per_gpu,
                                       cpu=95.0 + (r + s) % 5) for r in range(ranks)))

    return write(path, _timeline(duration, g, p), job=f"torchrun --nproc-per-node {ranks} "
                 "train.py", description=f"healthy: {gpus} GPUs, {ranks} ranks")


def rank_exited(path: str | Path, duration: float = 90.0, exit_at: int = 20,
                exited: int = 3) -> Path:
    """8 ranks; at ``exit_at`` rank 3 exits. Ranks 0-2 then wait in a collective with their
    GPUs idle while ranks 4-7 spin at 100%: rank-exited and gpu-idle-vs-busy."""

    def util(i: int, s: int) -> float:
        if s < exit_at:
            return busy_util(i, s)
        return 100.0 if i > exited else float(s % 2)  # 0-1% idle, waiting

    def g(s: int) -> Reading:
        alive = [r for r in range(8) if s < exit_at or r != exited]
        return _gpus_ok(s, tuple(gpu(i, util(i, s), 61.0 + i * 0.4,
                                     pids=(4100 + i,) if i in alive else ())
                                 for i in range(8)))

    def p(s: int) -> Reading:
        ranks = [r for r in range(8) if s < exit_at or r != exited]
        return _procs_ok(s, tuple(proc(r, cpu=100.0 if s >= exit_at else 97.0,
                                       state="running" if s < exit_at or r > exited
                                       else "sleeping") for r in ranks))

    return write(path, _timeline(duration, g, p),
                 job="torchrun --nproc-per-node 8 train_ppo.py",
                 description="rank 3 exits at 20 s; ranks 0-2 idle, 4-7 busy")


def nvml_unavailable(path: str | Path, duration: float = 30.0, ranks: int = 4) -> Path:
    """No NVIDIA driver: every GPU poll is unavailable; the processes are still seen."""

    def g(s: int) -> Reading:
        return Reading("gpus", T0 + s, UNAVAILABLE, None, NO_NVML, NO_NVML_REMEDY)

    def p(s: int) -> Reading:
        return _procs_ok(s, tuple(proc(r, world=ranks, gpu_from="env", cpu=60.0 + r)
                                  for r in range(ranks)))

    return write(path, _timeline(duration, g, p), job="torchrun --nproc-per-node 4 train.py",
                 description="NVML unavailable")


def container_pidns(path: str | Path, duration: float = 30.0) -> Path:
    """NVML sees host PIDs that do not exist in this PID namespace; one rank is partly
    readable."""
    foreign = tuple(812_340 + i for i in range(4))

    def g(s: int) -> Reading:
        return _gpus_ok(s, tuple(gpu(i, busy_util(i, s), pids=(foreign[i],), foreign=True)
                                 for i in range(4)), foreign=foreign)

    def p(s: int) -> Reading:
        return _procs_ok(s, tuple(
            proc(r, pid_base=40, world=4, gpu_from="env", partial=r == 2,
                 partial_reason="environ unreadable (permission denied)" if r == 2 else "")
            for r in range(4)))

    return write(path, _timeline(duration, g, p), job="python -m verl.trainer.main_ppo",
                 description="job in another PID namespace")


def big_readings(gpus: int = 64, ranks: int = 512, duration: int = 10) -> Iterator[Reading]:
    per_gpu = ranks // gpus
    for s in range(duration + 1):
        yield _gpus_ok(s, tuple(gpu(i, busy_util(i, s), 50.0 + (i + s) % 20) for i in range(gpus)))
        yield _procs_ok(s, tuple(proc(r, pid_base=10_000, world=ranks, gpu_index=r // per_gpu,
                                      cpu=50.0 + (r * 3 + s * 7) % 50) for r in range(ranks)))


def big(path: str | Path, gpus: int = 64, ranks: int = 512, duration: int = 10) -> Path:
    """64 GPUs x 512 ranks for the UI update benchmark."""
    return write(path, list(big_readings(gpus, ranks, duration)), job="verl ppo (512 ranks)",
                 description=f"{gpus} GPUs, {ranks} ranks")
