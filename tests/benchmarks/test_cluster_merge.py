"""Cost of merging and classifying the stacks of 1,024 ranks from 128 nodes (target: within 0.5 s
after the last node's round arrives).

Every node has 8 ranks (global ranks node x 8 + local, pids that repeat on every node), 8 GPUs,
a log per rank and py-spy rounds whose dumps have 60 frames built afresh per rank (as decoding a
node's JSON gives). 127 nodes' rounds are in; what is timed is what happens when the last node's
round arrives: ``ingest`` it, then ``evaluate`` (every host's snapshot, the merge of processes,
GPUs and logs, the merged stack samples, their classification and every rule). Each run
ingests a new round object, so nothing is reused from the previous run's classification.
``merge_and_classify`` times the stack part alone. Run:
``python -m pytest tests/benchmarks/test_cluster_merge.py --benchmark-only``
"""

from __future__ import annotations

import pytest

from rltui.cluster import ClusterMonitor
from rltui.cluster.diagnose import classify_rounds
from rltui.cluster.stackmerge import merged_samples
from rltui.model import (
    OK,
    Frame,
    GpuPoll,
    GpuSample,
    LogPoll,
    LogUpdate,
    ProcessDump,
    ProcInfo,
    ProcPoll,
    Reading,
    StackPoll,
    StepRecord,
    ThreadStack,
    replace,
)
from tests.benchmarks.test_stacks_merge import _kind, _path  # the same four stacks

NODES, PER_NODE = 128, 8
T0 = 1_700_000_000.0


def _round(node: int, t: float) -> Reading:
    dumps = []
    for local in range(PER_NODE):
        rank = node * PER_NODE + local
        frames = tuple(Frame(n, "/venv/lib/python3.11/site-packages/" + f, line)
                       for n, f, line in _path(_kind(rank)))
        dumps.append(ProcessDump(pid=10_000 + local, rank=rank, source="live", timestamp=t,
                                 threads=(ThreadStack(1, "MainThread", "idle", frames),)))
    return Reading("stacks", t + 1.0, OK, StackPoll(dumps=tuple(dumps), started=t,
                                                    finished=t + 1.0))


def _node(cm: ClusterMonitor, node: int, t: float) -> None:
    host = f"node{node:03d}"
    cm.ingest(host, Reading("gpus", t, OK, GpuPoll(gpus=tuple(
        GpuSample(i, "H100", f"GPU-{node}-{i}", util=0.0) for i in range(PER_NODE)))))
    cm.ingest(host, Reading("procs", t, OK, ProcPoll(procs=tuple(
        ProcInfo(pid=10_000 + i, rank=node * PER_NODE + i, local_rank=i,
                 world_size=NODES * PER_NODE, local_world_size=PER_NODE, state="sleeping",
                 gpu_index=i) for i in range(PER_NODE)))))
    cm.ingest(host, Reading("logs", t, OK, LogPoll(files=tuple(
        LogUpdate(f"/logs/rank{node * PER_NODE + i}.log", OK, rank=node * PER_NODE + i,
                  steps=tuple(StepRecord(k, k, T0 - 100 + 5 * k) for k in range(5)))
        for i in range(PER_NODE)))))


def _cluster(samples: int) -> tuple[ClusterMonitor, Reading]:
    """127 nodes with ``samples`` rounds each, the last node with ``samples - 1``; and the
    last node's next round."""
    cm = ClusterMonitor([f"node{n:03d}" for n in range(NODES)])
    for n in range(NODES):
        _node(cm, n, T0 + 30)
    for s in range(samples):
        for n in range(NODES if s < samples - 1 else NODES - 1):
            cm.ingest(f"node{n:03d}", _round(n, T0 + 10 * s))
    cm.evaluate(T0 + 10 * samples)
    return cm, _round(NODES - 1, T0 + 10 * (samples - 1))


def _arrive(cm: ClusterMonitor, last: Reading, now: float):
    # A new round object each run (as a decoded line is): no classification is reused.
    cm.ingest(f"node{NODES - 1:03d}", replace(last, payload=replace(last.payload)))
    return cm.evaluate(now)


@pytest.mark.parametrize("samples", [1, 2])
def test_last_node_arrives_then_evaluate_1024_ranks_128_nodes(benchmark, samples):
    cm, last = _cluster(samples)
    now = T0 + 10 * samples + 1
    snap, diag = benchmark(_arrive, cm, last, now)
    report = snap.stack_report
    assert sum(len(c.members) for c in report.classes) == NODES * PER_NODE
    assert report.pattern == "A" and report.samples == samples
    assert diag.verdict == "critical"


@pytest.mark.parametrize("samples", [1, 2])
def test_merge_and_classify_1024_ranks_128_nodes(benchmark, samples):
    cm, last = _cluster(samples)
    cm.ingest(f"node{NODES - 1:03d}", last)
    snap = cm.observe(T0 + 10 * samples + 1)

    def merge_and_classify():
        from rltui.cluster.merge import merge
        m = merge(snap.nodes, snap.timestamp)
        rounds, _ = merged_samples(snap.nodes, m.pid_ranks, m.dropped, 5.0)
        return classify_rounds(rounds, (), None)

    report = benchmark(merge_and_classify)
    assert report.pattern == "A" and len(report.tree.members) == NODES * PER_NODE


def test_evaluate_1024_ranks_128_nodes_without_a_new_round(benchmark):
    """The app's every-second refresh between rounds: new procs, GPUs and logs from every
    node, the stacks' merge and classification reused."""
    cm, last = _cluster(2)
    cm.ingest(f"node{NODES - 1:03d}", last)
    cm.evaluate(T0 + 21)
    clock = iter(range(10_000))

    def tick():
        t = T0 + 22 + next(clock)
        for n in range(NODES):
            _node(cm, n, t)
        return cm.evaluate(t)

    snap, _ = benchmark(tick)
    assert snap.stack_report.pattern == "A"
