"""ClusterMonitor: two or more hosts' readings folded per host, merged into one job, diagnosed.

Hosts are fed real model values through ``ingest`` as the agent streams will feed them. Both
hosts number their processes from the same pids (4100 + local rank), as containers do: nothing
may confuse a pid of one node with the same pid on another.
"""

from __future__ import annotations

import pytest

from rltui.agent import protocol
from rltui.cluster import ClusterMonitor, HostStatus
from rltui.cluster.diagnose import DUPLICATE_RANKS, HOST_LOST
from rltui.cluster.view import GPU_STRIDE, RANK_LIVE, RANK_UNKNOWN
from rltui.diagnosis import diagnose
from rltui.diagnosis.stacks import CLEANUP_DEADLOCK, COLLECTIVE_MISMATCH, SAME_COLLECTIVE, classify
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
from rltui.remote.status import StreamStatus
from tests.fakes.scenarios import saved_dumps

T0 = 1_700_000_000.0
A, B = "node-a", "node-b"
PID = 4100  # pid of local rank 0 on every host

DIST = "torch/distributed/distributed_c10d.py"
FRAMES = {
    "all_reduce": (DIST, 2501), "recv_object_list": (DIST, 3100),
    "destroy_process_group": (DIST, 1900), "Trainer._sync_gradients": ("trainer.py", 256),
    "Trainer.train_step": ("trainer.py", 252), "Trainer.train": ("trainer.py", 236),
    "main": ("run.py", 88), "PipelineSchedule._shape_inference": ("pipe.py", 191),
    "PipelineSchedule.step": ("pipe.py", 185), "Trainer._run_train": ("trainer.py", 243),
    "FSDPActor.destroy": ("actor.py", 174), "Trainer.close": ("trainer.py", 223),
    "Trainer.__exit__": ("trainer.py", 215), "FSDPActor.forward": ("actor.py", 158),
    "FSDPActor.backward": ("actor.py", 169),
}
SAME = ["all_reduce", "Trainer._sync_gradients", "Trainer.train_step", "Trainer.train", "main"]
RECV = ["recv_object_list", "PipelineSchedule._shape_inference", "PipelineSchedule.step",
        "Trainer._run_train", "Trainer.train", "main"]
CLEANUP = ["destroy_process_group", "FSDPActor.destroy", "Trainer.close", "Trainer.__exit__",
           "main"]
FORWARD = ["all_reduce", "FSDPActor.forward", "Trainer.train_step", "Trainer.train", "main"]
BACKWARD = ["all_reduce", "FSDPActor.backward", "Trainer.train_step", "Trainer.train", "main"]


def proc(local: int, node: int, *, env_rank: bool = True, lws: int = 4, world: int = 8,
         env=(), offset: float = 0.0) -> ProcInfo:
    return ProcInfo(
        pid=PID + local, ppid=4000, name="python", cmdline=("python", "train.py"),
        rank=node * lws + local if env_rank else None, local_rank=local, world_size=world,
        local_world_size=lws, role="trainer", cpu_percent=0.0, state="sleeping",
        create_time=T0 - 600 + offset, gpu_index=local, gpu_from="env", debug_env=tuple(env),
        stdout_path=f"/job/logs/out{local}.log")


def procs(t: float, infos) -> Reading:
    return Reading("procs", t, OK, ProcPoll(procs=tuple(infos), how="env RANK/LOCAL_RANK"))


def gpus(t: float, utils) -> Reading:
    return Reading("gpus", t, OK, GpuPoll(gpus=tuple(
        GpuSample(i, "H100", f"GPU-{i}", util=u, mem_used=1 << 30, mem_total=80 << 30)
        for i, u in enumerate(utils))))


def dump(local: int, names, rank: int | None, status: str = "idle") -> ProcessDump:
    frames = tuple(Frame(n, *FRAMES[n]) for n in names)
    return ProcessDump(pid=PID + local, rank=rank, source="live",
                       threads=(ThreadStack(1, "MainThread", status, frames),))


def stacks(t: float, dumps) -> Reading:
    return Reading("stacks", t + 0.5, OK, StackPoll(dumps=tuple(dumps), started=t,
                                                    finished=t + 0.5))


def node(cm: ClusterMonitor, host: str, node_rank: int, t: float, *, locals_=range(4),
         where=None, utils=(95.0,) * 4, skew=None, offset: float = 0.0, **kw) -> None:
    """One second of a host: procs and GPUs, and a stack round when ``where`` (local rank ->
    frames) is given. ``offset``: how far the host's clock is ahead of ours."""
    at = t + offset
    cm.ingest(host, gpus(at, utils), skew)
    cm.ingest(host, procs(at, [proc(i, node_rank, offset=offset, **kw) for i in locals_]), skew)
    if where is not None:
        rank = (lambda i: node_rank * 4 + i) if kw.get("env_rank", True) else (lambda i: None)
        cm.ingest(host, stacks(at, [dump(i, where[i], rank(i)) for i in where]), skew)


def two_hosts(where_a=None, where_b=None, seconds=(0, 10), **kw) -> ClusterMonitor:
    cm = ClusterMonitor([A, B], job="torchrun --nnodes 2 train.py")
    for s in seconds:
        node(cm, A, 0, T0 + s, where=where_a, **kw)
        node(cm, B, 1, T0 + s, where=where_b, **kw)
    return cm


def ids(diagnosis) -> list[str]:
    return [s.id for s in diagnosis.symptoms]


def symptom(diagnosis, sid):
    found = [s for s in diagnosis.symptoms if s.id == sid]
    assert len(found) == 1, ids(diagnosis)
    return found[0]


# -- ranks and nodes ---------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [
    {},  # RANK in every process's environment
    {"env_rank": False, "env": ()},  # no RANK: the caller's node ranks (below)
])
def test_two_hosts_of_four_ranks_give_global_ranks_0_to_7(kw):
    cm = ClusterMonitor([A, B], node_ranks={A: 0, B: 1} if kw else None)
    node(cm, A, 0, T0, **kw)
    node(cm, B, 1, T0, **kw)
    snap, diag = cm.evaluate(T0 + 1)
    assert [(r.rank, r.host, r.pid, r.state) for r in snap.ranks] == (
        [(i, A, PID + i, RANK_LIVE) for i in range(4)]
        + [(4 + i, B, PID + i, RANK_LIVE) for i in range(4)])
    assert sorted(p.rank for p in snap.merged.procs) == list(range(8))
    assert {r.node_rank for r in snap.ranks if r.host == B} == ({1} if kw else {None})
    # the GPU table groups by node; the merged view numbers them cluster-wide
    assert [(h, [g.index for g in gs]) for h, gs in snap.gpus_by_node()] == [
        (A, [0, 1, 2, 3]), (B, [0, 1, 2, 3])]
    assert [g.index for g in snap.merged.gpus][4:] == [GPU_STRIDE + i for i in range(4)]
    assert snap.gpu_of(GPU_STRIDE + 2) == (B, 2)
    assert {p.gpu_index for p in snap.merged.procs if p.rank == 6} == {GPU_STRIDE + 2}
    assert diag.verdict == "healthy", diag.symptoms
    assert not snap.duplicates and not snap.notes


@pytest.mark.parametrize(("env_a", "env_b", "node_ranks", "expected", "unknown"), [
    ([("NODE_RANK", "0")], [("NODE_RANK", "1")], None, list(range(8)), 0),
    ([("GROUP_RANK", "1")], [("GROUP_RANK", "0")], None, [4, 5, 6, 7, 0, 1, 2, 3], 0),
    ([], [], {A: 1, B: 0}, [4, 5, 6, 7, 0, 1, 2, 3], 0),
    ([("NODE_RANK", "0")], [], None, [0, 1, 2, 3], 4),  # B says nothing: not guessed
])
def test_global_rank_from_node_rank_and_local_rank(env_a, env_b, node_ranks, expected,
                                                   unknown):
    cm = ClusterMonitor([A, B], node_ranks=node_ranks)
    node(cm, A, 0, T0, env_rank=False, env=env_a)
    node(cm, B, 1, T0, env_rank=False, env=env_b)
    snap, _ = cm.evaluate(T0 + 1)
    by_host = {(r.host, r.local_rank): r.rank for r in snap.ranks}
    got = [by_host[(h, i)] for h in (A, B) for i in range(4)]
    assert [g for g in got if g is not None] == expected
    assert got.count(None) == unknown
    if unknown:
        assert any(n.startswith(f"{B}: 4 process(es) with LOCAL_RANK without RANK")
                   for n in snap.notes), snap.notes


def test_ranks_of_world_size_on_no_watched_host_are_noted():
    cm = ClusterMonitor([A])
    node(cm, A, 0, T0, world=12)
    snap, _ = cm.evaluate(T0 + 1)
    assert any("ranks 4-11 of WORLD_SIZE 12 are on no watched host" in n for n in snap.notes)


def test_duplicate_ranks_are_reported_not_merged():
    cm = ClusterMonitor([A, B])
    both = {i: SAME for i in range(4)}
    for s in (0, 10):
        node(cm, A, 0, T0 + s, where=both)
        node(cm, B, 0, T0 + s, where=both)  # B launched with A's node rank
    snap, diag = cm.evaluate(T0 + 11)
    assert [(d.rank, d.claims) for d in snap.duplicates] == [
        (i, ((A, PID + i), (B, PID + i))) for i in range(4)]
    dup = symptom(diag, DUPLICATE_RANKS)
    assert dup.ranks == (0, 1, 2, 3) and dup.severity == "warning"
    assert f"rank 0: {A} pid {PID}, {B} pid {PID} (kept: {A})" in dup.evidence
    assert [(r.host, r.duplicate) for r in snap.ranks if r.rank == 2] == [(A, False)]
    assert [r.duplicate for r in snap.ranks if r.host == B] == [True] * 4
    # the merged view gives each rank once; B's processes are there without a rank
    merged = snap.merged.procs
    assert sorted(p.rank for p in merged if p.rank is not None) == [0, 1, 2, 3]
    assert sum(p.rank is None for p in merged) == 4
    # and B's dumps are not mixed into A's ranks' stacks
    assert snap.stack_report.tree.members == (0, 1, 2, 3)
    assert not snap.stack_report.duplicate_ranks


def test_a_live_host_keeps_a_rank_a_lost_host_last_had():
    """A replacement node took over ranks 4-7 of a lost one: reported, and kept by the node
    that answers."""
    c = "node-c"
    cm = ClusterMonitor([A, B, c])
    node(cm, A, 0, T0)
    node(cm, B, 1, T0)
    node(cm, c, 1, T0 + 5)
    cm.set_status(B, "lost", last_seen=T0, reason="node down")
    snap, diag = cm.evaluate(T0 + 6)
    assert [d.claims for d in snap.duplicates][0] == ((c, PID), (B, PID))
    assert sorted(p.rank for p in snap.merged.procs) == list(range(8))
    assert [r.host for r in snap.ranks if r.rank == 5 and not r.duplicate] == [c]
    assert {DUPLICATE_RANKS, HOST_LOST} <= set(ids(diag))


def test_source_states_merge_per_kind_naming_the_failing_hosts():
    cm = ClusterMonitor([A, B])
    node(cm, A, 0, T0)
    node(cm, B, 1, T0 + 0.5)
    cm.ingest(A, Reading("gpus", T0 + 1, "unavailable", None, "No NVIDIA driver", "install it"))
    snap, diag = cm.evaluate(T0 + 2)
    gpu_state = snap.merged.source("gpus")
    assert (gpu_state.status, gpu_state.message, gpu_state.remedy) == (
        "unavailable", f"{A}: No NVIDIA driver", "install it")
    assert gpu_state.last_reading == T0 + 0.5 and gpu_state.last_ok == T0
    assert snap.merged.source("procs").status == "ok"
    assert f"gpus: unavailable: {A}: No NVIDIA driver" in diag.notes
    assert [g.index for g in snap.merged.gpus] == [GPU_STRIDE + i for i in range(4)]


# -- clock skew --------------------------------------------------------------------------------

def _steps(t: float, host_offset: float, last: int) -> Reading:
    """A log whose steps came every 5 s up to ``last`` s after T0, on the host's clock."""
    steps = tuple(StepRecord(step=k, line_no=k, arrival=T0 + 5 * k + host_offset,
                             time=T0 + 5 * k + host_offset) for k in range(last // 5 + 1))
    return Reading("logs", t + host_offset, OK, LogPoll(files=(
        LogUpdate("/job/logs/rank4.log", OK, rank=4, format="verl", steps=steps),)))


@pytest.mark.parametrize(("offset", "skew", "stalled"), [
    (100.0, -100.0, False),  # B's clock 100 s ahead, corrected
    (-100.0, 100.0, False),  # B's clock 100 s behind, corrected
    (-100.0, None, True),  # behind and not corrected: its last step looks 110 s old
    (0.0, None, False),
])
def test_skew_corrects_ages(offset, skew, stalled):
    cm = ClusterMonitor([A, B])
    for s in range(0, 61, 10):
        node(cm, A, 0, T0 + s)
        node(cm, B, 1, T0 + s, offset=offset, skew=skew)
        cm.ingest(B, _steps(T0 + s, offset, last=s), skew)
    snap, diag = cm.evaluate(T0 + 60)
    b = snap.node(B).snapshot
    expected = T0 + 60 + (offset if skew is None else 0.0)
    assert b.source("procs").last_reading == expected
    assert snap.node(B).skew == skew
    assert {p.create_time for p in b.procs} == {T0 - 600 + (offset if skew is None else 0.0)}
    assert ("steps-stalled" in ids(diag)) is stalled
    if stalled:
        assert any(e.startswith(f"{B}:/job/logs/rank4.log: last step 12 ")
                   for e in symptom(diag, "steps-stalled").evidence)


# -- stacks across nodes -----------------------------------------------------------------------

def test_cleanup_deadlock_across_nodes_is_pattern_a():
    """Rank 3 on A sits in destroy_process_group; ranks 4-7 on B (and 0-2 on A) wait in recv
    for it: one tree, pattern A, rank 3 the suspect."""
    cm = two_hosts(where_a={0: RECV, 1: RECV, 2: RECV, 3: CLEANUP},
                   where_b={i: RECV for i in range(4)}, utils=(0.0,) * 4)
    snap, diag = cm.evaluate(T0 + 11)
    report = snap.stack_report
    assert report.pattern == "A" and report.suspect_ranks == (3,)
    assert report.tree.members == tuple(range(8)) and report.samples == 2 and report.confirmed
    assert {c.ranks: c.teardown for c in report.classes} == {(0, 1, 2, 4, 5, 6, 7): False,
                                                             (3,): True}
    hang = symptom(diag, CLEANUP_DEADLOCK)
    assert hang.severity == "critical" and hang.ranks == (3,) and hang.since == T0
    assert cm.stacks is report
    # each node alone sees only half of it: B alone looks like every rank in one collective
    b = snap.node(B).snapshot
    assert classify([p.dumps for p in b.stacks]).pattern == "C"


def test_a_rank_that_exited_on_a_while_b_waits_is_pattern_a():
    cm = ClusterMonitor([A, B])
    waiting = {i: SAME for i in range(4)}
    node(cm, A, 0, T0)
    node(cm, B, 1, T0)
    for s in (10, 20):
        node(cm, A, 0, T0 + s, locals_=range(3), where={i: SAME for i in range(3)})
        node(cm, B, 1, T0 + s, where=waiting)
    snap, diag = cm.evaluate(T0 + 21)
    assert snap.stack_report.pattern == "A" and snap.stack_report.missing_ranks == (3,)
    assert symptom(diag, CLEANUP_DEADLOCK).title == \
        "rank 3 exited; ranks 0-2,4-7 wait for it in all_reduce"
    exited = symptom(diag, "rank-exited")
    assert exited.ranks == (3,)
    assert [(r.rank, r.host, r.state) for r in snap.ranks if r.state != RANK_LIVE] == [
        (3, A, "exited")]


@pytest.mark.parametrize(("where_a", "where_b", "pattern", "symptom_id"), [
    ({i: SAME for i in range(4)}, {i: SAME for i in range(4)}, "C", SAME_COLLECTIVE),
    ({i: FORWARD for i in range(4)}, {0: BACKWARD, 1: FORWARD, 2: FORWARD, 3: FORWARD}, "B",
     COLLECTIVE_MISMATCH),
])
def test_one_classification_across_nodes(where_a, where_b, pattern, symptom_id):
    cm = two_hosts(where_a=where_a, where_b=where_b, utils=(0.0,) * 4)
    snap, diag = cm.evaluate(T0 + 11)
    report = snap.stack_report
    assert report.pattern == pattern and report.tree.members == tuple(range(8))
    assert symptom(diag, symptom_id).severity == "critical"
    if pattern == "C":
        assert [c.ranks for c in report.classes] == [tuple(range(8))]
    else:
        assert report.suspect_ranks == (4,)


def test_rounds_align_from_the_newest_when_hosts_sample_at_different_times():
    """A has three rounds, B one (it joined later): the merged samples are A's three, the last
    with B's round; B's ranks are compared in the latest sample only."""
    cm = ClusterMonitor([A, B])
    for s in (0, 10, 20):
        node(cm, A, 0, T0 + s, where={i: SAME for i in range(4)})
    node(cm, B, 1, T0 + 23, where={i: SAME for i in range(4)})
    snap, _ = cm.evaluate(T0 + 24)
    assert [sorted(d.rank for d in p.dumps) for p in snap.stacks] == [
        [0, 1, 2, 3], [0, 1, 2, 3], list(range(8))]
    assert snap.stacks[-1].started == T0 + 20 and snap.stack_report.pattern == "C"


def test_real_pyspy_dumps_split_over_two_nodes():
    """fixtures/stacks/torch-gloo/cleanup-deadlock (a real gloo job): ranks 0-1 on A wait in
    all_reduce, rank 2 on B sits in barrier from Trainer.__exit__. A helper process on A that
    exited had the pid B's rank 2 has: B's dump must stay (keyed by pid alone, it would go)."""
    dumps = {d.rank: d for d in saved_dumps("torch-gloo/cleanup-deadlock")}
    pid0, pid1, pid2 = (dumps[r].pid for r in range(3))

    def info(rank, pid):
        return ProcInfo(pid=pid, rank=rank, local_rank=rank % 2, world_size=3,
                        local_world_size=2, state="sleeping")

    cm = ClusterMonitor([A, B])
    cm.ingest(A, procs(T0, [info(0, pid0), info(1, pid1), ProcInfo(pid=pid2, name="helper")]))
    cm.ingest(B, procs(T0, [info(2, pid2)]))
    for s in (10, 20):
        cm.ingest(A, procs(T0 + s, [info(0, pid0), info(1, pid1)]))
        cm.ingest(A, stacks(T0 + s, [dumps[0], dumps[1]]))
        cm.ingest(B, procs(T0 + s, [info(2, pid2)]))
        cm.ingest(B, stacks(T0 + s, [dumps[2]]))
    snap, diag = cm.evaluate(T0 + 21)
    assert [(d.pid, d.rank) for d in snap.merged.departed] == [(pid2, None)]
    report = snap.stack_report
    assert report.tree.members == (0, 1, 2)
    assert report.pattern == "A" and report.suspect_ranks == (2,)
    assert symptom(diag, CLEANUP_DEADLOCK).title.startswith("Cleanup deadlock: rank 2 in "
                                                            "teardown")


def test_a_rank_restarted_on_another_host_is_not_exited():
    """Elastic: rank 3 left A and came back on B; neither exited nor a duplicate."""
    cm = ClusterMonitor([A, B])
    node(cm, A, 0, T0)
    node(cm, B, 1, T0, locals_=())
    node(cm, A, 0, T0 + 10, locals_=range(3))
    cm.ingest(B, procs(T0 + 10, [replace(proc(0, 1), rank=3)]))
    snap, diag = cm.evaluate(T0 + 20)
    assert not snap.merged.departed and not snap.duplicates
    assert "rank-exited" not in ids(diag)
    assert [(r.rank, r.host, r.state) for r in snap.ranks if r.rank == 3] == [
        (3, A, "exited"), (3, B, RANK_LIVE)]


# -- GPUs across nodes -------------------------------------------------------------------------

@pytest.mark.parametrize(("utils_a", "utils_b", "idle"), [
    # A: one GPU idle, none busy; B: all busy. Neither node alone has both.
    ((0.0, 30.0, 30.0, 30.0), (95.0,) * 4, (0,)),
    ((95.0, 95.0, 2.0, 95.0), (95.0,) * 4, (2,)),
    ((95.0,) * 4, (95.0,) * 4, ()),
])
def test_idle_vs_busy_spans_nodes(utils_a, utils_b, idle):
    cm = ClusterMonitor([A, B])
    for s in range(41):
        node(cm, A, 0, T0 + s, utils=utils_a)
        node(cm, B, 1, T0 + s, utils=utils_b)
        snap, diag = cm.evaluate(T0 + s)
    if not idle:
        assert "gpu-idle-vs-busy" not in ids(diag)
        return
    found = symptom(diag, "gpu-idle-vs-busy")
    assert found.ranks == idle
    i = idle[0]
    assert f"{A} GPU {i} (rank {i}): {utils_a[i]:.0f}% utilisation, idle" in found.evidence
    assert f"{B} GPU 3 (rank 7): 95% utilisation, busy" in found.evidence
    # Pids repeat across nodes: the dump loop is one per node, over ssh, never a bare pid list.
    (dump,) = [step for step in found.next_steps if "py-spy dump --pid $p" in step]
    assert f"on {A}: for p in" in dump and f"on {B}: for p in" in dump
    assert "not one: for p in" not in dump
    if utils_a[1] == 30.0:  # the per-node rule on A sees no busy GPU at all
        a = cm.monitors[A]
        assert "gpu-idle-vs-busy" not in ids(diagnose(a.snapshot, a.history.items))
    # the merged history keeps what the window needs, not every second since the start
    assert len(cm.history) <= 30 + 5 + 2


# -- hosts that do not answer ------------------------------------------------------------------

@pytest.mark.parametrize("b_state", ["lost", "connecting", "exited"])
def test_a_lost_hosts_ranks_are_unknown_not_exited(b_state):
    cm = ClusterMonitor([A, B])
    waiting = {i: SAME for i in range(4)}
    for s in (0, 10, 20):
        node(cm, A, 0, T0 + s, where=waiting)
        node(cm, B, 1, T0 + s, where=waiting)
    for s in (30, 40):
        node(cm, A, 0, T0 + s, where=waiting)
        if b_state == "exited":  # B answers: its ranks are gone
            node(cm, B, 1, T0 + s, locals_=())
    if b_state != "exited":  # connecting: reconnecting after it had data
        cm.set_status(B, b_state, last_seen=T0 + 20.5,
                      reason="ssh exited 255: connection reset")
    snap, diag = cm.evaluate(T0 + 41)
    b_ranks = [(r.rank, r.state) for r in snap.ranks if r.host == B]
    if b_state == "exited":
        assert b_ranks == [(4 + i, "exited") for i in range(4)]
        assert symptom(diag, "rank-exited").ranks == (4, 5, 6, 7)
        assert snap.stack_report.pattern == "A"
        return
    assert b_ranks == [(4 + i, RANK_UNKNOWN) for i in range(4)]
    assert {r.last_seen for r in snap.ranks if r.host == B} == {T0 + 20.5}
    assert "rank-exited" not in ids(diag)
    lost = symptom(diag, HOST_LOST)
    assert lost.ranks == (4, 5, 6, 7) and lost.severity == "warning"
    assert lost.title == f"{B} not answering: ranks 4-7 unknown"
    assert lost.evidence == (f"{B}: {b_state}, last heard 20 s ago: ssh exited 255: connection "
                             "reset; ranks 4-7 alive when last seen, now unknown (not counted "
                             "as exited)",)
    # the stacks compare the ranks that answer; B's are neither present nor missing
    report = snap.stack_report
    assert report.tree.members == (0, 1, 2, 3) and report.missing_ranks == ()
    assert report.pattern == "C"
    hang = symptom(diag, SAME_COLLECTIVE)
    assert ("ranks 4-7 on hosts that do not answer: not in the comparison, unknown rather "
            "than exited") in hang.evidence
    assert (f"{B} is {b_state}: ranks 4-7 left out of the stack comparison (unknown, not "
            "exited)") in snap.notes
    # B's GPUs (last seen busy) are not judged either
    assert all(g.index < GPU_STRIDE for g in snap.merged.gpus)
    assert snap.lost == (snap.node(B),) and not snap.node(B).merged


def test_stream_status_and_reading_messages_feed_the_monitor():
    """What a later step wires: decoded protocol lines and AgentStream.status()."""
    cm = ClusterMonitor()
    line = protocol.encode(protocol.ReadingMessage(host=B, t=T0 + 100,
                                                   reading=procs(T0 + 100, [proc(0, 1)])))
    msg = protocol.decode(line)
    folded = cm.ingest_message(msg, skew_s=-100.0)
    assert folded.timestamp == T0 and list(cm.monitors) == [B]
    cm.update_status(StreamStatus(host=B, state="slow", since=T0, last_seen=T0 + 1, reason="",
                                  skew=-99.5, problems=(), attempts=1, retry_at=None,
                                  hello=None, pid=None, stderr=""))
    snap, diag = cm.evaluate(T0 + 9)
    assert snap.node(B).status == HostStatus(B, "slow", T0 + 1, "")
    assert snap.node(B).skew == -99.5 and snap.node(B).merged
    assert [r.rank for r in snap.ranks] == [4]
    assert f"{B} is slow: last heard 8 s ago; its data may be stale" in diag.notes


def test_hosts_without_data_are_connecting_and_noted():
    cm = ClusterMonitor([A, B])
    node(cm, A, 0, T0)
    snap, diag = cm.evaluate(T0 + 1)
    assert snap.node(B).status.state == "connecting" and snap.node(B).snapshot is None
    assert f"{B}: connecting, no data yet" in diag.notes
    assert HOST_LOST not in ids(diag)


def test_classification_is_reused_while_the_rounds_stay_the_same():
    cm = two_hosts(where_a={i: SAME for i in range(4)}, where_b={i: SAME for i in range(4)})
    first, _ = cm.evaluate(T0 + 11)
    node(cm, A, 0, T0 + 12)  # new procs and GPUs, no new round
    second, _ = cm.evaluate(T0 + 12)
    assert second.stacks == first.stacks and second.stack_report is first.stack_report
