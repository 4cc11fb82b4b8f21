"""The demo job with real rank processes and real py-spy: every scenario reaches its hang, the
stacks show the playbook's patterns, the logs hold what the parsers expect, and no rank outlives
its launcher. One job per scenario is shared by that scenario's tests (class-scoped fixtures).
Waits are conditions polled against a deadline, never fixed sleeps.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rltui.demo import SCENARIOS, DemoJob
from rltui.demo.trainer import oom_message
from rltui.model import OK
from rltui.sources.simgpu import SimGpuSource

pytestmark = pytest.mark.integration

STEP = 0.2
FAIL = 2
DEADLINE = 15.0  # generous: two cores, several Python start-ups at once
PYSPY = (shutil.which("py-spy", path=str(Path(sys.executable).parent))
         or shutil.which("py-spy"))
needs_pyspy = pytest.mark.skipif(PYSPY is None, reason="py-spy is not installed")
STEP_LINE = re.compile(r"^step:(\d+)((?: - [^ :]+:-?[0-9.]+)+)$")


def wait_until(predicate, what: str, timeout: float = DEADLINE):
    """Poll ``predicate`` until it returns something truthy; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def phases(job: DemoJob) -> list[tuple[str, int] | None]:
    return [(s["phase"], s["step"]) if s else None
            for s in (job.rank_state(r) for r in range(job.ranks))]


def gone(pid: int) -> bool:
    """No such process, or a zombie nobody reaps (PID 1 in a container may not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def main_stack(pid: int) -> list[tuple[str, str, int]]:
    """(function, file, line) of the MainThread, innermost first; [] if the dump failed."""
    out = subprocess.run([PYSPY, "dump", "--json", "--pid", str(pid)], capture_output=True,
                         text=True, timeout=10)
    if out.returncode != 0:
        return []
    for thread in json.loads(out.stdout):
        if thread["thread_name"] == "MainThread":
            # py-spy names methods Class.method on 3.11+; compare the bare function name
            return [(f["name"].rsplit(".", 1)[-1], f["short_filename"], f["line"])
                    for f in thread["frames"]]
    return []


def in_order(stack: list[tuple[str, str, int]], names: list[str]) -> bool:
    """``names`` (innermost first) occur in ``stack`` in that order; the first is innermost."""
    funcs = [f for f, _, _ in stack]
    if not funcs or funcs[0] != names[0]:
        return False
    it = iter(funcs)
    return all(any(f == n for f in it) for n in names)


def wait_for_stack(pid: int, names: list[str]) -> list[tuple[str, str, int]]:
    last: list = []

    def matches():
        nonlocal last
        last = main_stack(pid)
        return in_order(last, names)

    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if matches():
            return last
        time.sleep(0.05)
    pytest.fail(f"pid {pid}: MainThread never showed {' <- '.join(names)}; last stack: "
                f"{' <- '.join(f for f, _, _ in last)}")


def start(scenario: str, ranks: int, tmp_path_factory) -> DemoJob:
    run_dir = tmp_path_factory.mktemp(scenario)
    return DemoJob(scenario, ranks=ranks, run_dir=run_dir, fail_step=FAIL,
                   step_seconds=STEP).start()


def stop_and_check(job: DemoJob) -> None:
    job.stop()
    alive = [pid for pid in job.pids if not gone(pid)]
    assert not alive, f"ranks still alive after stop(): {alive}"


def scenario_job(name: str, ranks: int):
    """A class-scoped fixture: one job of ``name`` shared by the tests of a class."""
    @pytest.fixture(scope="class")
    def job(self, tmp_path_factory):
        started = start(name, ranks, tmp_path_factory)
        yield started
        stop_and_check(started)
    return job


def log_lines(job: DemoJob, rank: int) -> list[str]:
    return job.log_paths[rank].read_text().splitlines()


def waiting_in_all_reduce(job: DemoJob, ranks) -> None:
    for rank in ranks:
        wait_for_stack(job.rank_pids()[rank],
                       ["all_reduce", "_sync_gradients", "train_step", "train", "main"])


# --- scenarios ---------------------------------------------------------------------------------

class TestHealthy:
    @pytest.fixture(scope="class")
    def job(self, tmp_path_factory):
        # Started from a thread that ends at once: the ranks' parent-death signal is bound to the
        # launcher's keeper thread, so they must survive the caller's thread.
        box = []
        t = threading.Thread(target=lambda: box.append(start("healthy", 3, tmp_path_factory)))
        t.start()
        t.join()
        yield box[0]
        stop_and_check(box[0])

    def test_steps_keep_advancing(self, job):
        first = wait_until(lambda: all(p and p[1] >= 1 for p in phases(job)) and phases(job),
                           "every rank at step 1")
        target = max(p[1] for p in first) + 3
        wait_until(lambda: all(p and p[1] >= target for p in phases(job)),
                   f"every rank at step {target}")
        assert job.alive() and all(code is None for code in job.exit_codes().values())

    def test_logs_hold_valid_verl_step_lines(self, job):
        wait_until(lambda: all(sum(bool(STEP_LINE.match(x)) for x in log_lines(job, r)) >= 3
                               for r in range(job.ranks)), "three step lines per rank")
        for rank in range(job.ranks):
            steps = []
            for line in log_lines(job, rank):
                m = STEP_LINE.match(line)
                if m:
                    steps.append(int(m.group(1)))
                    pairs = dict(kv.rsplit(":", 1) for kv in m.group(2).split(" - ")[1:])
                    assert {"timing_s/step", "actor/pg_loss", "actor/entropy",
                            "perf/throughput"} <= set(pairs)
                    assert all(isinstance(float(v), float) for v in pairs.values())
            assert steps == list(range(1, len(steps) + 1))
            assert any(" - INFO - " in line for line in log_lines(job, rank))

    @needs_pyspy
    def test_stacks_are_in_the_training_loop(self, job):
        for pid in job.pids:
            wait_until(lambda: "train" in [f for f, _, _ in main_stack(pid)],
                       f"pid {pid} in Trainer.train")

    def test_simulated_gpus_are_busy(self, job):
        source = SimGpuSource(job)

        def busy():
            payload = source.poll().payload
            return all(g.util >= 85 and g.mem_used > 0 for g in payload.gpus) and payload

        payload = wait_until(busy, "all simulated GPUs busy")
        assert payload.simulated and all(g.simulated for g in payload.gpus)
        assert [g.processes[0].pid for g in payload.gpus] == job.pids
        assert source.gpu_pid_map() == {pid: r for r, pid in job.rank_pids().items()}


@needs_pyspy
class TestStall:
    job = scenario_job("stall", 3)

    def test_every_rank_waits_at_the_same_all_reduce(self, job):
        wait_until(lambda: phases(job) == [("wait", FAIL)] * job.ranks, "all ranks waiting")
        stacks = [wait_for_stack(pid, ["all_reduce", "_sync_gradients", "train_step", "train",
                                       "main"]) for pid in job.pids]
        assert all(s == stacks[0] for s in stacks), "pattern C: identical stacks and lines"
        assert job.alive() and not any(job.exit_codes().values())

    def test_simulated_gpus_are_idle(self, job):
        wait_until(lambda: phases(job) == [("wait", FAIL)] * job.ranks, "all ranks waiting")
        gpus = SimGpuSource(job).poll().payload.gpus
        assert all(g.util <= 2 and g.mem_used > 0 and len(g.processes) == 1 for g in gpus)


@needs_pyspy
class TestCleanupDeadlock:
    job = scenario_job("cleanup-deadlock", 3)

    def test_failed_rank_hangs_in_cleanup_others_in_recv(self, job):
        last = job.ranks - 1
        wait_until(lambda: phases(job)[last] == ("cleanup", FAIL), "the last rank in cleanup")
        wait_for_stack(job.pids[last],
                       ["destroy_process_group", "destroy", "close", "__exit__", "main"])
        for pid in job.pids[:last]:
            wait_for_stack(pid, ["recv_object_list", "_shape_inference", "step", "_run_train",
                                 "train", "main"])

    def test_failed_rank_logged_its_traceback(self, job):
        wait_until(lambda: phases(job)[-1] == ("cleanup", FAIL), "the last rank in cleanup")
        text = job.log_paths[-1].read_text()
        assert "Training failed with exception" in text and "Traceback" in text
        assert "RuntimeError: The size of tensor a (4096) must match" in text


@needs_pyspy
class TestCollectiveMismatch:
    job = scenario_job("collective-mismatch", 2)

    def test_ranks_wait_at_different_call_sites(self, job):
        wait_until(lambda: phases(job) == [("wait", FAIL)] * job.ranks, "all ranks waiting")
        even = wait_for_stack(job.pids[0], ["all_reduce", "forward", "train_step", "train"])
        odd = wait_for_stack(job.pids[1], ["all_reduce", "backward", "train_step", "train"])
        assert even[0] == odd[0]  # the same collective...
        assert even[1] != odd[1]  # ...called from different places: pattern B


@needs_pyspy
class TestZeroStepCompletion:
    job = scenario_job("zero-step-completion", 3)

    def test_rank0_hangs_in_destroy_others_exit_0(self, job):
        wait_until(lambda: list(job.exit_codes().values())[1:] == [0] * (job.ranks - 1),
                   "ranks 1.. exit 0")
        assert job.exit_codes()[0] is None
        wait_for_stack(job.pids[0], ["destroy_process_group", "destroy", "close", "__exit__",
                                     "main"])

    def test_rank0_logged_training_completes_after_zero_steps(self, job):
        done = re.compile(r"^\(AReaL\) \d{8}-\d\d:\d\d:\d\d\.\d{3} StatsLogger INFO: Training "
                          r"completes! Total time elapsed \d+\.\d\d\.$")
        wait_until(lambda: any(done.match(line) for line in log_lines(job, 0)),
                   "rank 0 to log 'Training completes!'")
        for rank in range(job.ranks):
            assert not any(STEP_LINE.match(line) for line in log_lines(job, rank))


class TestRankExit:
    job = scenario_job("rank-exit", 3)

    def test_dead_rank_exit_code_and_traceback(self, job):
        last = job.ranks - 1
        wait_until(lambda: job.exit_codes()[last] is not None, "the last rank to exit")
        assert job.exit_codes()[last] == 1
        assert log_lines(job, last)[-1].startswith("RuntimeError: DataLoader worker (pid(s) ")

    @needs_pyspy
    def test_others_wait_in_all_reduce(self, job):
        wait_until(lambda: job.exit_codes()[job.ranks - 1] is not None, "the last rank to exit")
        waiting_in_all_reduce(job, range(job.ranks - 1))

    def test_simulated_gpus(self, job):
        source = SimGpuSource(job)
        wait_until(lambda: phases(job)[:-1] == [("wait", FAIL)] * (job.ranks - 1),
                   "the survivors waiting")
        gpus = source.poll().payload.gpus
        dead = gpus[-1]
        assert dead.mem_used == 0 and dead.processes == () and dead.util <= 2
        for gpu, pid in zip(gpus[:-1], job.pids):
            assert gpu.util <= 2 and gpu.mem_used > 0 and gpu.processes[0].pid == pid
        assert job.pids[-1] not in source.gpu_pid_map()


class TestOom:
    job = scenario_job("oom", 2)

    def test_oom_rank_logs_the_exact_message_and_exits_1(self, job):
        wait_until(lambda: job.exit_codes()[1] is not None, "the OOM rank to exit")
        assert job.exit_codes()[1] == 1
        expected = "torch.OutOfMemoryError: " + oom_message(1, job.pids[1])
        lines = log_lines(job, 1)
        assert expected in lines
        assert any("in entropy_from_logits" in line for line in lines)
        assert any("in compute_log_prob" in line for line in lines)

    @needs_pyspy
    def test_other_rank_waits_in_all_reduce(self, job):
        waiting_in_all_reduce(job, [0])


# --- lifecycle ---------------------------------------------------------------------------------

def test_scenarios_and_validation(tmp_path):
    assert list(SCENARIOS)[:2] == ["healthy", "stall"] and len(SCENARIOS) == 7
    with pytest.raises(ValueError, match="valid scenarios: healthy, stall"):
        DemoJob("nope", run_dir=tmp_path)
    for bad in (1, 65):
        with pytest.raises(ValueError, match="from 2 to 64"):
            DemoJob(ranks=bad, run_dir=tmp_path)


def test_simgpu_survives_missing_and_torn_state(tmp_path):
    class Job:
        ranks = 2

        def rank_pids(self):
            return {0: os.getpid(), 1: os.getpid()}

        def exit_codes(self):
            return {0: None, 1: None}

        def rank_state(self, rank):
            from rltui.demo.job import read_rank_state
            path = tmp_path / f"rank{rank}.state"
            if rank == 1:
                path.write_text('{"phase": "comp')  # a reader that raced a writer
            return read_rank_state(path)

    reading = SimGpuSource(Job()).poll()
    assert reading.status == OK
    assert [g.util <= 2 for g in reading.payload.gpus] == [True, True]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_no_orphans_when_the_launcher_dies(tmp_path, sig):
    launcher = subprocess.Popen(
        [sys.executable, "-m", "rltui.demo.job", "--scenario", "healthy", "--ranks", "2",
         "--run-dir", str(tmp_path), "--step-seconds", str(STEP)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        pids = json.loads(launcher.stdout.readline())["pids"]
        # The state file is written after each rank armed its parent-death signal.
        wait_until(lambda: all((tmp_path / f"rank{r}.state").exists() for r in range(2)),
                   "both ranks running")
        launcher.send_signal(sig)
        launcher.wait(timeout=DEADLINE)
        wait_until(lambda: all(gone(pid) for pid in pids),
                   f"ranks {pids} to die after {signal.Signals(sig).name} of the launcher")
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
