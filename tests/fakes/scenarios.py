"""Deterministic scenario folders for UI tests, snapshots and benchmarks.

Each builder writes a scenario with ``rltui.sources.record.Recorder`` (the format ``rltui
replay`` reads) from readings whose times and values are pure functions of the arguments, so
the same builder always draws the same screen. ``bundle(path)`` turns a folder into a replay
bundle for the app.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from rltui.model import (
    OK,
    UNAVAILABLE,
    GpuPoll,
    GpuProcess,
    GpuSample,
    LogEvent,
    LogLine,
    LogPoll,
    LogUpdate,
    ProcInfo,
    ProcPoll,
    Reading,
    StepRecord,
    replace,
)
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


def many_ranks(path: str | Path, ranks: int, gpus: int = 8, duration: float = 60.0,
               exit_at: int = 20) -> Path:
    """``ranks`` ranks on ``gpus`` GPUs (several per GPU), built like rank_exited: at
    ``exit_at`` the last rank of GPU 1 exits; the ranks of GPUs 0-1 then wait with their GPUs
    idle while the others spin at 100%: rank-exited and gpu-idle-vs-busy."""
    per_gpu = max(1, ranks // gpus)
    exited = 2 * per_gpu - 1

    def alive(s: int) -> list[int]:
        return [r for r in range(ranks) if s < exit_at or r != exited]

    def util(i: int, s: int) -> float:
        if s < exit_at:
            return busy_util(i, s)
        return float(s % 2) if i < 2 else 100.0

    def g(s: int) -> Reading:
        return _gpus_ok(s, tuple(gpu(i, util(i, s), 61.0 + i * 2.4,
                                     pids=tuple(4100 + r for r in alive(s) if r // per_gpu == i))
                                 for i in range(gpus)))

    def p(s: int) -> Reading:
        return _procs_ok(s, tuple(proc(r, world=ranks, gpu_index=r // per_gpu,
                                       cpu=100.0 if s >= exit_at else 97.0,
                                       state="sleeping" if s >= exit_at and r // per_gpu < 2
                                       else "running") for r in alive(s)))

    return write(path, _timeline(duration, g, p),
                 job=f"torchrun --nproc-per-node {ranks} train_ppo.py",
                 description=f"{ranks} ranks on {gpus} GPUs; rank {exited} exits at "
                             f"{exit_at} s; GPUs 0-1 idle, the others busy")


def ranks4(path: str | Path) -> Path:
    """4 ranks on 4 GPUs, rank 1 exits (many_ranks)."""
    return many_ranks(path, 4, gpus=4)


def ranks16(path: str | Path) -> Path:
    """16 ranks on 8 GPUs, rank 3 exits (many_ranks)."""
    return many_ranks(path, 16)


def ranks64(path: str | Path) -> Path:
    """64 ranks on 8 GPUs, rank 15 exits (many_ranks)."""
    return many_ranks(path, 64)


def two_jobs(path: str | Path, duration: float = 40.0, exit_at: int = 20) -> Path:
    """Two 4-GPU jobs on one 8-GPU node, both with ranks 0-3: "train_ppo" (torchrun 4000,
    ranks 4100-4103 on GPUs 0-3, rendezvous 127.0.0.1:29500) whose rank 2 exits at
    ``exit_at``, and "eval" (torchrun 5000, ranks 5100-5103 on GPUs 4-7, 127.0.0.1:29501),
    healthy throughout."""

    def ranked(base: int, rank: int, port: int, role: str, gpu_index: int,
               cpu: float) -> ProcInfo:
        return replace(proc(rank, pid_base=base, world=4, gpu_index=gpu_index, cpu=cpu,
                            role=role), ppid=base - 100,
                       cmdline=("python", f"{role}.py", "--config", f"{role}.yaml"),
                       job_env=(("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(port)),
                                ("TORCHELASTIC_RUN_ID", "none")))

    def launcher(pid: int, role: str) -> ProcInfo:
        return ProcInfo(pid=pid, ppid=1, name="torchrun", role="torchrun", launcher="torchrun",
                        cmdline=("python", "/usr/bin/torchrun", "--nproc-per-node", "4",
                                 f"{role}.py"), cpu_percent=0.5, state="sleeping",
                        create_time=T0 - 610.0)

    def g(s: int) -> Reading:
        def util(i: int) -> float:
            if i >= 4 or s < exit_at:
                return busy_util(i, s)
            return float(s % 2)  # ranks 0, 1, 3 wait for rank 2
        return _gpus_ok(s, tuple(gpu(i, util(i), 61.0 + i * 0.4,
                                     pids=((4100 + i,) if i < 4 else (5100 + i - 4,))
                                     if i != 2 or s < exit_at else ())
                                 for i in range(8)))

    def p(s: int) -> Reading:
        ppo = [ranked(4100, r, 29500, "train_ppo", r, 97.0) for r in range(4)
               if r != 2 or s < exit_at]
        evl = [ranked(5100, r, 29501, "eval", 4 + r, 95.0 + r) for r in range(4)]
        return _procs_ok(s, (launcher(4000, "train_ppo"), *ppo, launcher(5000, "eval"), *evl))

    return write(path, _timeline(duration, g, p), job="env RANK/LOCAL_RANK",
                 description="two jobs on one node: train_ppo's rank 2 exits, eval is healthy")


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


# -- logs -----------------------------------------------------------------------------------------
LOG_DIR = "/jobs/ppo-7/logs"
WAITING_GLOB = f"{LOG_DIR}/critic-*.log"
TOTAL_STEPS = 100


class _LogFile:
    """One file's lines as a job writes them: numbered, with the parsers' steps and events."""

    def __init__(self, path: str, rank: int | None = None, pid: int | None = None) -> None:
        self.path, self.rank, self.pid = path, rank, pid
        self.line_no = 0
        self.lines: list[LogLine] = []
        self.steps: list[StepRecord] = []
        self.events: list[LogEvent] = []

    def write(self, text: str, level: str = "", cut: bool = False) -> int:
        self.line_no += 1
        self.lines.append(LogLine(self.line_no, text, level=level, cut=cut))
        return self.line_no

    def update(self) -> LogUpdate:
        out = LogUpdate(path=self.path, status=OK, rank=self.rank, pid=self.pid, format="verl",
                        lines=tuple(self.lines), steps=tuple(self.steps),
                        events=tuple(self.events))
        self.lines, self.steps, self.events = [], [], []
        return out


def step_seconds(step: int, rank: int) -> float:
    """A rank's time for one step: about 4-5 s, with a slow step 6 (a long rollout)."""
    return 4.0 + 0.3 * ((step + rank) % 3) + (3.5 if step == 6 else 0.0)


def _step_line(step: int, rank: int, seconds: float) -> tuple[str, float]:
    loss = 0.4 / (1 + step * 0.1) + rank * 0.001
    return (f"step:{step} - actor/pg_loss:{loss:.4f} - actor/entropy:{1.2 - step * 0.02:.3f} "
            f"- critic/score/mean:{0.2 + step * 0.03:.3f} - response_length/mean:"
            f"{400 + step * 3 + rank:.1f} - timing_s/step:{seconds:.2f} - perf/throughput:"
            f"{2900 - step * 7 - rank * 11:.1f}"), loss


TRACEBACK = (
    ("Traceback (most recent call last):", "error"),
    ('  File "/workspace/verl/workers/fsdp_workers.py", line 598, in update_actor', ""),
    ("    metrics = self.actor.update_policy(data=data)", ""),
    ('  File "/workspace/verl/workers/actor/dp_actor.py", line 331, in update_policy', ""),
    ("    loss.backward()", ""),
    ("RuntimeError: NCCL communicator was aborted on rank 3. Original reason for failure was: "
     "NCCL error: unhandled system error", "error"),
)
OOM_LINE = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has a "
            "total capacity of 79.10 GiB of which 1.05 GiB is free.")


def with_logs(path: str | Path, duration: float = 60.0, crash_at: int = 40,
              exit_at: int = 42, hang_at: int = 44,
              cmdline: tuple[str, ...] | None = None) -> Path:
    """4 ranks writing verl step lines (100 steps in all) to their stdout files, and a driver
    log. Rank 1 warns and writes an over-long (cut) line, rank 2 hits a CUDA OOM at 30 s and
    retries, rank 3 dies with a traceback at ``crash_at`` and exits at ``exit_at``; the others
    stop stepping at ``hang_at`` (waiting for it). A --log glob never matches.

    The files reach ranks in every way the UI matches them: ranks 0-1 by the log source's
    rank, rank 2 by the writing pid, rank 3 by its stdout path; the driver log by none."""
    files = [_LogFile(f"{LOG_DIR}/rank0.log", rank=0, pid=4100),
             _LogFile(f"{LOG_DIR}/rank1.log", rank=1, pid=4101),
             _LogFile(f"{LOG_DIR}/rank2.log", pid=4102),
             _LogFile(f"{LOG_DIR}/rank3.log")]
    driver = _LogFile(f"{LOG_DIR}/driver.log")
    next_step = {r: (1, 2.0 + step_seconds(1, r)) for r in range(4)}  # step, when it ends
    readings: list[Reading] = []

    for s in range(int(duration) + 1):
        readings.append(_gpus_ok(s, tuple(
            gpu(i, busy_util(i, s) if s < exit_at else float(s % 2), pids=(4100 + i,))
            for i in range(4))))
        if s >= duration:
            break
        alive = [r for r in range(4) if r != 3 or s < exit_at]
        readings.append(_procs_ok(s, tuple(
            replace(proc(r, world=4), stdout_path=f"{LOG_DIR}/rank{r}.log",
                    stderr_path=f"{LOG_DIR}/rank{r}.log",
                    cmdline=cmdline or proc(r).cmdline) for r in alive)))
        now = T0 + s + 0.25
        if s == 0:
            driver.write("INFO 2023-11-14 22:13:20,104 verl.trainer.main_ppo: config ppo.yaml, "
                         f"total_training_steps={TOTAL_STEPS}")
            driver.write("INFO 2023-11-14 22:13:20,311 verl.trainer.main_ppo: starting 4 workers")
            for f in files:
                f.write(f"INFO rank {files.index(f)}: model loaded in 41.2s")
        if s == 5:
            files[0].write("/workspace/verl/utils/torch_functional.py:88: UserWarning: To copy "
                           "construct from a tensor, use sourceTensor.clone().detach()",
                           "warning")
        if s == 10:
            files[1].write("WARNING: grad_norm 14.2 exceeds the clip of 1.0; clipping",
                           "warning")
        if s == 12:
            files[1].write("INFO sample response: " + "the answer is 42, " * 20, cut=True)
        if s == 30:
            n = files[2].write(OOM_LINE, "error")
            files[2].events.append(LogEvent(
                "cuda-oom", n, n, now, "CUDA out of memory: tried to allocate 2.00 GiB on GPU 2",
                OOM_LINE, fields=(("requested", 2 * GIB), ("free", int(1.05 * GIB)),
                                  ("capacity", int(79.1 * GIB)), ("gpu", 2))))
            files[2].write("WARNING: retrying micro-batch 3 with half the batch size",
                           "warning")
        if s == crash_at:
            first = files[3].line_no + 1
            for text, level in TRACEBACK:
                files[3].write(text, level)
            files[3].events.append(LogEvent("traceback", first, files[3].line_no, now,
                                            TRACEBACK[-1][0][:60],
                                            "\n".join(t for t, _ in TRACEBACK)))
        for r, f in enumerate(files):
            stop = crash_at if r == 3 else hang_at
            if (s + r) % 2 == 0 and s < stop:
                f.write(f"(rollout) generated 256 sequences in {1.8 + r * 0.1:.1f}s, mean "
                        f"response length {400 + s}")
            step, ends = next_step[r]
            while ends <= s + 0.25 and ends < stop:
                text, loss = _step_line(step, r, step_seconds(step, r))
                n = f.write(text)
                f.steps.append(StepRecord(step, n, now, time=T0 + ends, total=TOTAL_STEPS,
                                          metrics=(("loss", loss),
                                                   ("step_time", step_seconds(step, r)))))
                step += 1
                ends += step_seconds(step, r)
            next_step[r] = (step, ends)
        updates = tuple(f.update() for i, f in enumerate(files) if i != 3 or s < exit_at)
        updates += (driver.update(),)
        readings.append(Reading("logs", now, OK, LogPoll(files=updates,
                                                         unmatched=(WAITING_GLOB,))))
    return write(path, readings, job="python -m verl.trainer.main_ppo",
                 description="4 ranks with logs: OOM on rank 2, traceback on rank 3",
                 intervals={"gpus": 1.0, "procs": 1.0, "logs": 1.0})


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
VERL_CONFIG = FIXTURES / "configs" / "verl"
QWEN2_7B = FIXTURES / "models" / "qwen2-7b"


def verl_cmdline(model: str | Path = QWEN2_7B) -> tuple[str, ...]:
    """The verl GRPO command line of fixtures/configs/verl/cmdline.txt, its --config-path made
    absolute (the fixture's folder) and its model path ``model`` (a local folder with the
    model's config.json, as a job that loads its weights from disk names it)."""
    import shlex
    text = (VERL_CONFIG / "cmdline.txt").read_text().replace("\\\n", " ")
    out = []
    for arg in shlex.split(text):
        if arg.startswith("--config-path="):
            arg = f"--config-path={VERL_CONFIG}"
        elif arg.startswith("actor_rollout_ref.model.path="):
            arg = f"actor_rollout_ref.model.path={model}"
        out.append(arg)
    return tuple(out)


def with_logs_verl(path: str | Path) -> Path:
    """``with_logs`` whose ranks run the verl command line of ``verl_cmdline``: the OOM of
    rank 2 is triaged against that config (found from the command line) and the model's
    config.json its model path names."""
    return with_logs(path, cmdline=verl_cmdline())


def with_logs_stalled(path: str | Path) -> Path:
    """``with_logs`` played on to 120 s: rank 3 died at 40 s and left at 42 s, ranks 0-2 logged
    their last step about 44 s in and have waited since, past the steps-stalled limit (60 s):
    the timeline's "who stopped first" case."""
    return with_logs(path, duration=120.0)


def logs_waiting(path: str | Path, duration: float = 10.0) -> Path:
    """4 ranks whose stdout is not a file, and a --log glob that matches nothing yet."""

    def g(s: int) -> Reading:
        return _gpus_ok(s, tuple(gpu(i, busy_util(i, s), pids=(4100 + i,)) for i in range(4)))

    def p(s: int) -> Reading:
        return _procs_ok(s, tuple(proc(r, world=4) for r in range(4)))

    readings = _timeline(duration, g, p)
    readings += [Reading("logs", T0 + s + 0.25, OK, LogPoll(unmatched=(f"{LOG_DIR}/*.log",)))
                 for s in range(int(duration))]
    return write(path, readings, job="torchrun --nproc-per-node 4 train.py",
                 description="no log files yet",
                 intervals={"gpus": 1.0, "procs": 1.0, "logs": 1.0})


# -- stacks ----------------------------------------------------------------------------------------

STACK_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "stacks"


def saved_dumps(folder: str) -> tuple:
    """The real saved py-spy dumps of ``fixtures/stacks/FOLDER``, ranks from the file names."""
    from rltui.sources.dumpfolder import read_dump_folder
    dumps, _ = read_dump_folder(str(STACK_FIXTURES / folder), rank_of_pid=lambda pid: None)
    return tuple(dumps)


def cleanup_deadlock_with_stacks(path: str | Path, duration: float = 40.0,
                                 rounds: tuple[int, ...] = (10, 20, 30)) -> Path:
    """3 ranks of a pipeline job, GPUs idle: ranks 0-1 wait in recv_object_list inside the
    loop while rank 2 sits in destroy_process_group reached from Trainer.__exit__ (pattern A).
    py-spy rounds (the real dumps of fixtures/stacks/cleanup-deadlock) every 10 s from 10 s,
    each the same: the classes are stuck from the second round on."""
    from rltui.model import StackPoll
    dumps = saved_dumps("cleanup-deadlock")
    pids = {d.rank: d.pid for d in dumps}

    def g(s: int) -> Reading:
        return _gpus_ok(s, tuple(gpu(i, float(s % 2), 40.0 + i, pids=(pids[i],))
                                 for i in range(3)))

    def p(s: int) -> Reading:
        return _procs_ok(s, tuple(proc(r, pid_base=0, world=3, gpu_index=r, cpu=0.0,
                                       state="sleeping") for r in range(3)))

    readings = _timeline(duration, g, lambda s: replace(
        p(s), payload=ProcPoll(procs=tuple(replace(x, pid=pids[x.rank])
                                           for x in p(s).payload.procs),
                               how="env RANK/LOCAL_RANK")))
    for t in rounds:
        readings.append(Reading("stacks", T0 + t + 0.7, OK, StackPoll(
            dumps=dumps, started=T0 + t + 0.2, finished=T0 + t + 0.7,
            command="py-spy dump --pid {pid} --json --nonblocking")))
    return write(path, readings, job="torchrun --nproc-per-node 3 train_pipe.py",
                 description="pattern A: ranks 0-1 in recv_object_list, rank 2 in "
                             "destroy_process_group from __exit__",
                 intervals={"gpus": 1.0, "procs": 1.0, "stacks": 10.0})
