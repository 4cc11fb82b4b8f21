"""Stack merge and hang classification (playbook section 1, patterns A, B, C).

Dumps are built directly, frames innermost first as py-spy prints them, mirroring the demo job's
real stacks (py-spy 0.4 on Python 3.11 names methods ``Class.method``).
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from rltui.diagnosis.stacks import (BUSY_LOOP, CLEANUP_DEADLOCK, COLLECTIVE_MISMATCH,
                                    PROGRESSING, SAME_COLLECTIVE, WORKING, classify,
                                    report_json, symptoms)
from rltui.diagnosis.stacktree import choose_thread, comm_tier, merge, trim_path
from rltui.model import Frame, ProcessDump, ThreadStack

SITE = "/opt/env/lib/python3.11/site-packages/"
FILES = {
    "all_reduce": "rltui/demo/dist.py", "recv_object_list": "rltui/demo/dist.py",
    "destroy_process_group": "rltui/demo/dist.py", "main": "rltui/demo/rank.py",
}
LINES = {"Trainer._sync_gradients": 256, "Trainer.train_step": 252, "Trainer.train": 236,
         "main": 88, "all_reduce": 142, "FSDPActor.forward": 158, "FSDPActor.backward": 169,
         "recv_object_list": 178, "PipelineSchedule._shape_inference": 191,
         "PipelineSchedule.step": 185, "Trainer._run_train": 243, "destroy_process_group": 186,
         "FSDPActor.destroy": 174, "Trainer.close": 223, "Trainer.__exit__": 215}

PATTERN_C = ["all_reduce", "Trainer._sync_gradients", "Trainer.train_step", "Trainer.train",
             "main"]
PIPE_WAIT = ["recv_object_list", "PipelineSchedule._shape_inference", "PipelineSchedule.step",
             "Trainer._run_train", "Trainer.train", "main"]
CLEANUP = ["destroy_process_group", "FSDPActor.destroy", "Trainer.close", "Trainer.__exit__",
           "main"]
FORWARD = ["all_reduce", "FSDPActor.forward", "Trainer.train_step", "Trainer.train", "main"]
BACKWARD = ["all_reduce", "FSDPActor.backward", "Trainer.train_step", "Trainer.train", "main"]


def frame(name: str, line: int | None = None, site: bool = False) -> Frame:
    file = FILES.get(name, "rltui/demo/trainer.py")
    return Frame(name=name, filename=(SITE + file) if site else file,
                 line=LINES.get(name, 1) if line is None else line)


def dump(rank: int, names, status: str = "idle", lines: dict | None = None,
         extra_threads=(), site: bool = False) -> ProcessDump:
    lines = lines or {}
    frames = tuple(frame(n, lines.get(n), site) for n in names)
    threads = (ThreadStack(thread_id=1, name="MainThread", status=status, frames=frames),
               *extra_threads)
    return ProcessDump(pid=1000 + rank, rank=rank, threads=threads)


def sample(spec: dict[int, list[str]], status: str = "idle") -> list[ProcessDump]:
    return [dump(r, names, status) for r, names in spec.items()]


# -- frame identity and thread choice --------------------------------------------------------------

def test_site_packages_prefix_is_trimmed_and_groups_with_the_short_name():
    assert trim_path(SITE + "torch/distributed/c10d.py") == "torch/distributed/c10d.py"
    tree = merge([dump(0, PATTERN_C, site=True), dump(1, PATTERN_C)])
    assert len(tree.classes) == 1 and tree.classes[0].ranks == (0, 1)


def test_collectives_are_recognised_by_the_last_dotted_part():
    assert comm_tier(Frame("ProcessGroup.all_reduce", "x.py"))
    assert comm_tier(Frame("all_gather_into_tensor", "x.py"))
    assert comm_tier(Frame("monitored_barrier", "x.py"))
    assert comm_tier(Frame("get", "ray/_private/worker.py"))
    assert comm_tier(Frame("wait", "torch/distributed/distributed_c10d.py"))
    assert not comm_tier(Frame("wait", "threading.py"))  # Condition.wait is not a collective
    assert not comm_tier(Frame("get", "app/cache.py"))
    assert comm_tier(Frame("ncclAllReduce", "libnccl.so", native=True))
    assert not comm_tier(Frame("Trainer.train_step", "trainer.py"))


def test_thread_of_interest_is_the_one_in_a_collective_else_main():
    pinger = ThreadStack(2, "heartbeat", "idle", (Frame("wait", "threading.py"),))
    comm = ThreadStack(3, "comm", "idle", (frame("all_reduce"), Frame("run", "worker.py")))
    main = ThreadStack(1, "MainThread", "active", (Frame("loop", "x.py"),))
    assert choose_thread([pinger, main]) is main
    assert choose_thread([pinger, comm, main]) is comm
    d = ProcessDump(pid=5, rank=0, threads=(pinger, comm, main))
    tree = merge([d])
    assert tree.classes[0].thread == "comm"
    assert len(tree.dumps[0].threads) == 3  # every thread stays available


def test_line_numbers_are_optional_in_grouping():
    a = dump(0, PATTERN_C, lines={"Trainer.train_step": 250})
    b = dump(1, PATTERN_C, lines={"Trainer.train_step": 251})
    assert len(merge([a, b]).classes) == 1
    assert len(merge([a, b], lines=True).classes) == 2


def test_tree_edges_carry_rank_sets_and_the_divergence_frame():
    tree = merge(sample({0: PIPE_WAIT, 1: PIPE_WAIT, 2: PIPE_WAIT, 3: CLEANUP}))
    assert tree.root.ranks == (0, 1, 2, 3)
    (main,) = tree.root.children
    assert main.frame.name == "main" and main.ranks == (0, 1, 2, 3)
    by_name = {c.frame.name: c.ranks for c in main.children}
    assert by_name == {"Trainer.train": (0, 1, 2), "Trainer.__exit__": (3,)}
    node, branches = tree.divergence()
    assert node.frame.name == "main" and len(branches) == 2
    assert [c.ranks for c in tree.classes] == [(0, 1, 2), (3,)]
    assert tree.classes[0].deepest.name == "recv_object_list"


def test_unknown_framework_still_groups():
    a = ["poll_peer", "Mesh.exchange", "Engine.step", "run"]
    b = ["Engine.log", "Engine.step", "run"]
    dumps = [ProcessDump(pid=r, rank=r, threads=(ThreadStack(1, "MainThread", "idle", tuple(
        Frame(n, "engine.py", 3) for n in (a if r % 3 else b))),)) for r in range(9)]
    tree = merge(dumps)
    assert sorted(c.ranks for c in tree.classes) == [(0, 3, 6), (1, 2, 4, 5, 7, 8)]
    assert all(c.op is None for c in tree.classes)


# -- the three patterns ----------------------------------------------------------------------------

def test_pattern_c_same_collective_same_call_site():
    spec = {r: PATTERN_C for r in range(4)}
    report = classify([sample(spec), sample(spec)])
    assert (report.pattern, report.symptom_id) == ("C", SAME_COLLECTIVE)
    assert report.classes[0].state == "stuck" and report.suspect_ranks == ()
    assert "network" in report.explanation
    (s,) = symptoms(report)
    assert s.severity == "critical"
    assert any("NCCL_DEBUG=INFO" in n for n in s.next_steps)
    assert any("NCCL_SOCKET_IFNAME" in n for n in s.next_steps)


def test_pattern_c_from_one_sample_of_idle_ranks_is_named_but_unconfirmed():
    report = classify(sample({r: PATTERN_C for r in range(4)}))  # flat list: one sample
    assert report.pattern == "C" and not report.confirmed
    assert symptoms(report)[0].severity == "warning"


def test_pattern_a_cleanup_deadlock():
    spec = {0: PIPE_WAIT, 1: PIPE_WAIT, 2: PIPE_WAIT, 3: CLEANUP}
    report = classify([sample(spec), sample(spec)])
    assert (report.pattern, report.symptom_id) == ("A", CLEANUP_DEADLOCK)
    assert report.suspect_ranks == (3,)
    assert report.divergence.name == "main"
    assert "recv_object_list" in report.explanation and "rank 3" in report.explanation
    teardown = [c for c in report.classes if c.teardown]
    assert [c.ranks for c in teardown] == [(3,)]
    (s,) = symptoms(report)
    assert any("CUDA_LAUNCH_BLOCKING=1" in n for n in s.next_steps)
    assert any("exception" in n for n in s.next_steps)
    assert any("ranks 0-2" in e for e in s.evidence)


def test_pattern_b_different_call_sites():
    spec = {r: (FORWARD if r % 2 == 0 else BACKWARD) for r in range(8)}
    report = classify([sample(spec), sample(spec)])
    assert (report.pattern, report.symptom_id) == ("B", COLLECTIVE_MISMATCH)
    assert report.divergence.name == "Trainer.train_step"
    assert {b.name for b in report.branches} == {"FSDPActor.forward", "FSDPActor.backward"}
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL" in " ".join(symptoms(report)[0].next_steps)
    assert [c.ranks for c in report.classes] == [(0, 2, 4, 6), (1, 3, 5, 7)]


def test_pattern_b_same_function_different_line_of_the_caller():
    a = [dump(r, PATTERN_C, lines={"Trainer._sync_gradients": 256}) for r in range(3)]
    b = [dump(3, PATTERN_C, lines={"Trainer._sync_gradients": 260})]
    report = classify([a + b, a + b])
    assert report.pattern == "B"
    assert report.suspect_ranks == (3,)


def test_pattern_b_minority_is_the_suspect():
    spec = {r: FORWARD for r in range(7)} | {7: BACKWARD}
    report = classify([sample(spec)])
    assert report.pattern == "B" and report.suspect_ranks == (7,)


# -- missing ranks ---------------------------------------------------------------------------------

def test_exited_rank_with_survivors_in_all_reduce_is_not_a_network_problem():
    spec = {r: PATTERN_C for r in range(3)}
    for kwargs in ({"missing_ranks": [3]}, {"world_size": 4}, {"expected_ranks": range(4)}):
        report = classify([sample(spec), sample(spec)], **kwargs)
        assert (report.pattern, report.symptom_id) == ("A", CLEANUP_DEADLOCK), kwargs
        assert report.suspect_ranks == (3,) and report.missing_ranks == (3,)
        assert "exited" in report.title and "network" not in report.explanation
        (s,) = symptoms(report)
        assert any("traceback" in e for e in s.evidence)


def test_a_dump_that_says_exited_counts_as_missing():
    dumps = sample({r: PATTERN_C for r in range(3)})
    dumps.append(ProcessDump(pid=1003, rank=3, status="exited", message="gone"))
    report = classify([dumps])
    assert report.pattern == "A" and report.missing_ranks == (3,)


def test_unreadable_dump_is_not_missing():
    dumps = sample({r: PATTERN_C for r in range(3)})
    dumps.append(ProcessDump(pid=1003, rank=3, status="denied"))
    report = classify([dumps], world_size=4)
    assert report.pattern == "C" and report.unreadable == (1003,)


# -- not hangs -------------------------------------------------------------------------------------

def test_healthy_stacks_change_between_samples():
    s1 = sample({r: PATTERN_C for r in range(4)})
    s2 = sample({r: ["FSDPActor.forward", "Trainer.train_step", "Trainer.train", "main"]
                 for r in range(4)}, status="active")
    report = classify([s1, s2, s1])
    assert report.verdict == PROGRESSING and report.symptom_id is None
    assert report.pattern is None and symptoms(report) == []
    assert all(c.state == "moving" for c in report.classes)


def test_slow_rank_moving_while_others_wait_is_not_a_hang():
    wait = {r: PATTERN_C for r in range(3)}
    s1 = sample(wait) + [dump(3, ["FSDPActor.forward", "Trainer.train_step", "Trainer.train",
                                  "main"], "active")]
    s2 = sample(wait) + [dump(3, ["FSDPActor.backward", "Trainer.train_step", "Trainer.train",
                                  "main"], "active")]
    report = classify([s1, s2])
    assert report.verdict == PROGRESSING and report.symptom_id is None
    assert "rank 3" in report.explanation
    states = {c.ranks: c.state for c in report.classes}
    assert states[(0, 1, 2)] == "stuck" and states[(3,)] == "moving"


def test_one_sample_with_an_active_computing_rank_is_not_a_hang():
    dumps = sample({r: PATTERN_C for r in range(3)})
    dumps.append(dump(3, ["FSDPActor.forward", "Trainer.train_step", "Trainer.train", "main"],
                      "active"))
    report = classify([dumps])
    assert report.verdict == WORKING and report.symptom_id is None and report.pattern is None
    assert "differ" in report.explanation and "rank 3" in report.explanation


def test_steps_advancing_rules_out_a_hang():
    spec = {r: PATTERN_C for r in range(4)}
    report = classify([sample(spec), sample(spec)], steps_stalled=False)
    assert report.symptom_id is None


# -- busy loop -------------------------------------------------------------------------------------

def test_busy_loop_names_the_loop_frame():
    spin = ["Waiter.poll_ready", "Trainer.train_step", "Trainer.train", "main"]
    s = [dump(r, spin, "active", lines={"Waiter.poll_ready": 40 + r}) for r in range(4)]
    s2 = [dump(r, spin, "active+gil", lines={"Waiter.poll_ready": 44}) for r in range(4)]
    report = classify([s, s2], steps_stalled=True)
    assert report.symptom_id == BUSY_LOOP and report.pattern is None
    assert report.loop_frame.name == "Waiter.poll_ready"
    assert report.classes[0].state == "stuck"
    (s_,) = symptoms(report)
    assert s_.severity == "critical"
    assert any("Waiter.poll_ready" in e for e in s_.evidence)


def test_busy_rank_with_others_waiting_for_it():
    spin = ["spin", "Trainer.train_step", "Trainer.train", "main"]
    s = sample({r: PATTERN_C for r in range(3)}) + [dump(3, spin, "active")]
    report = classify([s, s])
    assert report.symptom_id == BUSY_LOOP and report.suspect_ranks == (3,)
    assert "ranks 0-2 wait in all_reduce" in report.explanation


# -- output ----------------------------------------------------------------------------------------

def test_compact_rank_sets_and_json_shape():
    spec = {r: PIPE_WAIT for r in (0, 1, 2, 3, 5, 7, 8)} | {4: CLEANUP, 6: CLEANUP}
    report = classify([sample(spec), sample(spec)])
    out = report_json(report)
    json.dumps(out)  # serialisable
    assert out["pattern"] == "A"
    assert [c["ranks"] for c in out["classes"]] == ["0-3,5,7-8", "4,6"]
    cls = out["classes"][0]
    assert set(cls) >= {"ranks", "frames", "deepest", "moving", "state"}
    assert cls["frames"][0]["name"] == "main"  # signature root first
    assert cls["deepest"]["name"] == "recv_object_list" and cls["moving"] is False
    assert out["suspect_ranks"] == [4, 6]
    assert isinstance(out["explanation"], str) and out["explanation"]
    assert out["divergence"]["name"] == "main"


def test_one_sample_class_state_is_unknown():
    out = report_json(classify([sample({0: PATTERN_C})]))
    assert out["classes"][0]["state"] == "unknown" and out["classes"][0]["moving"] is None


def test_processes_without_rank_are_kept_by_pid():
    d = ProcessDump(pid=77, rank=None, threads=(ThreadStack(1, "MainThread", "idle",
                                                            tuple(frame(n) for n in PATTERN_C)),))
    report = classify([[d, dump(0, PATTERN_C)]])
    (c,) = report.classes
    assert c.ranks == (0,) and c.pids == (77,)


def test_empty_input():
    report = classify([], world_size=2)
    assert report.symptom_id is None and report.missing_ranks == (0, 1)
    assert classify([[]]).classes == ()


# -- properties ------------------------------------------------------------------------------------

NAMES = ["all_reduce", "barrier", "recv", "wait", "get", "Trainer.step", "close", "__exit__",
         "destroy_process_group", "loop", "f", "g", "_shape_inference", "ncclKernel"]
frames_st = st.lists(st.builds(Frame, name=st.sampled_from(NAMES),
                               filename=st.sampled_from(["a.py", "torch/distributed/c.py",
                                                         SITE + "x/y.py", "ray/w.py", ""]),
                               line=st.integers(0, 5), native=st.booleans()), max_size=8)
thread_st = st.builds(ThreadStack, thread_id=st.integers(0, 3),
                      name=st.sampled_from(["MainThread", "t", ""]),
                      status=st.sampled_from(["idle", "active", "active+gil", "unknown"]),
                      frames=frames_st.map(tuple))
dump_st = st.builds(ProcessDump, pid=st.integers(1, 50), rank=st.one_of(st.none(),
                                                                          st.integers(0, 12)),
                    threads=st.lists(thread_st, max_size=3).map(tuple),
                    status=st.sampled_from(["ok", "ok", "ok", "exited", "timeout"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(dump_st, max_size=10), max_size=3), st.lists(st.integers(0, 15),
                                                                         max_size=3),
       st.booleans(), st.sampled_from([None, True, False]))
def test_random_stacks_never_crash_and_classes_partition_the_ranks(samples, missing, lines,
                                                                  stalled):
    report = classify(samples, missing, lines=lines, steps_stalled=stalled)
    json.dumps(report_json(report))
    symptoms(report)
    if report.tree is not None:
        members = [m for c in report.classes for m in c.members]
        assert len(members) == len(set(members))
        assert set(members) == set(report.tree.paths)
        assert set(report.tree.root.members) == set(members)
        assert not set(report.missing_ranks) & {m for m in members if m >= 0}
    assert report.pattern in (None, "A", "B", "C")
    if report.pattern is not None:
        assert report.symptom_id is not None
