"""Cost of merging and classifying stacks across many ranks (targets: 4,096 ranks x 60 frames in
at most 200 ms, one sample or two; 65,536 synthetic ranks in at most 3 s).

The 4,096-rank cases build fresh Frame objects (and strings) for every rank, as parsing one dump
per rank does; the 65,536-rank synthetic case shares frame tuples between ranks, as a synthetic
or replayed job does. All have a few distinct paths (pattern A: loop waiters and ranks in
cleanup); the two-sample runs add the moving/stuck comparison. The cost is linear in ranks x
depth: each stack is looked up whole (one C-level hash of its frames' keys), so a stack seen
before, on another rank or in another sample, costs no per-frame conversion; frames tuples shared
between ranks are not even hashed. Run:
``python -m pytest tests/benchmarks/test_stacks_merge.py --benchmark-only``
"""

from __future__ import annotations

import pytest

from rltui.diagnosis.stacks import classify, report_json
from rltui.model import Frame, ProcessDump, ThreadStack

DEPTH = 60


def _path(kind: int) -> list[tuple[str, str, int]]:
    """One of four distinct stacks, innermost first, ``DEPTH`` frames."""
    outer = [(f"Layer{i}.forward", f"model/layer{i}.py", 10 + i) for i in range(DEPTH - 6)]
    tails = {
        0: [("recv_object_list", "torch/distributed/distributed_c10d.py", 3100),
            ("PipelineSchedule._shape_inference", "pipe/schedule.py", 191),
            ("PipelineSchedule.step", "pipe/schedule.py", 185)],
        1: [("all_reduce", "torch/distributed/distributed_c10d.py", 2501),
            ("FSDPActor.forward", "engine/actor.py", 158),
            ("Trainer.train_step", "trainer.py", 252)],
        2: [("all_reduce", "torch/distributed/distributed_c10d.py", 2501),
            ("FSDPActor.backward", "engine/actor.py", 169),
            ("Trainer.train_step", "trainer.py", 252)],
        3: [("destroy_process_group", "torch/distributed/distributed_c10d.py", 1900),
            ("FSDPActor.destroy", "engine/actor.py", 174),
            ("Trainer.close", "trainer.py", 223)],
    }
    return tails[kind] + outer + [("Trainer._run_train", "trainer.py", 243),
                                  ("Trainer.train", "trainer.py", 236),
                                  ("main", "run.py", 88)]


def _kind(rank: int) -> int:
    return 3 if rank % 512 == 511 else rank % 3


def _fresh(ranks: int) -> list[ProcessDump]:
    """Every rank with its own Frame objects (what parsing per-rank dumps gives)."""
    out = []
    for r in range(ranks):
        frames = tuple(Frame(n, "/venv/lib/python3.11/site-packages/" + f, line)
                       for n, f, line in _path(_kind(r)))
        out.append(ProcessDump(pid=10_000 + r, rank=r, threads=(
            ThreadStack(1, "MainThread", "idle", frames),
            ThreadStack(2, "pt_heartbeat", "idle", (Frame("wait", "threading.py", 320),)))))
    return out


def _shared(ranks: int) -> list[ProcessDump]:
    """Synthetic: ranks of one kind share their frames tuple."""
    kinds = {k: tuple(Frame(n, f, line) for n, f, line in _path(k)) for k in range(4)}
    return [ProcessDump(pid=10_000 + r, rank=r, threads=(
        ThreadStack(1, "MainThread", "idle", kinds[_kind(r)]),)) for r in range(ranks)]


def _run(samples):
    report = classify(samples)
    report_json(report)
    return report


@pytest.mark.parametrize("ranks", [4096])
def test_merge_classify_4096_ranks_60_frames(benchmark, ranks):
    """The target: one dump of every rank, merged and classified."""
    report = benchmark(_run, [_fresh(ranks)])
    assert report.pattern == "A" and sum(len(c.members) for c in report.classes) == ranks


@pytest.mark.parametrize("ranks", [4096])
def test_merge_classify_4096_ranks_two_samples(benchmark, ranks):
    """Two successive dumps (moving/stuck), the target too: twice the frames to read."""
    report = benchmark(_run, [_fresh(ranks), _fresh(ranks)])
    assert report.classes[0].state == "stuck"


@pytest.mark.parametrize("ranks", [65536])
def test_merge_classify_65536_ranks_synthetic(benchmark, ranks):
    samples = [_shared(ranks), _shared(ranks)]
    report = benchmark.pedantic(_run, args=(samples,), rounds=3, iterations=1)
    assert report.pattern == "A" and sum(len(c.members) for c in report.classes) == ranks


@pytest.mark.parametrize("ranks", [65536])
def test_merge_classify_65536_ranks_fresh_frames(benchmark, ranks):
    """Worst case for the synthetic size: no frames shared (ranks x depth conversions)."""
    samples = [_fresh(ranks)]
    report = benchmark.pedantic(_run, args=(samples,), rounds=1, iterations=1)
    assert report.pattern == "A"
