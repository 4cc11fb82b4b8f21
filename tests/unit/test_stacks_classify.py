"""Stack merge and hang classification (playbook section 1, patterns A, B, C).

Dumps are built directly, frames innermost first as py-spy prints them, mirroring the demo job's
real stacks (py-spy 0.4 on Python 3.11 names methods ``Class.method``).
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rltui.diagnosis.stacks import (
    BUSY_LOOP,
    CLEANUP_DEADLOCK,
    COLLECTIVE_MISMATCH,
    HANG,
    PROGRESSING,
    SAME_COLLECTIVE,
    UNCLEAR,
    WORKING,
    classify,
    report_json,
    symptoms,
)
from rltui.diagnosis.stacktree import choose_thread, comm_tier, merge, trim_path
from rltui.model import Frame, ProcessDump, ThreadStack, replace
from rltui.parsing.pyspy import KEEP_INNER, KEEP_OUTER, parse_text, read_folder_entries

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


def test_processes_without_rank_beside_ranked_ones_are_listed_not_compared():
    d = ProcessDump(pid=77, rank=None, threads=(ThreadStack(1, "MainThread", "idle",
                                                            tuple(frame(n) for n in PATTERN_C)),))
    report = classify([[d, dump(0, PATTERN_C)]])
    (c,) = report.classes
    assert c.ranks == (0,) and c.pids == ()
    assert report.other_pids == (77,)


def test_empty_input():
    report = classify([], world_size=2)
    assert report.symptom_id is None and report.missing_ranks == (0, 1)
    assert classify([[]]).classes == ()


# -- properties ------------------------------------------------------------------------------------

NAMES = ["all_reduce", "barrier", "recv", "wait", "get", "Trainer.step", "step", "close",
         "__exit__", "destroy_process_group", "loop", "f", "g", "_shape_inference", "ncclKernel",
         "<module>", "main", "0x7f3a", "<frames elided>", "_exception_logger.<locals>.wrapper"]
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
                    status=st.sampled_from(["ok", "ok", "ok", "exited", "timeout"]),
                    python_version=st.sampled_from(["", "3.10.12", "3.11.7", "x"]))


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


# -- real torch.distributed dumps (gloo, py-spy 0.4; fixtures/stacks/torch-gloo) -----------------

STACKS = Path(__file__).resolve().parents[2] / "fixtures" / "stacks"


def folder(name: str) -> list[ProcessDump]:
    files = [(p.name, p.read_text()) for p in sorted((STACKS / name).iterdir())]
    dumps, problems = read_folder_entries(files)
    assert problems == []
    return dumps


def test_torch_call_site_is_the_users_frame_not_the_logger_wrapper():
    # torch wraps every collective in _exception_logger.<locals>.wrapper (c10d_logger.py)
    report = classify([folder("torch-gloo/cleanup-deadlock")])
    assert (report.pattern, report.suspect_ranks) == ("A", (2,))
    loop, cleanup = report.classes
    assert loop.ranks == (0, 1) and loop.call_site.name == "Trainer.sync_gradients"
    assert cleanup.teardown and cleanup.call_site.name == "Trainer.close"
    assert "wrapper" not in report.explanation
    (s,) = symptoms(report)
    assert "ranks 0-1: all_reduce <- Trainer.sync_gradients <- Trainer.train_step" in s.evidence[0]
    assert report_json(report)["classes"][0]["call_site"]["name"] == "Trainer.sync_gradients"


def test_native_dumps_group_despite_per_process_addresses():
    """--native: a C++ frame name holding parentheses (text format) and frames py-spy could
    not name (``0x7f... (libc.so.6)``, an address that differs per process) at both ends."""
    dumps = folder("torch-gloo/native")
    names = [[f.name for f in d.threads[0].frames] for d in dumps]
    assert names[0][0] != names[1][0] and names[0][0].startswith("0x")  # ASLR
    assert names[0][4] == names[1][4] and names[0][4].endswith("::_FUN")  # parsed whole
    report = classify([dumps])
    (c,) = report.classes
    assert c.ranks == (0, 1) and c.op.name == "all_reduce" and report.pattern == "C"
    assert c.tip.name == "all_reduce" and c.deepest.native
    (s,) = symptoms(report)
    assert s.evidence[0].startswith("ranks 0-1: all_reduce <- Trainer.sync_gradients")


def test_busy_loop_seen_inside_its_helper_is_still_the_same_loop():
    """Real dumps of a polling loop: each rank is once in ``wait_for_rewards`` itself and once
    inside the ``rewards_ready`` it calls."""
    s1, s2 = folder("torch-gloo/busy-loop/sample1"), folder("torch-gloo/busy-loop/sample2")
    tips = [[d.threads[0].frames[0].name for d in s] for s in (s1, s2)]
    assert tips[0][0] != tips[1][0] and tips[0][1] != tips[1][1]
    report = classify([s1, s2])
    assert report.symptom_id == BUSY_LOOP and report.verdict == HANG
    assert report.loop_frame.name == "RewardClient.wait_for_rewards"
    assert report.suspect_ranks == (0, 1)
    assert {c.state for c in report.classes} == {"stuck"}
    assert "check that the steps stalled" in report.explanation  # nobody waits for them
    assert classify([s1]).verdict == WORKING  # one sample: on CPU is working


# -- moving and stuck ------------------------------------------------------------------------------

LOOP = ["Poller.run", "Trainer.train_step", "Trainer.train", "main"]


def test_a_loop_turning_or_calling_a_shallow_helper_stays_stuck():
    helper = ["Poller.ready"] + LOOP
    deeper = ["Queue._qsize", "Queue.empty"] + LOOP  # two frames below the loop
    for later in (helper, deeper, LOOP):
        s1 = [dump(0, LOOP, "active", lines={"Poller.run": 10})]
        s2 = [dump(0, later, "active", lines={"Poller.run": 12})]
        report = classify([s1, s2])
        assert report.classes[0].state == "stuck", later
        assert report.symptom_id == BUSY_LOOP and report.loop_frame.name == "Poller.run"


def test_different_callees_or_a_deep_call_below_the_loop_is_progress():
    load = ["Trainer.load_batch", "Trainer.train_step", "Trainer.train", "main"]
    forward = ["Model.forward", "Trainer.train_step", "Trainer.train", "main"]
    for before, after in ((load, forward),  # two calls from one function
                          (LOOP, ["a", "b", "c"] + LOOP),  # three frames deep below it
                          (["helper_a"] + LOOP, ["helper_b"] + LOOP)):  # two callees
        s1, s2 = [dump(0, before, "active")], [dump(0, after, "active")]
        assert classify([s1, s2]).verdict == PROGRESSING, (before, after)


def test_c_frames_below_the_innermost_python_frame_do_not_move_a_rank():
    def native(rank: int, tip: str) -> ProcessDump:
        d = dump(rank, LOOP, "active")
        frames = (Frame(tip, "libpython3.11.so", 0, native=True), *d.threads[0].frames)
        return replace(d, threads=(replace(d.threads[0], frames=frames),))
    report = classify([[native(0, "PyObject_GetAttr")], [native(0, "_PyEval_EvalFrameDefault")]])
    assert report.symptom_id == BUSY_LOOP and report.loop_frame.name == "Poller.run"


def test_the_same_collective_from_another_line_is_progress():
    """A healthy step all-reduces twice from one function (gradients, then metrics): seen
    once at each, the rank moved, though its path by function is the same."""
    s1 = sample({r: PATTERN_C for r in range(2)})
    s2 = [dump(r, PATTERN_C, lines={"Trainer._sync_gradients": 262}) for r in range(2)]
    report = classify([s1, s2])
    assert report.verdict == PROGRESSING and report.symptom_id is None
    assert classify([s2, s2]).pattern == "C"


def test_a_rank_absent_from_earlier_samples_is_unknown_not_stuck():
    s1 = sample({0: PATTERN_C})
    s2 = sample({0: PATTERN_C, 1: PATTERN_C})
    report = classify([s1, s2])
    assert report.pattern == "C" and report.classes[0].state == "stuck"
    report = classify([sample({5: PATTERN_C}), s2])
    assert report.classes[0].state == "unknown" and not report.confirmed


# -- teardown --------------------------------------------------------------------------------------

def test_barrier_in_a_finally_of_main_is_cleanup():
    finally_ = ["barrier", "main", "<module>"]
    loop = ["all_reduce", "Trainer._sync_gradients", "Trainer.train", "main", "<module>"]
    spec = {0: loop, 1: loop, 2: finally_}
    report = classify([sample(spec), sample(spec)])
    assert (report.pattern, report.suspect_ranks) == ("A", (2,))
    assert [c.ranks for c in report.classes if c.teardown] == [(2,)]
    # torch elastic's @record wraps main in a closure: still the entry point
    wrapped = ["barrier", "main", "record.<locals>.wrap.<locals>.wrapper", "<module>"]
    wrapped_frames = {0: loop, 1: loop, 2: wrapped}
    dumps = [dump(r, n) for r, n in wrapped_frames.items()]
    dumps[2] = ProcessDump(pid=1002, rank=2, threads=(ThreadStack(1, "MainThread", "idle", (
        Frame("barrier", "torch/distributed/distributed_c10d.py", 5356),
        Frame("main", "train.py", 40),
        Frame("record.<locals>.wrap.<locals>.wrapper",
              "torch/distributed/elastic/multiprocessing/errors/__init__.py", 355),
        Frame("<module>", "train.py", 50))),))
    assert classify([dumps, dumps]).pattern == "A"


def test_barrier_in_a_loop_written_in_main_is_not_cleanup():
    """Every collective is called from main: a barrier there is part of the loop, and the
    ranks in different collectives are a mismatch."""
    spec = {0: ["barrier", "main", "<module>"], 1: ["all_reduce", "main", "<module>"],
            2: ["all_reduce", "main", "<module>"]}
    report = classify([sample(spec), sample(spec)])
    assert (report.pattern, report.suspect_ranks) == ("B", (0,))
    assert not any(c.teardown for c in report.classes)


# -- frameworks ------------------------------------------------------------------------------------

def _stack(*frames: tuple[str, str, int]) -> tuple[Frame, ...]:
    return tuple(Frame(n, f, line) for n, f, line in frames)


def _one(rank: int, frames, status: str = "idle") -> ProcessDump:
    return ProcessDump(pid=100 + rank, rank=rank,
                       threads=(ThreadStack(1, "MainThread", status, frames),))


def test_ray_get_and_wait_are_waits_and_the_call_site_skips_ray_wrappers():
    get = _stack(("Worker.get_objects", "ray/_private/worker.py", 870),
                 ("get", "ray/_private/worker.py", 2626),
                 ("client_mode_hook.<locals>.wrapper", "ray/_private/client_mode_hook.py", 103),
                 ("RolloutManager.collect", "rl/rollout.py", 57),
                 ("train", "rl/main.py", 12))
    wait = _stack(("wait", "ray/_private/worker.py", 2800),
                  ("client_mode_hook.<locals>.wrapper", "ray/_private/client_mode_hook.py", 103),
                  ("RolloutManager.poll", "rl/rollout.py", 71),
                  ("train", "rl/main.py", 12))
    report = classify([[_one(0, get), _one(1, get), _one(2, wait)]] * 2)
    assert report.pattern == "B" and report.suspect_ranks == (2,)
    ops = {c.ranks: (c.op.name, c.call_site.name) for c in report.classes}
    assert ops == {(0, 1): ("get", "RolloutManager.collect"),
                   (2,): ("wait", "RolloutManager.poll")}


def test_deepspeed_and_megatron_wrappers_name_the_wait():
    ds = _stack(("all_reduce", "torch/distributed/distributed_c10d.py", 2501),
                ("_exception_logger.<locals>.wrapper", "torch/distributed/c10d_logger.py", 83),
                ("TorchBackend.all_reduce", "deepspeed/comm/torch.py", 204),
                ("all_reduce", "deepspeed/comm/comm.py", 660),
                ("timed_op.<locals>.log_wrapper", "deepspeed/comm/comm.py", 117),
                ("DeepSpeedEngine.allreduce_gradients", "deepspeed/runtime/engine.py", 1950),
                ("Trainer.step", "trainer.py", 40))
    mg = _stack(("batch_isend_irecv", "torch/distributed/distributed_c10d.py", 2700),
                ("_batched_p2p_ops", "megatron/core/pipeline_parallel/p2p_communication.py", 99),
                ("_communicate", "megatron/core/pipeline_parallel/p2p_communication.py", 300),
                ("recv_forward", "megatron/core/pipeline_parallel/p2p_communication.py", 400),
                ("forward_backward_pipelining_without_interleaving",
                 "megatron/core/pipeline_parallel/schedules.py", 1200),
                ("Trainer.step", "trainer.py", 44))
    report = classify([[_one(0, ds), _one(1, ds), _one(2, mg)]] * 2)
    assert report.pattern == "B" and report.suspect_ranks == (2,)
    by = {c.ranks: c for c in report.classes}
    # the outermost primitive names the op: DeepSpeed's all_reduce, not torch's inside it
    assert by[(0, 1)].op.filename == "deepspeed/comm/comm.py"
    assert by[(0, 1)].call_site.name == "DeepSpeedEngine.allreduce_gradients"
    assert by[(2,)].op.name == "batch_isend_irecv"
    assert by[(2,)].call_site.name == "_batched_p2p_ops"


def test_native_nccl_frames_alone_are_a_wait():
    frames = (Frame("ncclKernel_AllReduce_RING_LL_Sum_float", "libnccl.so.2", 0, native=True),
              Frame("c10d::ProcessGroupNCCL::WorkNCCL::synchronize", "libtorch_cuda.so", 0,
                    native=True),
              Frame("Trainer.step", "trainer.py", 40))
    report = classify([[_one(r, frames) for r in range(3)]])
    assert report.pattern == "C" and report.classes[0].waiting


def test_pipeline_p2p_with_torch_names():
    frames = _stack(("recv_object_list", "torch/distributed/distributed_c10d.py", 3100),
                    ("_shape_inference", "torch/distributed/pipelining/stage.py", 1400),
                    ("PipelineStage._prepare_forward_infra",
                     "torch/distributed/pipelining/stage.py", 1500),
                    ("Schedule1F1B.step", "torch/distributed/pipelining/schedules.py", 700),
                    ("train", "run.py", 10))
    sent = _stack(("isend", "torch/distributed/distributed_c10d.py", 2600),
                  ("_shape_inference", "torch/distributed/pipelining/stage.py", 1420),
                  ("PipelineStage._prepare_forward_infra",
                   "torch/distributed/pipelining/stage.py", 1500),
                  ("Schedule1F1B.step", "torch/distributed/pipelining/schedules.py", 700),
                  ("train", "run.py", 10))
    report = classify([[_one(0, frames), _one(1, sent)]] * 2)
    assert report.pattern == "B"
    assert {c.op.name for c in report.classes} == {"recv_object_list", "isend"}


# -- bad input -------------------------------------------------------------------------------------

def test_duplicate_ranks_keep_the_last_dump_and_say_so():
    dumps = sample({0: PATTERN_C, 1: PATTERN_C}) + [dump(1, CLEANUP)]
    report = classify([dumps, dumps])
    assert report.duplicate_ranks == (1,) and report.tree.duplicates == (1,)
    assert sorted(m for c in report.classes for m in c.members) == [0, 1]
    assert report.pattern == "A" and report.suspect_ranks == (1,)  # the last dump of rank 1
    assert "rank 1 appeared more than once" in report.explanation
    out = report_json(report)
    assert out["duplicate_ranks"] == [1] and out["notes"] == list(report.notes)


def test_a_dump_that_timed_out_is_named_and_the_rest_classified():
    dumps = sample({r: PATTERN_C for r in range(3)})
    dumps.append(ProcessDump(pid=1003, rank=3, status="timeout", message="py-spy timed out"))
    report = classify([dumps, dumps], world_size=4)
    assert report.pattern == "C" and report.unreadable == (1003,)
    assert report.missing_ranks == ()
    assert "pid 1003 (rank 3): timeout" in report.explanation
    assert report_json(report)["unreadable_pids"] == [1003]


def test_zero_processes_and_processes_without_threads():
    for samples in ([], [[]], [[], []]):
        report = classify(samples)
        assert report.verdict == "empty" and report.symptom_id is None
        json.dumps(report_json(report))
    empty = ProcessDump(pid=5, rank=0, status="error", message="the dump holds no threads")
    report = classify([[empty]])
    assert report.verdict == "empty" and report.unreadable == (5,)
    bare = ProcessDump(pid=6, rank=0, threads=(ThreadStack(1, "MainThread", "idle", ()),))
    report = classify([[bare], [bare]])
    assert report.classes[0].frames == () and report.symptom_id is None
    json.dumps(report_json(report))


def test_deep_recursion_of_different_depths_is_one_class():
    def deep(rank: int, depth: int) -> ProcessDump:
        frames = "    recurse (r.py:2)\n" * depth
        text = (f"Process {rank + 1}: p\nPython v3.11.0 (p)\n\nThread 1 (idle): \"MainThread\"\n"
                f"    all_reduce (torch/distributed/distributed_c10d.py:3252)\n{frames}"
                f"    main (r.py:9)\n")
        (d,) = parse_text(text)
        return replace(d, rank=rank)
    dumps = [deep(0, 6_000), deep(1, 9_001), deep(2, 30_000)]
    assert len({d.threads[0].frames[KEEP_INNER].filename for d in dumps}) == 3
    report = classify([dumps, dumps])
    (c,) = report.classes
    assert c.ranks == (0, 1, 2) and report.pattern == "C"
    assert len(c.frames) == KEEP_INNER + 1 + KEEP_OUTER


def test_mixed_python_versions_match_method_names_by_file():
    """py-spy names a method ``train_step`` on Python 3.10 and ``Trainer.train_step`` on 3.11."""
    new = dump(0, PATTERN_C)
    old_frames = tuple(replace(f, name=f.name.rpartition(".")[2]) for f in new.threads[0].frames)
    old = ProcessDump(pid=1001, rank=1, python_version="3.10.12", threads=(
        ThreadStack(1, "MainThread", "idle", old_frames),))
    new = replace(new, python_version="3.11.7")
    report = classify([[new, old], [new, old]])
    (c,) = report.classes
    assert c.ranks == (0, 1) and report.pattern == "C"
    assert any("before and after 3.11" in n for n in report.notes)
    # one version: a function and a method of the same name in one file stay apart
    same = replace(old, python_version="3.11.7")
    assert len(classify([[new, same]]).classes) == 2


def test_a_folder_with_bad_files_gives_a_partial_result():
    files = [(p.name, p.read_text()) for sub in ("bad", "stall")
             for p in sorted((STACKS / sub).iterdir())]
    dumps, problems = read_folder_entries(files)
    assert problems  # every bad file is named there
    report = classify([dumps])
    assert report.classes[0].ranks == (0, 1, 2)
    assert report.classes[0].op.name == "all_reduce"
    json.dumps(report_json(report))


# -- one sample ------------------------------------------------------------------------------------

def test_one_sample_of_ranks_idle_outside_any_collective_is_unclear():
    spec = {r: ["Condition.wait", "Event.wait", "wait_for_rollouts", "train", "main"]
            for r in range(3)}
    report = classify(sample(spec))
    assert report.verdict == UNCLEAR and report.symptom_id is None and not report.hang
    assert "dump again" in report.explanation
    stuck = classify([sample(spec), sample(spec)])  # the same twice: a hang, no pattern
    assert stuck.verdict == HANG and stuck.pattern is None and stuck.symptom_id is None


def test_one_sample_every_rank_working_in_one_function():
    spec = {r: ["Trainer.update_policy", "Trainer.train", "main"] for r in range(2)}
    report = classify(sample(spec, status="active"))
    assert report.verdict == WORKING and "every rank" in report.explanation
    assert report.title == "Ranks are working"


def test_one_sample_with_one_rank_in_a_collective_and_one_elsewhere_idle():
    """The peer that never reached the collective is the odd one out (a real gloo job with
    a rank parked in Event.wait looks like this)."""
    spec = {0: PATTERN_C, 1: PATTERN_C,
            2: ["Condition.wait", "Event.wait", "park", "Trainer.train_step", "main"]}
    report = classify(sample(spec))
    assert (report.pattern, report.suspect_ranks) == ("B", (2,))
    assert "not in a recognised collective" in report.explanation


def test_report_json_keys():
    report = classify([sample({r: PATTERN_C for r in range(2)})] * 2)
    out = report_json(report)
    assert set(out) >= {"verdict", "pattern", "symptom_id", "title", "samples", "confirmed",
                        "classes", "suspect_ranks", "missing_ranks", "unreadable_pids",
                        "duplicate_ranks", "divergence", "branches", "loop_frame",
                        "explanation", "notes"}
    cls = out["classes"][0]
    assert set(cls) >= {"ranks", "count", "pids", "thread", "state", "moving", "active", "idle",
                        "op", "call_site", "teardown", "deepest", "tip", "frames"}
    assert cls["idle"] == "0-1" and cls["tip"]["name"] == "all_reduce"


def test_a_launcher_without_a_rank_does_not_turn_pattern_c_into_b():
    """torchrun's agent idles in its monitor loop beside the ranks; a Ray driver in ray.get."""
    launcher = ProcessDump(pid=500, threads=(ThreadStack(1, "MainThread", "idle", (
        Frame("time.sleep", "<built-in>", 0),
        Frame("SimpleElasticAgent._invoke_run",
              "torch/distributed/elastic/agent/server/api.py", 835),
        Frame("main", "torch/distributed/run.py", 900))),))
    dumps = sample({r: PATTERN_C for r in range(4)}) + [launcher]
    report = classify(dumps)
    assert report.pattern == "C"
    assert report.other_pids == (500,)
    assert "without a rank" in report.explanation
    assert report_json(report)["other_pids"] == [500]


def test_without_any_rank_every_process_is_compared():
    dumps = [ProcessDump(pid=600 + i, threads=d.threads)
             for i, d in enumerate(sample({0: PATTERN_C, 1: PATTERN_C}))]
    report = classify(dumps)
    assert report.pattern == "C" and report.other_pids == ()
    assert sorted(m for c in report.classes for m in c.members) == [-602, -601]
