"""Start-up time of the commands a user types first (targets: --help 0.3 s, diagnose --replay 1 s,
diagnose on a node without a job 0.25 s).

Run: python -m pytest tests/benchmarks/test_startup.py --benchmark-enable -s
Each round is a fresh interpreter, as a user's shell would start it.
"""

import importlib.util
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

import pytest

from rltui.model import GpuPoll, GpuSample, ProcInfo, ProcPoll, Reading
from rltui.sources.record import Recorder


def _run(*args):
    subprocess.run([sys.executable, "-m", "rltui", *args], check=False, capture_output=True)


def test_help_startup(benchmark):
    benchmark.pedantic(_run, args=("--help",), rounds=10, warmup_rounds=1)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """Ten minutes of an 8-GPU, 8-rank node at the default cadences (about 1,800 readings)."""
    path = tmp_path_factory.mktemp("rec") / "s"
    with Recorder(path, host="bench", job="bench") as rec:
        for i in range(1200):
            t = 1000.0 + i * 0.5
            rec.write(Reading("procs", t, "ok", ProcPoll(tuple(
                ProcInfo(pid=100 + r, rank=r, world_size=8, gpu_index=r, state="sleeping",
                         cpu_percent=99.0) for r in range(8)))))
            if i % 2 == 0:
                rec.write(Reading("gpus", t, "ok", GpuPoll(tuple(
                    GpuSample(index=g, name="H100", uuid=f"GPU-{g}", util=95.0,
                              mem_used=60 * 2**30, mem_total=80 * 2**30) for g in range(8)))))
    return path


def test_diagnose_replay_startup(benchmark, recording):
    benchmark.pedantic(_run, args=("diagnose", "--replay", str(recording), "--json"),
                       rounds=5, warmup_rounds=1)


EXIT_NO_JOB = 4
DIAGNOSE = [sys.executable, "-m", "rltui", "diagnose", "--duration", "0"]
# On a node where a training job runs (a shared machine), the same command told to look for a
# job no process has: the same work (every process scanned, no job found).
NO_SUCH_JOB = ["--match", "^rltui-benchmark-no-such-job$"]


def _timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the child, exit code) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    code = subprocess.run(cmd, check=False, capture_output=True, env=env).returncode
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, code


def _nvitop() -> list[str] | None:
    if importlib.util.find_spec("nvitop") is not None:
        return [sys.executable, "-m", "nvitop", "--help"]
    found = shutil.which("nvitop")
    return [found, "--help"] if found else None


def test_diagnose_no_job_startup(benchmark, tmp_path):
    """``rltui diagnose --duration 0`` on a node without a training job (target: 0.25 s wall),
    whole process. In the same run, round by round: ``python -c pass`` (the floor: an
    interpreter that does nothing) and ``nvitop --help`` (a peer's start-up) when installed.
    Wall and CPU time, min and median, go to extra_info and are printed (-s)."""
    # Is there a job? Asked with py-spy rounds off, so that a job found is not dumped.
    config = tmp_path / "no-pyspy.yaml"
    config.write_text("pyspy:\n  interval: 0\n")
    diagnose = DIAGNOSE
    if _timed(diagnose, {**os.environ, "RLTUI_CONFIG": str(config)})[2] != EXIT_NO_JOB:
        diagnose = DIAGNOSE + NO_SUCH_JOB
        assert _timed(diagnose)[2] == EXIT_NO_JOB
    name = " ".join(["rltui", *diagnose[3:]])
    peers = {"python -c pass": [sys.executable, "-c", "pass"]}
    nvitop = _nvitop()
    if nvitop is not None:
        peers["nvitop --help"] = nvitop
    series: dict[str, list[tuple[float, float]]] = {name: []}
    series.update({peer: [] for peer in peers})

    def peers_first():  # not timed by the benchmark; interleaved with the rounds it times
        for peer, cmd in peers.items():
            series[peer].append(_timed(cmd)[:2])
        return (), {}

    def one_diagnose():
        wall, cpu, code = _timed(diagnose)
        assert code == EXIT_NO_JOB
        series[name].append((wall, cpu))

    benchmark.pedantic(one_diagnose, setup=peers_first, rounds=15, warmup_rounds=1)
    lines = []
    for what, runs in series.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        values = {"wall_min_s": min(walls), "wall_median_s": statistics.median(walls),
                  "cpu_min_s": min(cpus), "cpu_median_s": statistics.median(cpus)}
        benchmark.extra_info[what] = values
        lines.append(f"{what}: " + ", ".join(f"{k}={v:.3f}" for k, v in values.items()))
    if nvitop is None:
        benchmark.extra_info["nvitop --help"] = "skipped: nvitop is not installed"
        lines.append("nvitop --help: skipped (nvitop is not installed)")
    print("\n" + "\n".join(lines))
