"""Start-up time of the commands a user types first (targets: --help 0.3 s, diagnose --replay 1 s).

Run: python -m pytest tests/benchmarks/test_startup.py --benchmark-enable
Each round is a fresh interpreter, as a user's shell would start it.
"""

import subprocess
import sys

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
