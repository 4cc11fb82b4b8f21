"""Each text form of a stack dump that rltui reads, in its smallest shape (written from the
formats' sources; posted instances are in fixtures/real/stacks and tested there)."""

from __future__ import annotations

import pytest

from rltui.diagnosis.stacks import classify
from rltui.model import ANONYMOUS_PID, CRASHED
from rltui.parsing.pyspy import parse_any

C10D = "torch/distributed/distributed_c10d.py"


def read(text: str):
    dumps, problems = parse_any(text, "t")
    return dumps, problems


def names(d, i=0):
    return [f.name for f in d.threads[i].frames]


def test_interleaved_ray_workers_are_read_apart():
    text = (
        "(WorkerDict pid=2314) Process 2314: ray::WorkerDict.actor_rollout_generate_sequences\n"
        "(WorkerDict pid=2315) Process 2315: ray::WorkerDict.actor_rollout_generate_sequences\n"
        '(WorkerDict pid=2314) Thread 2314 (idle): "MainThread"\n'
        '(WorkerDict pid=2315) Thread 2315 (idle): "MainThread"\n'
        f"(WorkerDict pid=2314)     all_reduce ({C10D}:2501)\n"
        f"(WorkerDict pid=2315)     broadcast ({C10D}:2200)\n"
        "(WorkerDict pid=2314)     step (trainer.py:10) [repeated 3x across cluster]\n"
        "(WorkerDict pid=2315)     step (trainer.py:12)\n")
    dumps, problems = read(text)
    assert problems == []
    assert [(d.pid, names(d)) for d in dumps] == [(2314, ["all_reduce", "step"]),
                                                  (2315, ["broadcast", "step"])]
    assert {d.role for d in dumps} == {"WorkerDict"}


def test_torchrun_prefixes_give_ranks_and_separate_writers():
    text = ('[rank0]: Thread 100 (idle): "MainThread"\n[rank1]: Thread 200 (idle): "MainThread"\n'
            f"[rank0]:     barrier ({C10D}:4000)\n[rank1]:     all_reduce ({C10D}:2501)\n")
    dumps, _ = read(text)
    assert [(d.rank, d.pid, names(d)) for d in dumps] == [(0, 100, ["barrier"]),
                                                          (1, 200, ["all_reduce"])]


def test_faulthandler_fatal_error_is_a_crashed_process():
    text = ("[rank1]:[E707 07:20:43.220 ProcessGroupNCCL.cpp:1693] [Rank 1] watchdog thread "
            "terminated with exception\nFatal Python error: Aborted\n\n"
            "Thread 0x00007f3c8e7fc700 (most recent call first):\n"
            '  File "/usr/lib/python3.10/threading.py", line 324 in wait\n\n'
            "Current thread 0x00007f3d1d3b4740 (most recent call first):\n"
            f'  File "/opt/{C10D}", line 2501 in all_reduce\n'
            '  File "train.py", line 60 in <module>\n')
    (d,), _ = read(text)
    assert d.status == CRASHED and d.message.startswith("Fatal Python error: Aborted")
    assert d.rank == 1 and [t.name for t in d.threads] == ["", "MainThread"]
    assert names(d, 1) == ["all_reduce", "<module>"]


def test_debug_server_sections_and_sglang_watchdog_blocks():
    debug = ("=== Rank 0: 10.0.0.1:5000 ===\n"
             "Thread 0x00007f3d1d3b4740 (most recent call first):\n"
             f'  File "{C10D}", line 2501 in all_reduce\n  File "t.py", line 6 in <module>\n\n'
             "=== Rank 1: 10.0.0.2:5000 ===\n"
             "Thread 0x00007f3d1d3b4740 (most recent call first):\n"
             f'  File "{C10D}", line 2501 in all_reduce\n  File "t.py", line 6 in <module>\n')
    dumps, _ = read(debug)
    assert [d.rank for d in dumps] == [0, 1]
    assert classify([dumps]).pattern == "C"
    sglang = ("[2025-03-01 12:00:00 TP3] Pyspy dump for PID 4242:\n"
              "Process 4242: sglang::scheduler_TP3\nPython v3.11.9 (/usr/bin/python3.11)\n\n"
              'Thread 4242 (idle): "MainThread"\n'
              "    event_loop_overlap (sglang/srt/managers/scheduler.py:600)\n")
    (d,), _ = read(sglang)
    assert (d.pid, d.rank, d.role) == (4242, 3, "sglang scheduler TP3")


@pytest.mark.parametrize("prefix", ["", "trainer-1  | ", "2024-05-01T12:00:00.123456789Z ",
                                    "0: ", "[0007] ", "> "])
def test_separators_and_carriers(prefix):
    text = "".join(prefix + line + "\n" for line in (
        "== pid 100 rank 0 ==", 'Thread 100 (idle): "MainThread"', f"    barrier ({C10D}:4000)",
        "== pid 101 rank 1 ==", 'Thread 101 (idle): "MainThread"',
        f"    all_reduce ({C10D}:2501)"))
    dumps, _ = read(text)
    assert [(d.pid, names(d)) for d in dumps] == [(100, ["barrier"]), (101, ["all_reduce"])]
    if prefix != "0: ":  # srun's task number is the rank, over the separator's
        assert [d.rank for d in dumps] == [0, 1]


def test_condensed_main_threads_share_the_stack_below_them():
    text = ("4 in:\n\n"
            'Thread 10 (active): "MainThread"\nThread 11 (active): "MainThread"\n'
            'Thread 12 (active): "MainThread"\nThread 13 (active): "MainThread"\n'
            f"    broadcast ({C10D}:1191)\n    train (training.py:9)\n"
            "2 processes are in:\n\n"
            'Thread 20 (idle): "MainThread"\n'
            "    wait (threading.py:306)\n    train (training.py:7)\n")
    dumps, _ = read(text)
    assert [d.pid for d in dumps] == [10, 11, 12, 13, 20, ANONYMOUS_PID]
    assert all(names(d) == ["broadcast", "train"] for d in dumps[:4])
    assert names(dumps[5]) == ["wait", "train"]


def test_hard_wrapped_frame_is_joined_and_old_tabs_read():
    text = ('Thread 100 (idle): "MainThread"\n'
            "    _wait_for_pending_works (/home/user/.local/lib/python3.10/site-packages/torch/"
            "distributed/distr\nibuted_c10d.py:1234)\n    main (train.py:10)\n"
            "Process 7: ray::IDLE\nPython v3.6.8 (/usr/bin/python3.6)\n\n"
            "Thread 0x7F0C5D5E1700 (idle)\n\twait (threading.py:295)\n\tget (queue.py:164)\n")
    dumps, problems = read(text)
    assert problems == []
    assert dumps[0].threads[0].frames[0].filename.endswith("distributed_c10d.py")
    assert names(dumps[0]) == ["_wait_for_pending_works", "main"]
    assert names(dumps[1]) == ["wait", "get"] and dumps[1].role == "ray idle"


def test_frames_with_nothing_above_them_are_one_thread():
    dumps, _ = read("main_loop (ray/_private/worker.py:935)\n"
                    "<module> (ray/_private/workers/default_worker.py:297)\n")
    assert names(dumps[0]) == ["main_loop", "<module>"]


def test_a_file_that_is_no_dump_says_where_reading_stopped():
    dumps, problems = read("epoch 1 done\nloss 0.5\n")
    assert dumps == [] and "line 1: 'epoch 1 done'" in problems[0]
    dumps, problems = read('Thread 1 (idle): "MainThread"\n    f (x.py:1)\n!!garbage!!\n'
                           "    g (x.py:2)\n")
    assert len(dumps) == 1 and "first at line 3" in problems[0]
