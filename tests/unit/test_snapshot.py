"""The snapshot fold: readings in, immutable NodeSnapshot out."""

from __future__ import annotations

import pytest

from rltui import model
from rltui.model import GpuPoll, GpuSample, NodeSnapshot, ProcInfo, ProcPoll, Reading, replace
from rltui.snapshot import History, Tracker


def proc(pid, rank=None, world=None, local_world=None, state="sleeping", gpu=None):
    return ProcInfo(pid=pid, rank=rank, local_rank=rank, world_size=world,
                    local_world_size=local_world, state=state, gpu_index=gpu)


def procs_reading(t, *procs, status=model.OK):
    return Reading("procs", t, status, ProcPoll(procs=tuple(procs)))


def gpus_reading(t, *gpus, status=model.OK, foreign=(), simulated=False):
    return Reading("gpus", t, status, GpuPoll(gpus=tuple(gpus), foreign_pids=tuple(foreign),
                                              simulated=simulated))


def gpu(index, util=50.0):
    return GpuSample(index=index, name=f"GPU{index}", uuid=f"u{index}", util=util)


def fold(*readings, host="", job=""):
    tracker = Tracker(host=host, job=job)
    for r in readings:
        tracker.apply(r)
    return tracker


def departed_of(snap):
    return {(d.pid, d.rank, d.reason) for d in snap.departed}


# -- departed ranks --------------------------------------------------------------------------

def test_a_rank_that_disappears_becomes_departed_with_gone_since():
    t = fold(
        procs_reading(10.0, proc(100, 0), proc(101, 1)),
        procs_reading(11.0, proc(100, 0), proc(101, 1)),
        procs_reading(12.0, proc(100, 0)),
        procs_reading(13.0, proc(100, 0)),
    )
    snap = t.snapshot(20.0)
    assert snap.departed == (model.DepartedRank(pid=101, rank=1, last_seen=11.0, gone_since=12.0,
                                                reason="exited", info=proc(101, 1)),)
    assert [p.pid for p in snap.procs] == [100]


def test_no_departed_while_every_process_is_present():
    t = fold(procs_reading(1.0, proc(100, 0), proc(101, 1)),
             procs_reading(2.0, proc(101, 1), proc(100, 0)))
    assert t.snapshot(3.0).departed == ()


def test_a_zombie_is_departed_with_reason_zombie_and_keeps_its_rank():
    t = fold(
        procs_reading(1.0, proc(100, 0), proc(101, 1)),
        # A zombie's environment can no longer be read: no rank in this sample.
        procs_reading(2.0, proc(100, 0), proc(101, None, state="zombie")),
        procs_reading(3.0, proc(100, 0), proc(101, None, state="zombie")),
    )
    snap = t.snapshot(4.0)
    assert len(snap.departed) == 1
    d = snap.departed[0]
    assert (d.pid, d.rank, d.reason, d.last_seen, d.gone_since) == (101, 1, "zombie", 1.0, 2.0)
    assert [p.pid for p in snap.live_procs] == [100]


def test_a_zombie_never_seen_alive_is_departed_at_once():
    t = fold(procs_reading(5.0, proc(100, 0), proc(101, 1, state="zombie")))
    assert departed_of(t.snapshot(5.0)) == {(101, 1, "zombie")}
    assert t.snapshot(5.0).departed[0].gone_since == 5.0


def test_a_reaped_zombie_stays_departed_as_zombie():
    t = fold(
        procs_reading(1.0, proc(100, 0), proc(101, 1)),
        procs_reading(2.0, proc(100, 0), proc(101, 1, state="zombie")),
        procs_reading(3.0, proc(100, 0)),
    )
    snap = t.snapshot(4.0)
    assert departed_of(snap) == {(101, 1, "zombie")}
    assert snap.departed[0].gone_since == 2.0


def test_a_rank_restarted_under_a_new_pid_is_not_departed():
    t = fold(
        procs_reading(1.0, proc(100, 0), proc(101, 1)),
        procs_reading(2.0, proc(100, 0)),
        procs_reading(3.0, proc(100, 0), proc(201, 1)),
    )
    snap = t.snapshot(4.0)
    assert snap.departed == ()
    assert {p.pid for p in snap.procs} == {100, 201}


def test_a_process_that_comes_back_is_no_longer_departed():
    t = fold(
        procs_reading(1.0, proc(100, 0), proc(101, 1)),
        procs_reading(2.0, proc(100, 0)),  # a scan that missed it
        procs_reading(3.0, proc(100, 0), proc(101, 1)),
    )
    assert t.snapshot(4.0).departed == ()


def test_a_departed_process_without_a_rank_is_reported_with_rank_none():
    t = fold(procs_reading(1.0, proc(100), proc(300)), procs_reading(2.0, proc(100)))
    assert departed_of(t.snapshot(3.0)) == {(300, None, "exited")}


def test_failed_procs_scan_keeps_the_last_processes_and_departs_nobody():
    t = fold(procs_reading(1.0, proc(100, 0), proc(101, 1)),
             Reading("procs", 2.0, model.ERROR, None, "boom"))
    snap = t.snapshot(3.0)
    assert {p.pid for p in snap.procs} == {100, 101}
    assert snap.departed == ()


# -- missing from WORLD_SIZE -----------------------------------------------------------------

@pytest.mark.parametrize(("procs", "missing"), [
    # single node: LOCAL_WORLD_SIZE == WORLD_SIZE
    ((proc(100, 0, 4, 4), proc(101, 1, 4, 4), proc(103, 3, 4, 4)), {2}),
    ((proc(100, 0, 4, 4),), {1, 2, 3}),
    # WORLD_SIZE alone cannot say the job is single-node: no inference
    ((proc(100, 0, 2), ), set()),
    ((proc(100, 4, 8), proc(101, 5, 8)), set()),
    # complete world
    ((proc(100, 0, 2, 2), proc(101, 1, 2, 2)), set()),
    # multi-node: LOCAL_WORLD_SIZE != WORLD_SIZE, the other ranks live elsewhere
    ((proc(100, 0, 8, 4), proc(101, 1, 8, 4)), set()),
    ((proc(100, 4, 8, 4), proc(101, 5, 8, 4)), set()),
    # processes that disagree on WORLD_SIZE (and share no rendezvous) are two jobs, each
    # short of its own ranks: rank 0 of 4 misses 1-3, rank 1 of 2 misses 0
    ((proc(100, 0, 4, 4), proc(101, 1, 2, 2)), {0, 1, 2, 3}),
    # some process lacks WORLD_SIZE
    ((proc(100, 0, 4, 4), proc(101, 1, None, None)), set()),
    # no rank information at all
    ((proc(100), proc(101)), set()),
    # implausible world
    ((proc(100, 0, 100000, 100000),), set()),
    # a zombie does not count as running
    ((proc(100, 0, 2, 2), proc(101, 1, 2, 2, state="zombie")), set()),
])
def test_single_node_world_size_inference(procs, missing):
    snap = fold(procs_reading(7.0, *procs)).snapshot(8.0)
    inferred = {d.rank for d in snap.departed if d.reason == "missing from WORLD_SIZE"}
    assert inferred == missing
    for d in snap.departed:
        if d.reason == "missing from WORLD_SIZE":
            assert d.pid == 0 and d.gone_since == 8.0


def test_a_zombie_rank_is_reported_once_as_zombie_not_also_as_missing():
    snap = fold(procs_reading(1.0, proc(100, 0, 2, 2), proc(101, 1, 2, 2, state="zombie"))) \
        .snapshot(2.0)
    assert departed_of(snap) == {(101, 1, "zombie")}


def test_an_exited_rank_is_reported_once_as_exited_not_also_as_missing():
    snap = fold(procs_reading(1.0, proc(100, 0, 2, 2), proc(101, 1, 2, 2)),
                procs_reading(2.0, proc(100, 0, 2, 2))).snapshot(3.0)
    assert departed_of(snap) == {(101, 1, "exited")}


# -- GPUs and sources ------------------------------------------------------------------------

def test_gpu_reading_fills_the_snapshot():
    t = fold(gpus_reading(1.0, gpu(0), gpu(1), foreign=(77,), simulated=True), host="h", job="j")
    snap = t.snapshot(2.0)
    assert [g.index for g in snap.gpus] == [0, 1]
    assert snap.foreign_gpu_pids == (77,)
    assert snap.gpu_simulated is True
    assert (snap.host, snap.job, snap.timestamp) == ("h", "j", 2.0)


def test_failed_gpus_reading_clears_gpu_data_and_keeps_last_ok():
    t = fold(
        gpus_reading(1.0, gpu(0), foreign=(77,), simulated=True),
        Reading("gpus", 2.0, model.ERROR, None, "GPU is lost", "reset it"),
    )
    snap = t.snapshot(3.0)
    assert snap.gpus == ()
    assert snap.foreign_gpu_pids == ()
    assert snap.gpu_simulated is False
    state = snap.source("gpus")
    assert state == model.SourceState(name="gpus", status=model.ERROR, last_reading=2.0,
                                      last_ok=1.0, message="GPU is lost", remedy="reset it")


@pytest.mark.parametrize(("statuses", "last_reading", "last_ok"), [
    ([model.OK], 1.0, 1.0),
    ([model.OK, model.OK], 2.0, 2.0),
    ([model.DENIED], 1.0, None),
    ([model.OK, model.TIMEOUT, model.TIMEOUT], 3.0, 1.0),
    ([model.OK, model.ERROR, model.OK], 3.0, 3.0),
])
def test_source_state_ages(statuses, last_reading, last_ok):
    t = fold(*(Reading("procs", float(i + 1), s, ProcPoll() if s == model.OK else None)
               for i, s in enumerate(statuses)))
    state = t.snapshot(10.0).source("procs")
    assert state.status == statuses[-1]
    assert (state.last_reading, state.last_ok) == (last_reading, last_ok)


def test_sources_are_sorted_by_name_and_unknown_sources_are_kept_as_extra():
    other = Reading("rollout", 1.0, model.OK, {"x": 1})
    t = fold(procs_reading(1.0), other, gpus_reading(1.0))
    snap = t.snapshot(2.0)
    assert [s.name for s in snap.sources] == ["gpus", "procs", "rollout"]
    assert t.extra("rollout") is other
    assert t.extra("other") is None
    assert snap.source("nope") is None


def test_snapshot_is_a_frozen_view():
    t = fold(procs_reading(1.0, proc(100, 0)))
    first = t.snapshot(1.0)
    t.apply(procs_reading(2.0, proc(100, 0), proc(101, 1)))
    assert [p.pid for p in first.procs] == [100]
    with pytest.raises(AttributeError):
        first.timestamp = 5.0  # type: ignore[misc]


# -- History ---------------------------------------------------------------------------------

def test_history_is_bounded_and_oldest_first():
    h = History(maxlen=3)
    for t in range(5):
        h.append(NodeSnapshot(timestamp=float(t)))
    assert len(h) == 3
    assert [s.timestamp for s in h] == [2.0, 3.0, 4.0]
    assert [s.timestamp for s in h.items] == [2.0, 3.0, 4.0]
    assert isinstance(h.items, tuple)


def test_history_is_bounded_by_bytes_beyond_its_minimum():
    from rltui.snapshot import approx_bytes
    big = NodeSnapshot(timestamp=0.0, gpus=tuple(GpuSample(index=i, name="H100", uuid=f"GPU-{i}") for i in range(8)))
    size = approx_bytes(big)
    h = History(maxlen=100, max_bytes=10 * size, min_keep=4)
    for t in range(50):
        h.append(replace(big, timestamp=float(t)))
    assert len(h) == 10 and h.bytes == 10 * size  # count allows 100; bytes allow 10
    assert next(iter(h)).timestamp == 40.0
    tight = History(maxlen=100, max_bytes=size, min_keep=4)  # the minimum wins over bytes
    for t in range(10):
        tight.append(replace(big, timestamp=float(t)))
    assert [s.timestamp for s in tight] == [6.0, 7.0, 8.0, 9.0]
    counted = History(maxlen=3, max_bytes=10 * size, min_keep=1)  # and count over bytes
    for t in range(5):
        counted.append(replace(big, timestamp=float(t)))
    assert len(counted) == 3 and counted.bytes == 3 * size


def test_history_since_is_inclusive():
    h = History(maxlen=10)
    for t in (1.0, 2.0, 3.0, 4.0):
        h.append(NodeSnapshot(timestamp=t))
    assert [s.timestamp for s in h.since(2.0)] == [2.0, 3.0, 4.0]
    assert list(h.since(5.0)) == []


def _stack_poll(t: float, *pids: int) -> model.StackPoll:
    return model.StackPoll(dumps=tuple(model.ProcessDump(pid=p, rank=i) for i, p in
                                       enumerate(pids)), started=t, finished=t)


def test_stack_rounds_are_kept_oldest_first_and_bounded():
    from rltui.snapshot import STACK_SAMPLES
    polls = [_stack_poll(float(i), 100, 101) for i in range(STACK_SAMPLES + 2)]
    t = fold(*(Reading("stacks", p.started, model.OK, p) for p in polls))
    assert t.snapshot(9.0).stacks == tuple(polls[-STACK_SAMPLES:])


def test_a_failed_stack_round_keeps_the_earlier_samples_and_says_why():
    good = _stack_poll(1.0, 100)
    denied = Reading("stacks", 2.0, model.DENIED, model.StackPoll(), message="ptrace denied")
    snap = fold(Reading("stacks", 1.0, model.OK, good), denied).snapshot(3.0)
    assert snap.stacks == (good,)
    assert snap.source("stacks").status == model.DENIED


def test_an_empty_good_stack_round_clears_the_old_rounds_and_a_repeat_is_kept_once():
    good = _stack_poll(1.0, 100)
    t = fold(Reading("stacks", 1.0, model.OK, good), Reading("stacks", 1.1, model.OK, good))
    assert t.snapshot(2.0).stacks == (good,)
    t.apply(Reading("stacks", 3.0, model.OK, model.StackPoll(started=3.0),
                    message="no job processes to dump"))
    assert t.snapshot(4.0).stacks == ()
