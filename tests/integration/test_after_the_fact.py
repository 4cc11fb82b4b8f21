"""Arriving after the fact: a rank died before rltui started (the 3 a.m. case). rltui must find
the dead rank's log anyway, read its traceback, and say how and when it left, from the files'
own evidence, not from when rltui started.

* a plain job whose ranks write ``> <name>-rankN.log`` (stderr), the last rank crashed with a
  traceback while the others wait for it in all_reduce; its orphaned helper process (forked
  before it died, holding its sockets, with RANK in its environment) still runs;
* torchrun with ``--log-dir`` and ``--redirects``: a rank raised, torchrun stopped the job and
  printed its failure summary; what is left is the log folder and the launcher's output;
* the same crash launched by hand from a shell, ``for i in 0 1 2; do RANK=$i ... python
  crash_early.py > logs/rank$i.log 2>&1 & done``: no launcher, no LOCAL_WORLD_SIZE, or the
  shell gone and every process re-parented to init, its helper included.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.integration.test_torch_hangs import (  # noqa: F401 - fixtures
    DEADLINE,
    JOBS,
    LIFETIME,
    TorchJob,
    free_port,
    needs_torch,
    pyspy_can_attach,
    wait_for_frame,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def rltui(*args: str, timeout: float = 90) -> tuple[int, dict, str]:
    out = subprocess.run([sys.executable, "-m", "rltui", *args], capture_output=True, text=True,
                         timeout=timeout, check=False)
    return out.returncode, json.loads(out.stdout), out.stderr


class SingleNodeJob(TorchJob):
    """torchrun's variables on one node, LOCAL_WORLD_SIZE included."""

    def rank_env(self, rank: int, port: str) -> dict[str, str]:
        return dict(super().rank_env(rank, port), LOCAL_WORLD_SIZE=str(self.world))


@needs_torch
def test_a_rank_that_crashed_before_rltui_started_is_found_with_its_log(request, tmp_path):
    job = SingleNodeJob("crash_early.py", 3, (), tmp_path)
    request.addfinalizer(job.stop)
    job.start()
    job.ready({0: "all_reduce", 1: "all_reduce"})
    for r in (0, 1):
        wait_for_frame(job.pid(r), "all_reduce")
    assert job.procs[2].wait(timeout=60) == 1  # gone before rltui looks
    crashed_at = os.stat(tmp_path / "crash_early-rank2.log").st_mtime

    code, doc, stderr = rltui("diagnose", "--json", "--match", "torchjobs/crash_early")
    # this job's own (a helper left by another run of the script would be a job of its own)
    (ours,) = [j for j in doc["jobs"] if job.pid(0) in j["pids"]]
    (exited,) = [s for s in doc["symptoms"] if s["id"] == "rank-exited"
                 and s["job"] == ours["id"]]
    assert exited["ranks"] == [2] and exited["severity"] == "critical", stderr
    # what happened, from its own log: the exception, where, and when it left
    assert exited["title"].startswith("rank 2 crashed (RuntimeError at crash_early.py:"), exited
    text = "\n".join(exited["evidence"])
    assert "crash_early-rank2.log" in text and "beside rank" in text, text
    (gone,) = [d for d in doc["departed"] if d["rank"] == 2 and d["job"] == ours["id"]]
    assert gone["error"].startswith("RuntimeError: CUDA error"), gone
    assert abs(gone["left_at"] - crashed_at) < 2.0, (gone, crashed_at)
    # its age counts from when it left, not from when rltui started
    assert exited["since"] <= crashed_at + 1.0
    (log,) = [g for g in doc["logs"] if g["path"] == str(tmp_path / "crash_early-rank2.log")]
    assert log["rank"] == 2 and log["found"]
    # the orphaned helper with RANK=2 in its environment is not rank 2 alive
    assert 2 not in {r["rank"] for r in doc["ranks"] if r["state"] != "zombie"
                     and r["job"] == ours["id"]}, doc["ranks"]
    assert ours["ranks"] == [0, 1] and ours["world_size"] == 3
    assert code == 1


# How people start a job without a launcher: one shell line, a log per rank. The shell records
# each rank's pid for the test only. "waits": the shell stays (it waits for its ranks), no
# LOCAL_WORLD_SIZE, only stderr in the log, in a folder named after the job. "gone": the line as
# given, LOCAL_WORLD_SIZE included, from a shell that has exited: every process is init's.
HAND_LAUNCHED = {
    "waits": ("mkdir -p logs-crash_early; for i in 0 1 2; do RANK=$i WORLD_SIZE=3 LOCAL_RANK=$i "
              "MASTER_ADDR=127.0.0.1 MASTER_PORT={port} {python} {script} "
              "2> logs-crash_early/rank$i.log & echo $! > pids/$i; done; wait",
              "logs-crash_early"),
    "gone": ("mkdir -p logs; for i in 0 1 2; do RANK=$i WORLD_SIZE=3 LOCAL_RANK=$i "
             "LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT={port} {python} {script} "
             "> logs/rank$i.log 2>&1 & echo $! > pids/$i; done",
             "logs"),
}


def _pid_of(path: Path) -> int:
    """The pid the shell wrote for a rank (it writes it as soon as it starts the rank)."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if text.endswith("\n") and text.strip().isdigit():  # the whole line, not a part
            return int(text)
        time.sleep(0.05)
    pytest.fail(f"the shell never wrote {path}")


@needs_torch
@pytest.mark.parametrize("shell", sorted(HAND_LAUNCHED))
def test_a_hand_launched_job_s_crashed_rank_is_found_with_its_log(request, tmp_path, shell):
    line, folder = HAND_LAUNCHED[shell]
    (tmp_path / "pids").mkdir()
    env = dict(os.environ, TORCHJOB_LIFETIME=str(LIFETIME), OMP_NUM_THREADS="1",
               PYTHONWARNINGS="ignore", PYTHONUNBUFFERED="1")
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "TORCHJOB_PARENT"):
        env.pop(key, None)
    with open(tmp_path / "terminal.out", "w") as terminal:
        sh = subprocess.Popen(
            ["bash", "-c", line.format(port=free_port(), python=shlex.quote(sys.executable),
                                       script=shlex.quote(str(JOBS / "crash_early.py")))],
            cwd=tmp_path, env=env, stdout=terminal, stderr=subprocess.STDOUT,
            start_new_session=True)

    def stop() -> None:  # the shell, its ranks and the helper: one process group
        try:
            os.killpg(sh.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        sh.wait(timeout=30)
    request.addfinalizer(stop)
    pids = [_pid_of(tmp_path / "pids" / str(r)) for r in range(3)]
    if shell == "gone":
        assert sh.wait(timeout=DEADLINE) == 0
    try:
        psutil.Process(pids[2]).wait(timeout=DEADLINE)  # rank 2 crashed before rltui looks
    except psutil.NoSuchProcess:
        pass
    for r in (0, 1):
        wait_for_frame(pids[r], "all_reduce")
    logs = tmp_path / folder
    assert "RuntimeError: CUDA error" in (logs / "rank2.log").read_text(), \
        (logs / "rank2.log").read_text()

    code, doc, stderr = rltui("diagnose", "--json", "--match", "torchjobs/crash_early")
    (ours,) = [j for j in doc["jobs"] if pids[0] in j["pids"]]
    assert ours["ranks"] == [0, 1] and ours["world_size"] == 3, (ours, stderr)
    mine = [s for s in doc["symptoms"] if s["job"] == ours["id"]]
    (exited,) = [s for s in mine if s["id"] == "rank-exited"]
    assert exited["ranks"] == [2] and exited["severity"] == "critical", (mine, stderr)
    text = "\n".join(exited["evidence"])
    # the traceback read from its log, found beside the live ranks' logs
    assert "RuntimeError: CUDA error: an illegal memory access" in text, text
    assert f"{logs / 'rank2.log'}: found beside rank" in text, text
    (log,) = [g for g in doc["logs"] if g["path"] == str(logs / "rank2.log")]
    assert log["rank"] == 2 and log["found"], log
    # a rank gone, the others waiting for it: pattern A, not "all in the same collective"
    hangs = {s["id"]: s for s in mine if s["id"].startswith("hang-")}
    assert list(hangs) == ["hang-cleanup-deadlock"], mine
    assert 2 in hangs["hang-cleanup-deadlock"]["ranks"]
    # the helper rank 2 forked (RANK=2 in its environment, rank 2's sockets) is not rank 2
    assert 2 not in {r["rank"] for r in doc["ranks"] if r["job"] == ours["id"]}, doc["ranks"]
    assert code == 1


CRASH_AT_START = """
import os, sys, time
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

@record
def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    print(f"step:1 - timing_s/step:0.2", flush=True)
    if rank == 2:
        raise ValueError("loss is nan at step 17")
    dist.barrier()

if __name__ == "__main__":
    main()
"""


@needs_torch
def test_torchrun_log_folder_read_after_the_job_ended(tmp_path):
    script = tmp_path / "nan_job.py"
    script.write_text(CRASH_AT_START, encoding="utf-8")
    logs = tmp_path / "logs"
    launcher = tmp_path / "launcher.log"
    torchrun = Path(sys.executable).with_name("torchrun")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    with open(launcher, "w") as out:
        done = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node", "3",
                               "--log-dir", str(logs), "--redirects", "3", str(script)],
                              stdout=out, stderr=subprocess.STDOUT, env=env, timeout=240,
                              check=False)
    assert done.returncode != 0, launcher.read_text()
    code, doc, stderr = rltui("diagnose", "--json", "--log", str(launcher),
                              "--log", f"{logs}/**/*.log", "--log", f"{logs}/**/error.json")
    assert doc["mode"] == "offline"
    (exited,) = [s for s in doc["symptoms"] if s["id"] == "rank-exited"]
    assert 2 in exited["ranks"], exited
    text = "\n".join(exited["evidence"])
    assert "ValueError: loss is nan at step 17" in text, text
    assert "rank 2 (local_rank 2) on localhost exited with code 1" in text, text
    # the rank's own files, attributed to rank 2 from torchrun's folder layout
    mine = [g for g in doc["logs"] if "/2/" in g["path"]]
    assert mine and all(g["rank"] == 2 for g in mine), doc["logs"]
    err = next(g for g in mine if g["path"].endswith("error.json"))
    (event,) = err["events"]
    assert event["fields"]["exc_type"] == "ValueError"
