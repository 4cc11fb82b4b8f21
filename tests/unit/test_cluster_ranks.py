"""Global ranks across nodes and the skew correction of readings (rltui.cluster, pure)."""

from __future__ import annotations

import pytest

from rltui.cluster import ranks as r
from rltui.cluster.skew import to_local
from rltui.model import (
    OK,
    Frame,
    GpuPoll,
    GpuSample,
    LogEvent,
    LogPoll,
    LogUpdate,
    ProcessDump,
    ProcInfo,
    ProcPoll,
    Reading,
    StackPoll,
    StepRecord,
    ThreadStack,
)
from tests.importcheck import forbidden_loaded


def proc(rank=None, local=None, world=None, lws=None, env=(), pid=100) -> ProcInfo:
    return ProcInfo(pid=pid, rank=rank, local_rank=local, world_size=world,
                    local_world_size=lws, debug_env=tuple(env))


@pytest.mark.parametrize(("p", "given", "rank", "how"), [
    # RANK from the environment is already global, whatever else is set
    (proc(rank=5, local=1, lws=4, env=[("NODE_RANK", "3")]), None, 5, r.FROM_RANK),
    (proc(rank=0, local=0), 7, 0, r.FROM_RANK),
    # node rank x local world + local rank, the node rank from NODE_RANK or GROUP_RANK
    (proc(local=2, lws=4, env=[("NODE_RANK", "1")]), None, 6, r.FROM_NODE_RANK),
    (proc(local=3, lws=8, env=[("GROUP_RANK", "15")]), None, 123, r.FROM_GROUP_RANK),
    (proc(local=1, lws=4, env=[("NODE_RANK", "2"), ("GROUP_RANK", "9")]), None, 9,
     r.FROM_NODE_RANK),
    # the process's own node rank wins over the caller's
    (proc(local=1, lws=4, env=[("NODE_RANK", "1")]), 3, 5, r.FROM_NODE_RANK),
    (proc(local=1, lws=4), 3, 13, r.FROM_GIVEN),
    # node 0 needs no local world size
    (proc(local=2, env=[("NODE_RANK", "0")]), None, 2, r.FROM_NODE_RANK),
    (proc(local=2, env=[("NODE_RANK", "1")]), None, None, r.NO_LOCAL_WORLD),
    # the whole world on one node: LOCAL_RANK is the rank
    (proc(local=3, world=4, lws=4), None, 3, r.FROM_SINGLE_NODE),
    (proc(local=3, world=8, lws=4), None, None, r.NO_NODE_RANK),
    (proc(local=3), None, None, r.NO_NODE_RANK),
    (proc(), None, None, r.NO_RANK),
    # malformed or negative node ranks are no node rank
    (proc(local=1, lws=4, env=[("NODE_RANK", "x"), ("GROUP_RANK", "-1")]), None, None,
     r.NO_NODE_RANK),
])
def test_global_rank(p, given, rank, how):
    assert r.global_rank(p, given) == (rank, how)


@pytest.mark.parametrize(("procs", "given", "node"), [
    ([proc(env=[("NODE_RANK", "2")]), proc(env=[("NODE_RANK", "2")])], None, 2),
    ([proc(env=[("NODE_RANK", "2")]), proc(env=[("GROUP_RANK", "3")])], None, None),
    ([proc(), proc()], None, None),
    ([proc(env=[("NODE_RANK", "2")])], 5, 5),
])
def test_the_node_rank_a_host_agrees_on(procs, given, node):
    assert r.node_rank_of(procs, given) == node


def test_duplicates_are_ranks_claimed_by_more_than_one_host():
    claims = {0: [("a", 10), ("b", 10)], 1: [("a", 11)], 2: [("a", 12), ("a", 13)],
              3: [("b", 5), ("a", 6), ("c", 7)]}
    found = r.duplicates(claims)
    assert [(d.rank, d.claims) for d in found] == [
        (0, (("a", 10), ("b", 10))), (3, (("b", 5), ("a", 6), ("c", 7)))]


# -- skew ------------------------------------------------------------------------------------------

T = 1_700_000_000.0


def _readings(t: float) -> list[Reading]:
    step = StepRecord(step=3, line_no=9, arrival=t, time=t - 1.0)
    return [
        Reading("gpus", t, OK, GpuPoll(gpus=(GpuSample(0, "H100", "GPU-0", util=50.0),))),
        Reading("procs", t, OK, ProcPoll(procs=(ProcInfo(pid=1, rank=0, create_time=t - 60),
                                                ProcInfo(pid=2, rank=1)))),
        Reading("logs", t, OK, LogPoll(files=(
            LogUpdate("/l/rank0.log", OK, rank=0, steps=(step, StepRecord(4, 10, t))),
            LogUpdate("/l/rank1.log", OK, events=(LogEvent("traceback", 1, 2, t, "boom",
                                                           time=t - 2.0),)),
            LogUpdate("/l/quiet.log", OK)))),
        Reading("stacks", t, OK, StackPoll(
            dumps=(ProcessDump(1, 0, (ThreadStack(1, "MainThread", "idle",
                                                  (Frame("f", "f.py", 1),)),), timestamp=t),
                   ProcessDump(2, 1)),
            started=t - 0.5, finished=t)),
        Reading("custom", t, OK, {"x": 1}),
    ]


def _times(reading: Reading) -> list[float | None]:
    """Every time a reading carries, in a fixed order."""
    out: list[float | None] = [reading.timestamp]
    p = reading.payload
    if isinstance(p, ProcPoll):
        out += [x.create_time for x in p.procs]
    elif isinstance(p, LogPoll):
        for u in p.files:
            out += [v for s in u.steps for v in (s.arrival, s.time)]
            out += [v for e in u.events for v in (e.arrival, e.time)]
    elif isinstance(p, StackPoll):
        out += [p.started, p.finished] + [d.timestamp for d in p.dumps]
    return out


@pytest.mark.parametrize("skew", [-100.0, 100.0, 0.25])
def test_every_node_clock_time_moves_by_the_skew(skew):
    for before in _readings(T):
        after = to_local(before, skew)
        assert _times(after) == [None if v is None else v + skew for v in _times(before)]
        assert after.source == before.source and after.status == before.status
    # A host 100 s ahead stamps T + 100 at our T; its skew (receive - agent) is -100.
    assert to_local(_readings(T + 100)[1], -100.0).timestamp == T


@pytest.mark.parametrize("skew", [None, 0.0])
def test_no_skew_leaves_the_reading_as_it_is(skew):
    for reading in _readings(T):
        assert to_local(reading, skew) is reading


def test_the_cluster_package_is_pure():
    modules = ["rltui.cluster", "rltui.cluster.monitor", "rltui.cluster.merge",
               "rltui.cluster.stackmerge", "rltui.cluster.diagnose", "rltui.cluster.skew"]
    assert forbidden_loaded(modules, ["textual", "rich", "pynvml", "psutil", "subprocess"]) == []
