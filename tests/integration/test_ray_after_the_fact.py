"""A real Ray job whose rank crashed before rltui started, read by the default scan.

A Ray head on this machine (tests/fakes/ray_cluster.py) runs three ``Trainer`` actors set up as
verl's worker groups are (``RANK``, ``WORLD_SIZE``, ``RAY_LOCAL_RANK``, ``RAY_LOCAL_WORLD_SIZE``
in each actor's runtime_env) in one gloo group; the last rank raises at step 3 and dies while
the others wait for it in all_reduce (tests/fakes/ray_driver.py, mode ``crash``). Only then does
``rltui diagnose`` look, with no flag: the engineer who arrives after the fact.

What it must read from what is left: rank 2 is missing from a world of 3, it crashed with the
RuntimeError at the line its traceback names, at the time its log last changed, and the log is
the dead worker's own ``worker-<id>-<job>-<pid>.err`` in Ray's session folder; Ray's idle
workers and its own services (``ray::IDLE``, ``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``)
are nobody's job.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from tests.fakes import ray_cluster
from tests.fakes.ray_cluster import RayHead

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

WAIT = 90.0  # a safety net for what Ray does on its own schedule on a loaded machine
WORLD = 3


@pytest.fixture(scope="module")
def crashed():
    reason = ray_cluster.missing()
    if reason:
        pytest.skip(f"no Ray cluster here: {reason}")
    with RayHead() as head:
        driver = head.run_driver("crash", str(WORLD))
        actors = {a["rank"]: a["pid"] for a in driver.ready()["actors"]}
        dead = psutil.Process(actors[WORLD - 1])
        dead.wait(WAIT)  # gone before rltui looks
        pattern = str(head.temp / "session_*" / "logs" / f"worker-*-{actors[WORLD - 1]}.err")
        deadline = time.monotonic() + WAIT
        while not [p for p in glob.glob(pattern) if "RuntimeError" in open(p).read()]:
            assert time.monotonic() < deadline, f"no traceback in {pattern}"
            time.sleep(0.1)
        (err,) = {os.path.realpath(p) for p in glob.glob(pattern)}  # session_latest links too
        yield head, actors, err


def diagnose() -> tuple[int, dict, str]:
    out = subprocess.run([sys.executable, "-m", "rltui", "diagnose", "--json"],
                         capture_output=True, text=True, timeout=120, check=False)
    return out.returncode, json.loads(out.stdout), out.stderr


def test_the_crashed_ray_rank_is_found_with_its_traceback_time_and_log(crashed):
    head, actors, err = crashed
    code, doc, stderr = diagnose()
    (ours,) = [j for j in doc["jobs"] if actors[0] in j["pids"]]
    assert ours["ranks"] == [0, 1] and ours["world_size"] == WORLD, ours
    assert actors[1] in ours["pids"]
    (exited,) = [s for s in doc["symptoms"] if s["id"] == "rank-exited"
                 and s["job"] == ours["id"]]
    assert exited["ranks"] == [2] and exited["severity"] == "critical", stderr
    assert exited["title"].startswith("rank 2 crashed (RuntimeError at ray_driver.py:"), exited
    (gone,) = [d for d in doc["departed"] if d["rank"] == 2 and d["job"] == ours["id"]]
    assert gone["error"].startswith("RuntimeError: CUDA error"), gone
    assert abs(gone["left_at"] - os.stat(err).st_mtime) < 2.0, gone
    (log,) = [g for g in doc["logs"] if g["path"] == err]
    assert log["rank"] == 2 and "Ray's session logs" in log["found"], log
    assert code == 1


def test_ray_s_own_processes_are_nobody_s_job(crashed):
    head, actors, err = crashed
    bystanders = set()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        title = " ".join(proc.info["cmdline"] or ())
        if title.startswith(("ray::IDLE", "ray::DashboardAgent", "ray::RuntimeEnvAgent")):
            bystanders.add(proc.info["pid"])
    assert bystanders, "a Ray node runs these beside every job"
    _, doc, _ = diagnose()
    assert not bystanders & {pid for j in doc["jobs"] for pid in j["pids"]}, doc["jobs"]
