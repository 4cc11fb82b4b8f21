"""Two real torch.distributed (gloo) jobs on this node at once, with the same rank numbers: one
hung (pattern A, B or C in turn, or a rank that died), one healthy. ``rltui diagnose`` and
``rltui jobs`` must tell them apart: two jobs, each with its own ranks 0..n-1, the hang's
symptoms naming the hung job only, the healthy job healthy, and ``--job`` narrowing the whole
document to one of them.

Both jobs are found the way a user finds them: ``--match torchjobs/`` selects every process of
both (as the default scan of a node with two jobs does), never by naming their pids.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rltui.diagnosis.stacks import CLEANUP_DEADLOCK, COLLECTIVE_MISMATCH, SAME_COLLECTIVE
from tests.integration.test_torch_hangs import (  # noqa: F401 - fixtures
    ALL_REDUCE,
    TorchJob,
    needs_torch,
    pyspy_can_attach,
    torch_job,
    wait_for_frame,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MATCH = "torchjobs/"


def rltui(*args: str, timeout: float = 90) -> tuple[int, dict | str, str]:
    out = subprocess.run([sys.executable, "-m", "rltui", *args], capture_output=True, text=True,
                         timeout=timeout, check=False)
    doc = json.loads(out.stdout) if "--json" in args and out.stdout.strip() else out.stdout
    return out.returncode, doc, out.stderr


def job_of(doc: dict, pid: int) -> dict:
    """The job that holds ``pid`` (other jobs may run on the node meanwhile: only ours are
    looked at)."""
    (job,) = [j for j in doc["jobs"] if pid in j["pids"]]
    return job


HUNG = {  # script, world, ready lines, frames to wait for, the symptom
    "A": ("cleanup_deadlock.py", 3, {0: ALL_REDUCE, 1: ALL_REDUCE, 2: "cleanup"},
          {2: "barrier"}, CLEANUP_DEADLOCK),
    "B": ("collective_mismatch.py", 3, {0: ALL_REDUCE, 1: ALL_REDUCE, 2: "all_gather"},
          {2: "all_gather"}, COLLECTIVE_MISMATCH),
    # rank 3 never calls the collective, like a peer on another node: it runs the script
    # through a path the match does not select, so ranks 0-2 are all this node shows
    "C": ("same_collective.py", 4, {0: ALL_REDUCE, 1: ALL_REDUCE, 2: ALL_REDUCE,
                                    3: "stalled peer"}, {0: ALL_REDUCE}, SAME_COLLECTIVE),
}


class PeerElsewhere(TorchJob):
    """The last rank runs the script through a link outside torchjobs/ (not matched), and the
    ranks say what a job across two nodes says: LOCAL_WORLD_SIZE 3 here, 1 on the last rank's
    node. (Without it, ranks meeting at a loopback rendezvous tell a single-node job, whose
    rank not seen is missing: docs/jobs.md.)"""

    def rank_env(self, rank: int, port: str) -> dict[str, str]:
        last = rank == self.world - 1
        return dict(super().rank_env(rank, port), LOCAL_RANK=str(0 if last else rank),
                    LOCAL_WORLD_SIZE=str(1 if last else self.world - 1))

    def spawn(self, rank: int, argv: list[str], **popen) -> subprocess.Popen:
        if rank == self.world - 1:
            link = self.log_dir / "elsewhere" / Path(argv[1]).name
            link.parent.mkdir(exist_ok=True)
            link.symlink_to(argv[1])
            argv = [argv[0], str(link), *argv[2:]]
        return super().spawn(rank, argv, **popen)


@needs_torch
@pytest.mark.parametrize("pattern", sorted(HUNG))
def test_a_hung_job_beside_a_healthy_one_is_told_apart(request, torch_job, tmp_path, pattern):
    script, world, ready, frames, symptom = HUNG[pattern]
    healthy = torch_job("healthy.py", 2)
    if pattern == "C":
        hung = PeerElsewhere(script, world, (), tmp_path)
        request.addfinalizer(hung.stop)
        hung.start()
    else:
        hung = torch_job(script, world)
    hung.ready(ready)
    for rank, frame in frames.items():
        wait_for_frame(hung.pid(rank), frame)
    healthy.wait_lines({r: f"phase {r} update" for r in range(2)})
    here = 3  # the hung job's ranks this node shows (C: rank 3 is "elsewhere")

    code, doc, stderr = rltui("diagnose", "--json", "--match", MATCH)
    name = script.removesuffix(".py")
    jobs = {"healthy": job_of(doc, healthy.pid(0)), name: job_of(doc, hung.pid(0))}
    assert jobs["healthy"]["name"] == "healthy" and jobs[name]["name"] == name
    # each job has its own ranks, numbered from 0 in both
    assert jobs["healthy"]["ranks"] == [0, 1]
    assert jobs[name]["ranks"] == list(range(here))
    assert sorted(jobs[name]["pids"]) == sorted(hung.pid(r) for r in range(here))
    assert sorted(jobs["healthy"]["pids"]) == sorted(healthy.pid(r) for r in range(2))
    assert jobs[name]["world_size"] == world and jobs["healthy"]["world_size"] == 2
    # the hang is the hung job's alone, named with its pattern; the healthy job stays healthy
    assert jobs[name]["verdict"] == "critical" and symptom in jobs[name]["symptoms"], stderr
    # (sampled in its CPU phase each time, a healthy loop can read as a possible busy loop, a
    # warning: a long computation in one function looks the same from outside)
    theirs = [s for s in doc["symptoms"] if s["job"] == jobs["healthy"]["id"]]
    assert jobs["healthy"]["verdict"] != "critical", theirs
    assert {s["id"] for s in theirs} <= {"hang-busy-loop"}, theirs
    hang = next(s for s in doc["symptoms"] if s["id"] == symptom)
    assert hang["job"] == jobs[name]["id"]
    assert doc["verdict"] == "critical" and code == 1
    assert doc["stacks"]["pattern"] == pattern
    # the stack classes hold the hung job's processes, none of the healthy job's (whose
    # ranks 0-1 would make five members, ranks claimed twice)
    assert sum(c["count"] for c in doc["stacks"]["classes"]) == here
    assert doc["stacks"]["duplicate_ranks"] == []

    # --job narrows the document to one job: the healthy one alone is healthy
    code, one, _ = rltui("diagnose", "--json", "--quick", "--match", MATCH,
                         "--job", jobs["healthy"]["id"])
    assert one["focus"] == jobs["healthy"]["id"] and one["verdict"] != "critical"
    assert {r["pid"] for r in one["ranks"]} == set(jobs["healthy"]["pids"]) and code == 0
    assert all(s["job"] == jobs["healthy"]["id"] for s in one["symptoms"])


@needs_torch
def test_rltui_jobs_lists_both_with_a_verdict_each(torch_job):
    healthy = torch_job("healthy.py", 2)
    hung = torch_job("rank_exit.py", 3)
    hung.wait_lines({r: f"ready {r}" for r in (0, 1)})
    healthy.wait_lines({r: f"phase {r} update" for r in range(2)})
    code, doc, stderr = rltui("jobs", "--json", "--match", MATCH, "--duration", "1")
    assert code == 0, stderr
    jobs = {"healthy": job_of(doc, healthy.pid(0)), "rank_exit": job_of(doc, hung.pid(0))}
    assert jobs["healthy"]["ranks"] == [0, 1] and jobs["rank_exit"]["name"] == "rank_exit"
    assert jobs["healthy"]["id"] != jobs["rank_exit"]["id"]
    code, text, _ = rltui("jobs", "--match", MATCH)
    assert jobs["healthy"]["id"] in text and jobs["rank_exit"]["id"] in text and code == 0


def test_a_pid_that_does_not_exist_is_no_job_with_exit_4(tmp_path):
    code, doc, stderr = rltui("diagnose", "--json", "--quick", "--pid", "999999999")
    assert code == 4
    assert doc["jobs"] == [] and any(s["id"] == "no-job-found" for s in doc["symptoms"])
    assert "no training job found" in stderr


def test_a_job_id_that_is_not_here_is_exit_4_naming_the_jobs_here():
    code, doc, stderr = rltui("diagnose", "--json", "--quick", "--match", "no-such-job-xyz",
                              "--job", "train-1")
    assert code == 4 and "no job 'train-1'" in stderr
    assert doc["symptoms"][0]["id"] == "no-job-found"


def run_plain(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rltui", *args], capture_output=True, text=True,
                          timeout=90, check=False)


@pytest.mark.parametrize("wanted", ["nothing-here", "²", "٣٠٧٦٠", "x" * 5000])
def test_a_job_that_is_not_here_exits_4_everywhere_without_a_traceback(wanted):
    for command in (["jobs"], ["diagnose", "--quick"]):
        out = run_plain(*command, "--match", "no-such-job-xyz", "--job", wanted)
        assert out.returncode == 4, (command, out.stderr)
        assert "Traceback" not in out.stderr and "no job" in out.stderr


def test_oom_with_a_job_that_is_not_here_says_so():
    out = run_plain("oom", "--log", "fixtures/logs/event-oom-current.log", "--job", "nothing")
    assert out.returncode == 4 and "no job 'nothing'" in out.stderr, out.stderr


def test_job_is_refused_across_nodes():
    out = run_plain("diagnose", "--hosts", "node01", "--job", "train-1")
    assert out.returncode == 2 and "--job reads this node only" in out.stderr
