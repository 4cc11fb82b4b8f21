"""Attacks on the hang classification: the thread of interest, exiting and crashed ranks,
process-group waits, teardown only, missing ranks from the snapshot, and pipeline names in the
standard library (docs/hang-patterns.md sections 1, 3, 5 and 6).

A passing test pins behaviour that is right; ``xfail(strict=True)`` marks a bug found, with what
happens and what should.
"""

from __future__ import annotations

import pytest

from rltui.diagnosis.hangs import absent_ranks, stack_report
from rltui.diagnosis.stacks import HANG, WORKING, classify, report_json, symptoms
from rltui.diagnosis.stacktree import choose_thread, comm_tier, exiting
from rltui.model import (
    CRASHED,
    DepartedRank,
    Frame,
    LogEvent,
    LogFileState,
    NodeSnapshot,
    ProcessDump,
    ProcInfo,
    ProcPoll,
    Reading,
    StackPoll,
    ThreadStack,
    replace,
)
from rltui.parsing.pyspy import CUT, KEEP_INNER, KEEP_OUTER, parse_any
from rltui.snapshot import Tracker

C10D = "torch/distributed/distributed_c10d.py"


def F(name: str, file: str = "train.py", line: int = 1, native: bool = False) -> Frame:
    return Frame(name, file, line, native=native)


# Frames innermost first, as py-spy prints them.
ALL_REDUCE = [F("all_reduce", C10D, 2501), F("wrapper", "torch/distributed/c10d_logger.py", 83),
              F("train_step", "train.py", 50), F("train", "train.py", 30),
              F("main", "train.py", 10), F("<module>", "train.py", 100)]
SHUTDOWN_312 = [F("_shutdown", "threading.py", 1592)]  # 3.12: lock.acquire() is C
DESTROY = [F("destroy_process_group", C10D, 1800), F("close", "train.py", 5),
           F("main", "train.py", 10), F("<module>", "train.py", 100)]
BOOTSTRAP = [F("run", "threading.py", 975), F("_bootstrap_inner", "threading.py", 1038),
             F("_bootstrap", "threading.py", 995)]


def thread(frames, name: str = "MainThread", status: str = "idle", tid: int = 1) -> ThreadStack:
    return ThreadStack(tid, name, status, tuple(frames))


def dump(rank: int | None, frames, status: str = "idle", extra=(), pid: int | None = None,
         **kw) -> ProcessDump:
    return ProcessDump(pid=pid if pid is not None else 1000 + (rank or 0), rank=rank,
                       threads=(thread(frames, status=status), *extra), **kw)


def pyspy(pid: int, body: str, version: str = "3.12.3") -> str:
    return (f"Process {pid}: /usr/bin/python3 train.py\nPython v{version} (/usr/bin/python3)\n\n"
            + body)


def ranked(text: str, rank: int) -> ProcessDump:
    found, _ = parse_any(text, f"rank{rank}.txt")
    assert len(found) == 1
    return replace(found[0], rank=rank)


def waiting(n: int = 3) -> list[ProcessDump]:
    return [dump(r, ALL_REDUCE) for r in range(n)]


# -- exiting ranks: recognised ---------------------------------------------------------------------

def test_python_312_threading_shutdown_makes_the_rank_exiting_and_the_title_says_so():
    body = 'Thread 1003 (idle): "MainThread"\n    _shutdown (threading.py:1592)\n'
    d3 = ranked(pyspy(1003, body), 3)
    rep = classify(waiting() + [d3])
    assert rep.verdict == HANG and rep.pattern == "A"
    assert rep.title == "rank 3 is exiting; ranks 0-2 wait for it in all_reduce"
    assert rep.suspect_ranks == (3,)
    assert "victims" in rep.explanation


@pytest.mark.parametrize("body", [
    # concurrent.futures' _python_exit run by threading._shutdown (3.9+)
    '    _wait_for_tstate_lock (threading.py:1167)\n    join (threading.py:1147)\n'
    '    _python_exit (concurrent/futures/thread.py:31)\n    _shutdown (threading.py:1576)\n',
    # ... and as the outermost frame itself (3.13: Thread.join waits in C)
    '    Thread.join (threading.py:1094)\n    _python_exit (concurrent/futures/thread.py:31)\n',
    # multiprocessing's atexit handler joining a hung child
    '    poll (multiprocessing/popen_fork.py:27)\n    wait (multiprocessing/popen_fork.py:43)\n'
    '    join (multiprocessing/process.py:149)\n    _exit_function (multiprocessing/util.py:357)\n',
])
def test_exit_shapes_of_the_standard_library_are_exiting(body):
    d3 = ranked(pyspy(1003, 'Thread 1003 (idle): "MainThread"\n' + body), 3)
    rep = classify(waiting() + [d3])
    assert rep.pattern == "A" and rep.suspect_ranks == (3,)
    assert "rank 3 is exiting" in rep.title


@pytest.mark.parametrize("frames", [
    [F("recv", "multiprocessing/connection.py", 250), F("main", "llamafactory/cli.py", 90)],
    [F("select", "selectors.py", 415), F("_run_module_as_main", "<frozen runpy>", 198)],
    [F("wait", "threading.py", 320), F("run", "ray/_private/worker.py", 900)],
    [F("main_loop", "ray/_private/worker.py", 946),
     F("<module>", "ray/_private/workers/default_worker.py", 330)],
    [F("get", "queue.py", 171), F("_bootstrap", "threading.py", 995)],  # a forked thread's child
])
def test_a_normal_main_thread_is_not_exiting(frames):
    assert not exiting(thread(frames))


def test_a_bounded_deep_stack_keeps_module_outermost_and_is_not_exiting():
    deep = "".join(f"    recurse (model.py:{i})\n" for i in range(KEEP_INNER + KEEP_OUTER + 500))
    body = ('Thread 1003 (idle): "MainThread"\n    wait (threading.py:320)\n'
            '    shutdown (concurrent/futures/thread.py:235)\n' + deep
            + "    main (train.py:10)\n    <module> (train.py:100)\n")
    d3 = ranked(pyspy(1003, body), 3)
    assert not exiting(d3.threads[0])
    assert not any(c.exiting for c in classify(waiting() + [d3]).classes)


def test_a_non_main_thread_in_shutdown_is_no_exiting_rank():
    assert not exiting(thread(SHUTDOWN_312, name="Thread-2"))


# -- crashed ranks ---------------------------------------------------------------------------------

def test_a_ranked_crash_dump_makes_its_rank_missing():
    crash = dump(3, ALL_REDUCE, status="", pid=1003)
    crash = replace(crash, status=CRASHED, message="Fatal Python error: Segmentation fault")
    rep = classify(waiting() + [crash])
    assert rep.pattern == "A" and rep.missing_ranks == (3,)
    assert rep.title == "rank 3 exited; ranks 0-2 wait for it in all_reduce"
    assert "crashed" in rep.explanation


def test_a_faulthandler_fatal_error_dump_is_read_as_crashed_and_makes_pattern_a():
    text = ('Fatal Python error: Segmentation fault\n\n'
            'Current thread 0x00007f4ebf9d3740 (most recent call first):\n'
            '  File "/opt/env/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py",'
            ' line 2501 in all_reduce\n'
            '  File "/opt/job/train.py", line 50 in train_step\n'
            '  File "/opt/job/train.py", line 100 in <module>\n')
    d3 = ranked(text, 3)
    assert d3.status == CRASHED
    rep = classify(waiting() + [d3])
    assert rep.pattern == "A" and 3 in rep.missing_ranks


# -- the thread of interest ------------------------------------------------------------------------

PREFETCH = [F("all_gather_into_tensor", C10D, 2900),
            F("_prefetch", "deepspeed/runtime/zero/partitioned_param_coordinator.py", 300)] \
    + BOOTSTRAP
IDLE_MAIN = [F("wait", "threading.py", 320), F("get", "queue.py", 171),
             F("train_step", "train.py", 50), F("main", "train.py", 10),
             F("<module>", "train.py", 100)]
WATCHDOG = thread([F("c10d::ProcessGroupNCCL::ncclCommWatchdog()", "libtorch_cuda.so",
                     native=True), F("start_thread", "libc.so.6", native=True)],
                  name="", tid=5)


def test_a_wait_on_another_thread_is_chosen_and_named():
    pf = thread(PREFETCH, name="Thread-3 (_prefetch)", tid=9)
    rep = classify([[dump(r, IDLE_MAIN, extra=(pf, WATCHDOG)) for r in range(4)]] * 2)
    assert rep.pattern == "C"
    assert "Thread-3 (_prefetch)" in rep.explanation


def test_a_native_only_watchdog_thread_is_never_the_wait():
    chosen = choose_thread((thread(IDLE_MAIN), WATCHDOG))
    assert chosen is not None and chosen.name == "MainThread"


def test_a_native_dump_with_the_nccl_wait_below_python_frames_keeps_the_main_thread():
    native_main = [F("ncclGroupEnd", "libnccl.so.2", native=True),
                   F("c10d::ProcessGroupNCCL::allreduce", "libtorch_cuda.so", native=True),
                   F("_PyEval_EvalFrameDefault", "libpython3.10.so.1.0", native=True),
                   F("step", "train.py", 50), F("main", "train.py", 10),
                   F("<module>", "train.py", 100)]
    rep = classify([[dump(r, native_main, extra=(WATCHDOG,)) for r in range(4)]] * 2)
    assert rep.pattern == "C" and [c.thread for c in rep.classes] == ["MainThread"]


def test_ray_train_wait_in_the_training_thread_is_chosen():
    main = thread([F("main_loop", "ray/_private/worker.py", 946),
                   F("<module>", "ray/_private/workers/default_worker.py", 330)])
    tt = thread(ALL_REDUCE[:4] + BOOTSTRAP, name="TrainingThread(train_func)", tid=3)
    rep = classify([[ProcessDump(pid=10 + r, rank=r, threads=(main, tt)) for r in range(4)]] * 2)
    assert rep.pattern == "C" and rep.classes[0].thread == "TrainingThread(train_func)"


# -- waits: process groups, stdlib names -------------------------------------------------------

@pytest.mark.parametrize("name", ["init_process_group", "new_group", "_store_based_barrier",
                                  "rendezvous", "init_device_mesh"])
def test_process_group_creation_is_a_wait(name):
    assert comm_tier(F(name, C10D))


def test_rank_stuck_in_init_process_group_is_no_idle_rank():
    init = [F("_store_based_barrier", C10D, 400), F("init_process_group", C10D, 1200),
            F("setup", "train.py", 20), F("<module>", "train.py", 100)]
    rep = classify([[dump(r, init) for r in range(3)]] * 2, missing_ranks=[3])
    assert rep.pattern == "A" and "init_process_group" in rep.title


def test_subprocess_communicate_is_no_pipeline_step_but_megatrons_is():
    assert not comm_tier(F("Popen._communicate", "/usr/lib/python3.11/subprocess.py", 2000))
    assert not comm_tier(F("_communicate", "C:\\Python311\\Lib\\subprocess.py", 2000))
    assert comm_tier(F("_communicate", "megatron/core/pipeline_parallel/p2p_communication.py"))


# -- teardown only ---------------------------------------------------------------------------------

def test_every_dumped_rank_in_teardown_is_pattern_a_not_c():
    rep = classify([[dump(r, DESTROY) for r in range(3)]] * 2)
    assert rep.verdict == HANG and rep.pattern == "A"
    assert rep.symptom_id == "hang-cleanup-deadlock"


# -- absent_ranks ----------------------------------------------------------------------------------

def saved(*dumps: ProcessDump) -> StackPoll:
    return StackPoll(dumps=tuple(dumps), started=10.0, finished=11.0, trigger="saved")


def test_absent_ranks_on_a_snapshot_without_stacks():
    logs = tuple(LogFileState(path=f"rank{r}.log", rank=r) for r in range(4))
    departed = (DepartedRank(pid=5, rank=2, last_seen=0.0, gone_since=1.0),)
    assert absent_ranks(NodeSnapshot(timestamp=1.0, logs=logs)) == set()
    assert absent_ranks(NodeSnapshot(timestamp=1.0, logs=logs, departed=departed)) == {2}
    assert stack_report(NodeSnapshot(timestamp=1.0, logs=logs, departed=departed)) is None


def _folded(procs) -> NodeSnapshot:
    tracker = Tracker()
    tracker.apply(Reading("procs", 1.0, "ok", ProcPoll(procs)))
    return tracker.snapshot(1.0)


def test_world_size_of_a_multi_node_job_marks_no_rank_missing():
    procs = tuple(ProcInfo(pid=10 + i, rank=8 + i, world_size=16, local_world_size=8)
                  for i in range(8))
    assert absent_ranks(_folded(procs)) == set()
    # LOCAL_WORLD_SIZE unknown: cannot tell that the job is on this node alone
    procs = tuple(ProcInfo(pid=10 + i, rank=i, world_size=8) for i in range(6))
    assert absent_ranks(_folded(procs)) == set()


def test_world_size_of_a_single_node_job_names_the_ranks_not_alive():
    procs = tuple(ProcInfo(pid=10 + i, rank=i, world_size=8, local_world_size=8)
                  for i in range(6))
    # the fold marks the ranks below WORLD_SIZE that never ran as departed
    assert absent_ranks(_folded(procs)) == {6, 7}


def test_a_child_failed_rank_without_a_dump_is_missing():
    ev = LogEvent(kind="child-failed", line_no=1, end_line=5, arrival=9.0, summary="rank 3",
                  fields=(("rank", 3),))
    snap = NodeSnapshot(timestamp=20.0, stacks=(saved(*waiting()),),
                        logs=(LogFileState(path="torchrun.log", events=(ev,)),))
    assert absent_ranks(snap) == {3}
    rep = stack_report(snap)
    assert rep is not None and rep.pattern == "A" and rep.missing_ranks == (3,)


# == bugs ==========================================================================================

def _ray_train_worker(rank: int, line: int) -> ProcessDump:
    main = thread([F("main_loop", "ray/_private/worker.py", 946),
                   F("<module>", "ray/_private/workers/default_worker.py", 330)])
    metrics = thread([F("push_local_metrics", "ray/train/v2/_internal/callbacks/metrics.py", 223)]
                     + BOOTSTRAP, name="Thread-1", tid=2)
    work = thread([F("forward", "model.py", line),
                   F("_call_impl", "torch/nn/modules/module.py", 1500),
                   F("train_func", "train.py", 40),
                   F("train_fn", "ray/train/v2/_internal/util.py", 77),
                   F("_run_target",
                     "ray/train/v2/_internal/execution/worker_group/thread_runner.py", 37)]
                  + BOOTSTRAP, name="TrainingThread(train_func)", status="active", tid=3)
    return ProcessDump(pid=2000 + rank, rank=rank, threads=(main, metrics, work))


@pytest.mark.xfail(strict=True, reason="A Ray Train worker runs the user's loop in "
                   "'TrainingThread(...)'; computing, it is now the thread read (not Ray's idle "
                   "MainThread), but two samples in the same function at other lines read as a "
                   "busy loop in forward (a long computation in one function looks the same "
                   "from outside; hang-patterns.md): only the steps can tell it progresses. "
                   "Left open: these stacks are those of a user's spin loop (a function of the "
                   "user's on CPU at two lines, test_stacks_classify's busy-loop tests, the real "
                   "torch-gloo busy-loop dumps), which must stay a busy loop; the busy loop is "
                   "a warning until the steps stall, and advancing steps rule it out")
def test_ray_train_worker_computing_in_its_training_thread_is_not_hung():
    rep = classify([[_ray_train_worker(r, 100) for r in range(4)],
                    [_ray_train_worker(r, 130) for r in range(4)]])
    assert rep.verdict != HANG


def test_ray_train_worker_computing_with_steps_advancing_is_not_hung():
    rep = classify([[_ray_train_worker(r, 100) for r in range(4)],
                    [_ray_train_worker(r, 130) for r in range(4)]], steps_stalled=False)
    assert rep.verdict != HANG


def test_ray_train_worker_computing_without_steps_is_an_unconfirmed_busy_loop():
    rep = classify([[_ray_train_worker(r, 100) for r in range(4)],
                    [_ray_train_worker(r, 130) for r in range(4)]])
    assert not rep.confirmed and "check that the steps stalled" in rep.explanation
    assert symptoms(rep)[0].severity == "warning"


def test_pid_only_saved_dumps_beside_rank_logs_mark_no_rank_missing():
    dumps = [dump(None, ALL_REDUCE, pid=500 + i) for i in range(4)]
    logs = tuple(LogFileState(path=f"rank{r}.log", rank=r) for r in range(4))
    snap = NodeSnapshot(timestamp=20.0, stacks=(saved(*dumps),), logs=logs)
    assert absent_ranks(snap) == set()
    rep = stack_report(snap)
    assert rep is not None and rep.pattern == "C"


def _dcp_exit(rank: int) -> ProcessDump:
    main = [F("_wait_for_tstate_lock", "threading.py", 1167), F("join", "threading.py", 1147),
            F("_python_exit", "concurrent/futures/thread.py", 31),
            F("_shutdown", "threading.py", 1576)]
    saver = thread([F("all_gather_object", C10D, 2400),
                    F("gather_object", "torch/distributed/checkpoint/utils.py", 120),
                    F("save", "torch/distributed/checkpoint/state_dict_saver.py", 170),
                    F("run", "concurrent/futures/thread.py", 58),
                    F("_worker", "concurrent/futures/thread.py", 83)] + BOOTSTRAP,
                   name="ThreadPoolExecutor-0_0", tid=7)
    return dump(rank, main, extra=(saver,))


def test_exiting_main_joining_a_thread_in_a_collective_is_that_collective():
    # Every rank's main thread is in threading._shutdown joining a non-daemon thread (an async
    # checkpoint's executor) that waits in all_gather_object: the rank still takes part in that
    # collective (pattern C on the executor thread), not 'teardown only'.
    rep = classify([[_dcp_exit(r) for r in range(4)]] * 2, world_size=4)
    assert rep.pattern == "C"
    assert rep.classes[0].thread == "ThreadPoolExecutor-0_0"
    assert rep.classes[0].exiting and not rep.classes[0].teardown
    assert "The main thread of ranks 0-3 has left the script" in rep.explanation
    assert choose_thread(_dcp_exit(0).threads).name == "ThreadPoolExecutor-0_0"


def test_an_exiting_rank_whose_thread_waits_elsewhere_than_the_loop_is_the_one_that_left():
    # Rank 3's script is done and its executor waits in the checkpoint's gather; ranks 0-2 are
    # still in the loop's all_reduce, which rank 3 will never call.
    rep = classify([waiting() + [_dcp_exit(3)]] * 2, world_size=4)
    assert rep.pattern == "A" and rep.suspect_ranks == (3,)
    assert rep.title == "rank 3 is exiting; ranks 0-2 wait for it in all_reduce"
    assert "its thread 'ThreadPoolExecutor-0_0' still waits in gather_object" \
        in rep.explanation


def test_an_exiting_rank_in_the_collective_the_others_wait_in_is_no_culprit():
    # Ranks 0-2 are still in the loop, their executor in the same gather as rank 3's.
    def in_loop(rank: int) -> ProcessDump:
        d = _dcp_exit(rank)
        return replace(d, threads=(thread(IDLE_MAIN), d.threads[1]))
    rep = classify([[in_loop(r) for r in range(3)] + [_dcp_exit(3)]] * 2, world_size=4)
    assert rep.pattern == "C" and rep.suspect_ranks == ()
    assert [c.exiting for c in rep.classes] == [False, True]
    assert "ranks 0-3: thread 'ThreadPoolExecutor-0_0'" in rep.explanation


def test_teardown_only_does_not_claim_undumped_ranks_when_the_world_is_complete():
    rep = classify([[dump(r, DESTROY) for r in range(4)]] * 2, world_size=4)
    assert "not in the dump" not in rep.title


def test_a_pid_only_crashed_dump_still_means_a_process_left():
    # A crashed dump without a rank (faulthandler in a log with no rank label): the process
    # that died is what the others wait for, shown by pid.
    crash = replace(dump(None, ALL_REDUCE, status="", pid=102), status=CRASHED,
                    message="Fatal Python error: Segmentation fault")
    rep = classify([dump(None, ALL_REDUCE, pid=100), dump(None, ALL_REDUCE, pid=101), crash])
    assert rep.pattern == "A"
    assert rep.title == "pid 102 exited; pids 100,101 wait for it in all_reduce"
    assert rep.missing_pids == (102,) and rep.missing_ranks == ()
    assert report_json(rep)["missing_pids"] == [102]
    assert any(e.startswith("pid 102 missing") for e in symptoms(rep)[0].evidence)


def test_a_crashed_dump_without_a_rank_beside_ranked_dumps_is_a_process_that_left():
    # Ranks 0-2 dumped by py-spy (rank<N>.txt), and a log whose faulthandler output names no
    # rank: a process that crashed is no launcher or Ray driver idling, to be left out; the
    # ranks wait for it (pattern A), not for a slow network (C).
    crash = replace(dump(None, ALL_REDUCE, pid=555), status=CRASHED,
                    message="Fatal Python error: Segmentation fault")
    rep = classify(waiting() + [crash])
    assert rep.pattern == "A" and rep.missing_pids == (555,)
    assert rep.title == "pid 555 exited; ranks 0-2 wait for it in all_reduce"
    assert rep.other_pids == () and "launcher" not in rep.explanation
    assert "pid 555 crashed (Fatal Python error: Segmentation fault)" in rep.explanation
    # a rank-less process that did not crash (torchrun's launcher) is still left out
    launcher = dump(None, [F("_poll", "torch/distributed/elastic/agent/server/api.py", 900)],
                    pid=7)
    rep = classify(waiting() + [launcher, crash])
    assert rep.other_pids == (7,) and rep.missing_pids == (555,)


@pytest.mark.parametrize("rank, pid, who", [(None, 0, "pid 0"), (None, 4993, "pid 4993"),
                                            (0, 812, "rank 0")])
def test_a_lone_crash_dump_says_it_crashed_not_that_it_is_missing(rank, pid, who):
    # One faulthandler dump alone (the real fixtures' segfaults and aborts): its process is
    # the one whose dump was given, so "missing from the dump" would contradict it.
    crash = replace(dump(rank, ALL_REDUCE, pid=pid), status=CRASHED,
                    message="Fatal Python error: Aborted")
    rep = classify([crash], missing_ranks=[7])
    assert rep.title == f"No stacks to compare: {who} crashed. rank 7 missing from the dump."
    rep = classify([crash])
    assert rep.title == f"No stacks to compare: {who} crashed."
    assert f"{who} crashed (Fatal Python error: Aborted)" in rep.explanation


def test_wandb_atexit_cleanup_is_an_exiting_rank():
    wb = [F("wait", "threading.py", 320),
          F("Run._on_finish", "wandb/sdk/wandb_run.py", 2200),
          F("Run._atexit_cleanup", "wandb/sdk/wandb_run.py", 2300)]
    rep = classify([waiting() + [dump(3, wb)]] * 2)
    assert rep.pattern == "A" and "rank 3 is exiting" in rep.title


def test_a_single_thread_faulthandler_dump_in_an_atexit_handler_is_exiting():
    text = ('Current thread 0x00007f1c2a4b3740 (most recent call first):\n'
            '  File "/usr/lib/python3.10/multiprocessing/popen_fork.py", line 27 in poll\n'
            '  File "/usr/lib/python3.10/multiprocessing/popen_fork.py", line 43 in wait\n'
            '  File "/usr/lib/python3.10/multiprocessing/process.py", line 149 in join\n'
            '  File "/usr/lib/python3.10/multiprocessing/util.py", line 357 in _exit_function\n')
    rep = classify([waiting() + [ranked(text, 3)]] * 2)
    assert rep.pattern == "A" and rep.suspect_ranks == (3,)


def test_a_native_main_thread_in_py_finalize_is_exiting():
    fin = [F("c10d::ProcessGroupNCCL::~ProcessGroupNCCL()", "libtorch_cuda.so", native=True),
           F("Py_FinalizeEx", "libpython3.10.so.1.0", native=True),
           F("Py_RunMain", "libpython3.10.so.1.0", native=True),
           F("main", "python3.10", native=True)]
    rep = classify([waiting() + [dump(3, fin)]] * 2)
    assert rep.pattern == "A" and rep.suspect_ranks == (3,)


def test_an_empty_main_thread_is_exiting():
    text = pyspy(1003, 'Thread 1003 (idle): "MainThread"\n'
                       'Thread 1010 (idle): "Thread-2 (_pin_memory_loop)"\n'
                       '    wait (threading.py:324)\n    get (queue.py:180)\n'
                       '    _pin_memory_loop (torch/utils/data/_utils/pin_memory.py:54)\n'
                       '    run (threading.py:975)\n    _bootstrap (threading.py:995)\n',
                 version="3.11.4")
    rep = classify([waiting() + [ranked(text, 3)]] * 2)
    assert rep.pattern == "A" and rep.suspect_ranks == (3,)


def test_a_dump_cut_short_after_a_shutdown_call_is_not_exiting():
    # The file ends mid-line (reported) after ThreadPoolExecutor.shutdown, called from a
    # checkpoint save in the loop: with <module> cut off the outermost frame is unknown, so no
    # exit can be read from it (pattern B, rank 3 idle outside).
    cut = pyspy(1003, 'Thread 1003 (idle): "MainThread"\n'
                      '    _wait_for_tstate_lock (threading.py:1167)\n'
                      '    join (threading.py:1147)\n'
                      '    ThreadPoolExecutor.shutdown (concurrent/futures/thread.py:239)\n'
                      '    Checkpointer.sa')
    rep = classify(waiting() + [ranked(cut, 3)])
    assert not any(c.exiting for c in rep.classes)
    assert "exiting" not in rep.title
    assert rep.pattern == "B" and rep.suspect_ranks == (3,)


def _all_reduce_text(pid: int, cut_after: str = "") -> str:
    """rank N's dump of ALL_REDUCE as py-spy prints it; ``cut_after``: the file ends that many
    characters into the line of that function (a dump cut short)."""
    text = pyspy(pid, f'Thread {pid} (idle): "MainThread"\n' + "".join(
        f"    {f.name} ({f.filename}:{f.line})\n" for f in ALL_REDUCE))
    return text[:text.index(f"    {cut_after} (") + 8] if cut_after else text


def test_a_stack_cut_short_counts_with_the_ranks_whose_stack_ends_as_its_does():
    # Rank 3's file ends mid-line in ``main``: its frames from train down are those of ranks
    # 0-2, in the same all_reduce from the same line. The frames lost say nothing of a
    # difference: one class, pattern C (not B with rank 3 "the odd one out").
    full = [ranked(_all_reduce_text(1000 + r), r) for r in range(3)]
    cut = ranked(_all_reduce_text(1003, cut_after="main"), 3)
    assert cut.threads[0].frames[-1].name == CUT
    rep = classify(full + [cut])
    assert rep.pattern == "C" and rep.suspect_ranks == ()
    assert [c.members for c in rep.classes] == [(0, 1, 2, 3)]
    assert rep.classes[0].frames[0].name == "<module>"  # a whole stack is the class's
    assert [ms for _, ms in rep.classes[0].sites] == [(0, 1, 2, 3)]
    # rank 0 cut: the class still shows a whole stack
    rep = classify([ranked(_all_reduce_text(1000, cut_after="train"), 0), *full[1:]])
    assert [c.members for c in rep.classes] == [(0, 1, 2)]
    assert rep.classes[0].frames[0].name == "<module>"


def test_ranks_cut_at_different_depths_are_one_class():
    dumps = [ranked(_all_reduce_text(1000 + r, cut_after=f), r)
             for r, f in enumerate(("main", "train", "train_step"))]
    rep = classify(dumps)
    assert [c.members for c in rep.classes] == [(0, 1, 2)]
    assert rep.pattern == "C"


def test_a_cut_stack_two_classes_end_as_is_left_alone():
    # Ranks 0-1 reach train from main, ranks 2-3 from evaluate: rank 4's stack, cut below
    # both, could be either; it is not guessed into one.
    other = [F("all_reduce", C10D, 2501), F("wrapper", "torch/distributed/c10d_logger.py", 83),
             F("train_step", "train.py", 50), F("train", "train.py", 30),
             F("evaluate", "train.py", 20), F("<module>", "train.py", 100)]
    dumps = [dump(r, ALL_REDUCE) for r in (0, 1)] + [dump(r, other) for r in (2, 3)]
    rep = classify(dumps + [ranked(_all_reduce_text(1004, cut_after="main"), 4)])
    assert (4,) in [c.members for c in rep.classes]


def test_a_rank_whose_second_sample_is_cut_short_has_not_moved():
    full = [ranked(_all_reduce_text(1000 + r), r) for r in range(4)]
    cut = ranked(_all_reduce_text(1003, cut_after="train"), 3)
    rep = classify([full, full[:3] + [cut]])
    assert [(c.members, c.state) for c in rep.classes] == [((0, 1, 2, 3), "stuck")]
    assert rep.pattern == "C"


def test_pandas_reduce_is_no_pipeline_wait():
    pandas = [F("DataFrame._reduce", "pandas/core/frame.py", 11000),
              F("DataFrame.mean", "pandas/core/frame.py", 11500),
              F("evaluate", "train.py", 70), F("main", "train.py", 10),
              F("<module>", "train.py", 100)]
    barrier = [F("barrier", C10D, 3000), F("main", "train.py", 12), F("<module>", "train.py", 100)]
    assert not comm_tier(pandas[0])
    rep = classify([dump(0, pandas, status="active")] + [dump(r, barrier) for r in (1, 2, 3)])
    assert rep.verdict == WORKING


# -- what the reports say --------------------------------------------------------------------------

PY313_EXIT = [F("Thread.join", "threading.py", 1094),
              F("_python_exit", "concurrent/futures/thread.py", 31),
              F("_shutdown", "threading.py", 1530)]


def test_teardown_only_text_with_an_exiting_class_is_not_garbled():
    rep = classify([[dump(0, DESTROY)] + [dump(r, PY313_EXIT) for r in (1, 2, 3)]] * 2)
    assert rep.pattern == "A"
    assert "jowait" not in rep.explanation
    assert "destroy_process_group" in rep.explanation


def test_missing_rank_with_every_dumped_rank_in_teardown_reads_right():
    rep = classify([[dump(r, DESTROY) for r in range(3)]] * 2, missing_ranks=[3])
    assert rep.pattern == "A"
    assert "no rank wait" not in rep.title
    assert "no other rank wait" not in rep.explanation


def test_title_with_two_culprits_says_them():
    rep = classify(waiting(2) + [dump(2, SHUTDOWN_312)], missing_ranks=[3])
    assert rep.pattern == "A" and rep.suspect_ranks == (2, 3)
    assert "for it" not in rep.title
    assert "its victims" not in rep.explanation


def test_cleanup_title_with_one_waiter_agrees_in_number():
    cleanup = [F("destroy_process_group", C10D, 1800), F("Trainer.__exit__", "train.py", 215),
               F("main", "train.py", 10), F("<module>", "train.py", 100)]
    rep = classify([[dump(0, cleanup), dump(1, ALL_REDUCE)]] * 2)
    assert rep.pattern == "A"
    assert rep.title.endswith("rank 1 waits")


def test_thread_note_names_the_thread_of_each_rank():
    def pf(n: int) -> ThreadStack:
        return thread(PREFETCH, name=f"Thread-{n} (_prefetch)", tid=9)
    rep = classify([[dump(0, IDLE_MAIN, extra=(pf(3),)), dump(1, IDLE_MAIN, extra=(pf(3),)),
                     dump(2, IDLE_MAIN, extra=(pf(4),)), dump(3, IDLE_MAIN, extra=(pf(5),))]] * 2)
    assert rep.pattern == "C"
    assert "Thread-5 (_prefetch)" in rep.explanation
