"""Cost of telling jobs apart on a busy node (target: grouping and attribution add at most 5 ms
to a poll with 340 processes). The node: 340 watched processes in 18 jobs (four 64-rank
torchrun jobs with their launchers, a Ray session's 64 actors without a rendezvous, a 4-rank job
launched by hand, 12 single-process jobs), 16 logs and a round of 340 dumps. Measured: the
snapshot fold (which groups, again only when the processes changed), splitting the snapshot into
every job's view (what Monitor.evaluate adds), and grouping from scratch (a poll in which the
processes changed).
Run: ``python -m pytest tests/benchmarks/test_job_grouping.py --benchmark-only``
"""

from __future__ import annotations

import pytest

from rltui import jobs
from rltui.model import LogFileState, ProcessDump, ProcInfo, ProcPoll, Reading, StackPoll
from rltui.snapshot import Tracker


def _node() -> list[ProcInfo]:
    procs: list[ProcInfo] = []

    def rank(pid, r, port, ppid, script, world):
        env = (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(port))) if port else ()
        return ProcInfo(pid=pid, ppid=ppid, rank=r, local_rank=r, world_size=world,
                        local_world_size=world, cmdline=("python", script),
                        role=script[:-3], job_env=env)

    for j in range(4):  # four 64-rank torchrun jobs, each with its launcher
        base = 1000 * (j + 1)
        procs.append(ProcInfo(pid=base, ppid=1, cmdline=("torchrun", "t.py"),
                              launcher="torchrun", role="torchrun"))
        procs += [rank(base + 1 + r, r, 29500 + j, base, "train.py", 64) for r in range(64)]
    # a Ray session's 64 actors, no rendezvous in their environment
    procs += [ProcInfo(pid=6000 + i, ppid=5999, cmdline=(f"ray::Worker{i % 4}.run",),
                       role=f"Worker{i % 4}") for i in range(64)]
    procs += [rank(7000 + r, r, None, 1, "handmade.py", 4) for r in range(4)]
    # single-process jobs (evaluations, notebooks with RANK=0)
    procs += [ProcInfo(pid=8000 + i, ppid=7999 - i, cmdline=("python", f"eval{i}.py"),
                       role=f"eval{i}", rank=0, world_size=1) for i in range(340 - len(procs))]
    return procs


PROCS = _node()
ROUND = StackPoll(dumps=tuple(ProcessDump(pid=p.pid, rank=p.rank) for p in PROCS), started=1.0)
LOGS = tuple(LogFileState(path=f"/l/{p.pid}.log", pid=p.pid, rank=p.rank) for p in PROCS[:16])


def _tracker() -> Tracker:
    t = Tracker()
    t.apply(Reading("procs", 1.0, "ok", ProcPoll(tuple(PROCS))))
    t.apply(Reading("stacks", 1.0, "ok", ROUND))
    return t


def test_the_node_has_the_jobs_it_should():
    snap = _tracker().snapshot(2.0)
    assert len(PROCS) == 340
    sizes = sorted(len(j.members) for j in snap.jobs)
    assert sizes[-5:] == [64, 65, 65, 65, 65] and 4 in sizes and len(snap.jobs) == 18


@pytest.mark.benchmark(group="jobs")
def test_fold_with_grouping(benchmark):
    t = _tracker()
    benchmark(t.snapshot, 2.0)


@pytest.mark.benchmark(group="jobs")
def test_partition_into_every_job(benchmark):
    from rltui.model import replace
    snap = replace(_tracker().snapshot(2.0), logs=LOGS)
    lens = jobs.Lens()

    benchmark(jobs.partition, snap, lens)


@pytest.mark.benchmark(group="jobs")
def test_group_alone(benchmark):
    names = jobs.JobNames()
    benchmark(jobs.group, PROCS, (), names)
