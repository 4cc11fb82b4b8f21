"""gpu-idle-vs-busy: some of the job's GPUs idle while others stay busy, sustained."""

from __future__ import annotations

import pytest

from rltui.diagnosis import gpu as gpu_rule
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import GpuProcess, GpuSample, NodeSnapshot, ProcInfo

TH = Thresholds()  # idle <= 5 %, busy >= 50 %, sustain 30 s
SUSTAIN = TH.gpu_idle_sustain_s


def snap(t, utils, procs=None, errors=(), gpu_processes=None, simulated=False):
    """``utils``: {gpu index: util}; by default rank i runs on GPU i (pid 100 + i)."""
    gpus = tuple(
        GpuSample(index=i, name=f"GPU{i}", uuid=f"u{i}", util=u,
                  error="lost" if i in errors else "",
                  processes=(gpu_processes or {}).get(i, ()))
        for i, u in sorted(utils.items()))
    if procs is None:
        procs = tuple(ProcInfo(pid=100 + i, rank=i, gpu_index=i, state="running") for i in utils)
    return NodeSnapshot(timestamp=float(t), gpus=gpus, procs=tuple(procs), gpu_simulated=simulated)


def series(start, end, utils_at, step=1.0, **kw):
    """Snapshots from ``start`` to ``end`` inclusive; ``utils_at(t)`` gives the utils."""
    out, t = [], float(start)
    while t <= end + 1e-9:
        out.append(snap(t, utils_at(t), **kw))
        t += step
    return out


def run(history, th=TH):
    """Diagnose the last snapshot of ``history`` (the history includes it, as Monitor does)."""
    return gpu_rule.idle_vs_busy(history[-1], history, th)


SPLIT = {0: 0.0, 1: 100.0}


# -- fires -----------------------------------------------------------------------------------

def test_fires_when_sustained_with_history_reaching_back():
    (symptom,) = run(series(0, 40, lambda t: SPLIT))
    assert symptom.id == "gpu-idle-vs-busy"
    assert symptom.severity == "warning"
    assert symptom.ranks == (0,)
    # It held at least since the snapshot that stands for the window's start.
    assert symptom.since <= 40.0 - SUSTAIN
    assert "GPU 0 (rank 0): 0% utilisation, idle" in symptom.evidence
    assert "GPU 1 (rank 1): 100% utilisation, busy" in symptom.evidence
    assert any("Held for at least 31 s" in e for e in symptom.evidence)
    assert "rank 0" in symptom.title
    assert "1 of the job's GPUs idle while 1 busy" in symptom.title
    assert any("py-spy dump" in s and "100 101" in s for s in symptom.next_steps)


def test_history_without_the_current_snapshot_works_the_same():
    history = series(0, 40, lambda t: SPLIT)
    with_current = run(history)
    assert len(with_current) == 1
    assert with_current == gpu_rule.idle_vs_busy(history[-1], history[:-1], TH)


def test_evidence_names_every_gpu_and_rank_and_ranks_lists_the_idle_ones():
    utils = {0: 0.0, 1: 2.0, 2: 97.0, 3: 99.0}
    (symptom,) = run(series(0, 35, lambda t: utils))
    assert symptom.ranks == (0, 1)
    text = "\n".join(symptom.evidence)
    for line in ("GPU 0 (rank 0): 0% utilisation, idle", "GPU 1 (rank 1): 2% utilisation, idle",
                 "GPU 2 (rank 2): 97% utilisation, busy", "GPU 3 (rank 3): 99% utilisation, busy"):
        assert line in text
    assert "ranks 0-1" in symptom.title
    assert "2 of the job's GPUs idle while 2 busy" in symptom.title


def test_a_gpu_shared_by_two_ranks_names_both():
    procs = (ProcInfo(pid=100, rank=0, gpu_index=0), ProcInfo(pid=101, rank=1, gpu_index=0),
             ProcInfo(pid=102, rank=2, gpu_index=1))
    (symptom,) = run(series(0, 35, lambda t: SPLIT, procs=procs))
    assert symptom.ranks == (0, 1)
    assert "GPU 0 (rank 0-1): 0% utilisation, idle" in symptom.evidence


def test_simulated_gpus_are_said_so():
    (symptom,) = run(series(0, 35, lambda t: SPLIT, simulated=True))
    assert "GPUs are simulated (demo)." in symptom.evidence


def test_zero_sustain_fires_at_once_without_history():
    th = Thresholds(gpu_idle_sustain_s=0.0)
    s = snap(0, SPLIT)
    (symptom,) = gpu_rule.idle_vs_busy(s, [], th)
    assert symptom.since == 0.0


def test_custom_thresholds_are_used():
    th = Thresholds(gpu_idle_pct=20.0, gpu_busy_pct=90.0, gpu_idle_sustain_s=10.0)
    utils = {0: 15.0, 1: 95.0}
    (symptom,) = run(series(0, 11, lambda t: utils), th)
    assert any("idle <= 20%, busy >= 90%, sustain 10 s" in e for e in symptom.evidence)
    assert run(series(0, 11, lambda t: utils)) == []  # the defaults: 15 % is not idle


# -- does not fire ---------------------------------------------------------------------------

def test_not_when_history_does_not_reach_back_the_whole_window():
    assert run(series(15, 40, lambda t: SPLIT)) == []
    assert run([snap(40, SPLIT)]) == []


def test_not_when_the_split_started_within_the_window():
    assert run(series(0, 40, lambda t: SPLIT if t >= 20 else {0: 100.0, 1: 100.0})) == []


def test_not_when_a_single_snapshot_in_the_window_breaks_the_split():
    assert run(series(0, 40, lambda t: {0: 60.0, 1: 100.0} if t == 25 else SPLIT)) == []


def test_not_for_pipeline_bubbles_where_the_idle_set_moves():
    # Each GPU idles in turn: at every instant one idles and one is busy, never the same one.
    bubbles = series(0, 60, lambda t: {0: 0.0, 1: 100.0} if int(t) % 2 else {0: 100.0, 1: 0.0})
    assert run(bubbles) == []


@pytest.mark.parametrize("utils", [
    pytest.param({0: 0.0, 1: 1.0, 2: 5.0}, id="all-idle"),
    pytest.param({0: 100.0, 1: 60.0, 2: 50.0}, id="all-busy"),
    pytest.param({0: 20.0, 1: 30.0}, id="all-in-between"),
    pytest.param({0: 0.0, 1: 30.0}, id="idle-and-in-between"),
    pytest.param({0: None, 1: 100.0}, id="util-none-and-busy"),
    pytest.param({0: 0.0, 1: None}, id="idle-and-util-none"),
    pytest.param({0: None, 1: None}, id="all-none"),
    pytest.param({}, id="no-gpus"),
])
def test_not_without_both_an_idle_and_a_busy_job_gpu(utils):
    assert run(series(0, 40, lambda t: utils)) == []


@pytest.mark.parametrize(("idle_util", "busy_util", "fires"), [
    (5.0, 50.0, True),  # exactly idle_pct counts as idle, exactly busy_pct as busy
    (5.0, 100.0, True),
    (0.0, 50.0, True),
    (5.01, 100.0, False),
    (0.0, 49.99, False),
])
def test_threshold_edges(idle_util, busy_util, fires):
    result = run(series(0, 40, lambda t: {0: idle_util, 1: busy_util}))
    assert bool(result) is fires


def test_util_none_gpu_is_left_out_of_a_firing_symptom():
    (symptom,) = run(series(0, 40, lambda t: {0: 0.0, 1: 100.0, 2: None}))
    assert not any(e.startswith("GPU 2") for e in symptom.evidence)


def test_gpus_not_used_by_the_job_do_not_count():
    # The job runs on GPUs 0 and 1, both busy; GPU 2 idles but belongs to nobody in the job.
    procs = (ProcInfo(pid=100, rank=0, gpu_index=0), ProcInfo(pid=101, rank=1, gpu_index=1))
    utils = {0: 100.0, 1: 100.0, 2: 0.0}
    assert run(series(0, 40, lambda t: utils, procs=procs)) == []
    # Once a rank maps to GPU 2 it is the job's and the split counts.
    procs3 = procs + (ProcInfo(pid=102, rank=2, gpu_index=2),)
    (symptom,) = run(series(0, 40, lambda t: utils, procs=procs3))
    assert symptom.ranks == (2,)


def test_an_idle_gpu_outside_the_job_is_not_named_when_the_job_splits():
    procs = (ProcInfo(pid=100, rank=0, gpu_index=0), ProcInfo(pid=101, rank=1, gpu_index=1))
    (symptom,) = run(series(0, 40, lambda t: {0: 0.0, 1: 100.0, 2: 0.0}, procs=procs))
    assert symptom.ranks == (0,)
    assert not any(e.startswith("GPU 2") for e in symptom.evidence)


def test_zombie_processes_do_not_make_a_gpu_the_jobs():
    procs = (ProcInfo(pid=100, rank=0, gpu_index=0), ProcInfo(pid=101, rank=1, gpu_index=1),
             ProcInfo(pid=102, rank=2, gpu_index=2, state="zombie"))
    assert run(series(0, 40, lambda t: {0: 100.0, 1: 100.0, 2: 0.0}, procs=procs)) == []


def test_the_window_is_judged_on_the_jobs_gpus_as_of_now():
    # Early on only rank 1's GPU was known; rank 0's mapping (to idle GPU 0) arrived later.
    early = (ProcInfo(pid=100, rank=0), ProcInfo(pid=101, rank=1, gpu_index=1))
    history = series(0, 39, lambda t: SPLIT, procs=early) + [snap(40, SPLIT)]
    (symptom,) = run(history)
    assert symptom.ranks == (0,)


def test_failed_gpus_are_not_the_jobs():
    assert run(series(0, 40, lambda t: SPLIT, errors=(0,))) == []


# -- job_gpus fallbacks ----------------------------------------------------------------------

def test_job_gpus_without_a_mapping_are_those_with_processes():
    s = snap(0, {0: 0.0, 1: 100.0, 2: 100.0}, procs=(ProcInfo(pid=5),),
             gpu_processes={1: (GpuProcess(pid=9),), 2: (GpuProcess(pid=10),)})
    assert [g.index for g in gpu_rule.job_gpus(s)] == [1, 2]


def test_job_gpus_without_any_process_are_all_usable_gpus():
    s = snap(0, {0: 0.0, 1: 100.0, 2: 1.0}, procs=(), errors=(2,))
    assert [g.index for g in gpu_rule.job_gpus(s)] == [0, 1]


def test_ranks_on_lists_live_ranks_on_a_gpu():
    procs = (ProcInfo(pid=1, rank=3, gpu_index=0), ProcInfo(pid=2, rank=1, gpu_index=0),
             ProcInfo(pid=3, rank=2, gpu_index=1), ProcInfo(pid=4, rank=4, gpu_index=0,
                                                              state="zombie"),
             ProcInfo(pid=5, rank=None, gpu_index=0))
    s = snap(0, {0: 0.0, 1: 0.0}, procs=procs)
    assert gpu_rule.ranks_on(s, 0) == [1, 3]
    assert gpu_rule.ranks_on(s, 7) == []


# -- known bug -------------------------------------------------------------------------------

def test_not_when_the_history_has_a_gap_over_the_whole_window():
    history = [snap(0, {0: 100.0, 1: 0.0}),  # GPU 1 idle then, GPU 0 busy
               snap(100, {0: 0.0, 1: 100.0})]  # now the opposite
    assert run(history) == []
