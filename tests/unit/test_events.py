"""Log event parsers: tracebacks, OOMs, NCCL timeouts, torchrun failures, end banners.

The fixtures in fixtures/logs/event-*.log are real-format samples (fixtures/logs/README.md says
which lines are copied from public reports and which are assembled from format strings).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rltui import units
from rltui.parsing import distfail, events, oom
from rltui.parsing import tracebacks as tb
from rltui.parsing.events import EventReader
from tests.importcheck import forbidden_loaded
from tests.unit.event_fixtures import check_fixture_events

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
GiB, MiB, KiB = 2**30, 2**20, 2**10


def g(x: float) -> int:
    return int(x * GiB)


def m(x: float) -> int:
    return int(x * MiB)


def run(lines, reader=None, source=None, start=1):
    reader = reader or EventReader()
    out = []
    for i, line in enumerate(lines, start):
        out += reader.feed(line, i, 1000.0 + i, source)
    out += reader.flush()
    return sorted(out, key=lambda e: e.line_no)


def run_file(name, reader=None):
    lines = (LOGS / name).read_text(encoding="utf-8").splitlines()
    return run(lines, reader)


def f(event):
    return dict(event.fields)


# -- the fixtures, table-driven ---------------------------------------------------------------------
# file -> [(kind, line_no, end_line, {field: exact value})], ordered by line_no.
FIXTURES = {
    "event-traceback.log": [
        ("traceback", 4, 14, {"exc_type": "KeyError", "exc_message": "'final_answer'", "frames": 4,
                              "last_frame": "/workspace/recipes/math_reward.py:37 in compute_score"}),
    ],
    "event-traceback-chained.log": [
        ("traceback", 2, 26, {"exc_type": "ValueError", "exc_message": "bad record at line 1201",
                              "chained": 2, "cause_type": "json.decoder.JSONDecodeError",
                              "cause_message": "Expecting value: line 1 column 1 (char 0)",
                              "last_frame": "/workspace/areal/utils/data.py:91 in load_item"}),
        ("traceback", 28, 42, {"exc_type": "RuntimeError", "chained": 2,
                               "cause_type": "requests.exceptions.HTTPError"}),
    ],
    "event-traceback-truncated.log": [
        ("traceback", 2, 7, {"truncated": True, "frames": 3, "exc_type": None,
                             "last_frame": "/workspace/verl/verl/trainer/ppo/metric_utils.py:96 in "
                                           "compute_data_metrics"}),
    ],
    "event-oom-verl-2828.log": [
        ("cuda-oom", 2, 17, {
            "format": "current", "exception": "torch.OutOfMemoryError", "gpu": 0,
            "requested": g(13.91), "capacity": g(79.11), "free": g(8.85), "allocated": g(60.49),
            "reserved_unallocated": g(6.77), "process_usage": f"23444:{g(70.25)}", "others_count": 1,
            "others_bytes": g(70.25), "exc_type": "torch.OutOfMemoryError",
            "last_frame": "/verl/verl/utils/torch_functional.py:148 in entropy_from_logits"}),
    ],
    "event-oom-current.log": [
        ("cuda-oom", 2, 14, {
            "format": "current", "gpu": 3, "requested": g(2.32), "capacity": g(79.25), "free": g(1.06),
            "this_process": g(78.17), "allocated": g(70.12), "private_pools": g(1.50),
            "reserved_unallocated": g(5.88), "log_rank": 3, "process_usage": None}),
    ],
    "event-oom-old.log": [
        ("cuda-oom", 2, 11, {
            "format": "old", "exception": "RuntimeError", "gpu": 0, "requested": m(20.00),
            "capacity": g(10.76), "allocated": g(9.58), "free": m(11.06), "reserved_total": g(9.70),
            "reserved_unallocated": None}),
    ],
    "event-oom-ray.log": [
        ("cuda-oom", 2, 16, {
            "format": "current", "gpu": 1, "requested": g(1.25), "free": g(1.18),
            "process_usage": f"5391:{g(80.50)},5377:{g(11.32)}", "others_count": 2,
            "others_bytes": g(80.50) + g(11.32), "reserved_unallocated": m(120.54),
            "exc_type": "torch.OutOfMemoryError",
            "last_frame": "/workspace/verl/verl/workers/actor/dp_actor.py:470 in update_policy"}),
    ],
    "event-vllm-free-memory.log": [
        ("engine-oom", 4, 18, {"engine": "vllm", "reason": "free-memory-at-start", "device": "cuda:0",
                               "free": g(12.18), "total": g(23.56), "utilization": 0.92,
                               "desired": g(21.67), "exc_type": "ValueError", "frames": 5}),
        ("engine-oom", 20, 27, {"engine": "vllm", "free": g(12.18), "frames": 3}),
        ("traceback", 28, 33, {"exc_type": "RuntimeError"}),
    ],
    "event-vllm-cache-blocks.log": [
        ("engine-oom", 3, 12, {"engine": "vllm", "reason": "no-cache-blocks", "exc_type": "ValueError"}),
        ("engine-oom", 13, 13, {"engine": "vllm", "reason": "kv-cache-too-small", "max_model_len": 32768,
                                "needed": g(16.00), "available": g(4.85), "estimated_max_len": 9936}),
    ],
    "event-sglang-start.log": [
        ("engine-oom", 2, 13, {"engine": "sglang", "reason": "mem-fraction-static",
                               "exc_type": "RuntimeError", "frames": 5}),
    ],
    "event-nccl-watchdog.log": [
        ("nccl-timeout", 1, 3, {"rank": 118, "pg": 0, "seq": 2398459, "op": "ALLREDUCE",
                                "numel_in": 8652160, "numel_out": 8652160, "timeout_ms": 1800000,
                                "ran_for_ms": 1800068, "last_enqueued": 2398578,
                                "last_completed": 2398458, "timed_out": True}),
        ("nccl-timeout", 2, 5, {"rank": 119, "seq": 2398459, "ran_for_ms": 1800072,
                                "last_completed": 2398458}),
    ],
    "event-nccl-old.log": [
        ("nccl-timeout", 1, 2, {"rank": 0, "pg": 1, "seq": 7753, "op": "_REDUCE_SCATTER_BASE",
                                "numel_in": 544997376, "numel_out": 68124672, "timeout_ms": 600000,
                                "last_enqueued": 7755, "last_completed": 7752}),
        ("nccl-timeout", 3, 3, {"rank": 7, "seq": 64088, "op": "ALLREDUCE", "numel_in": None,
                                "timeout_ms": 1800000, "ran_for_ms": 25625251, "timed_out": True}),
        ("nccl-timeout", 4, 4, {"rank": 4, "pg": 2, "seq": 610, "last_enqueued": 616,
                                "last_completed": 609, "timed_out": None}),
    ],
    "event-child-failed-sigkill.log": [
        ("child-failed", 5, 36, {"name": "train_grpo.py", "rank": 4, "local_rank": 4, "exitcode": -9,
                                 "pid": 208585, "signal": "SIGKILL", "host": "node-1",
                                 "failure_time": "2026-05-21_18:37:16", "error_file": "<N/A>",
                                 "other_ranks": "", "failures": 1, "error": None,
                                 "exc_type": "torch.distributed.elastic.multiprocessing.errors."
                                             "ChildFailedError"}),
    ],
    "event-child-failed-python.log": [
        ("traceback", 1, 11, {"exc_type": "FloatingPointError", "log_rank": 1}),
        ("child-failed", 13, 59, {"name": "train.py", "rank": 1, "local_rank": 1, "exitcode": 1,
                                  "pid": 31477, "signal": None, "host": "node-2.cluster.local",
                                  "error": "FloatingPointError: loss is nan at step 17",
                                  "other_ranks": "3", "failures": 2}),
    ],
    "event-completion-areal.log": [
        ("completion", 2, 2, {"framework": "areal", "elapsed": 1524.33}),
    ],
    "event-completion-hf.log": [("completion", 5, 5, {"framework": "hf"})],
    "event-completion-torchtitan.log": [("completion", 3, 3, {"framework": "torchtitan"})],
    "event-failure-areal.log": [
        ("failure", 1, 1, {"framework": "areal",
                           "exc_message": "Engine core initialization failed. See root cause above."}),
        ("traceback", 2, 9, {"exc_type": "RuntimeError"}),
        ("completion", 10, 10, {"framework": "areal", "elapsed": 61.2}),
    ],
    "event-interleaved.log": [
        ("traceback", 1, 11, {"exc_type": "AssertionError", "exc_message": "", "log_rank": 0,
                              "last_frame": "/workspace/trainer.py:140 in step"}),
        ("traceback", 2, 13, {"exc_type": "ValueError", "exc_message": "empty batch on rank 1",
                              "log_rank": 1, "last_frame": "/workspace/trainer.py:131 in step"}),
    ],
}


def test_every_event_fixture_is_in_the_table():
    assert {p.name for p in LOGS.glob("event-*.log")} == set(FIXTURES)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_events(name):
    check_fixture_events(name, run_file(name), FIXTURES[name])


def test_verl_2828_summary_and_text():
    (event,) = run_file("event-oom-verl-2828.log")
    assert event.summary == ("CUDA OOM on GPU 0: tried to allocate 13.91 GiB, 8.85 GiB free of 79.11 GiB; "
                             "process 23444 holds 70.25 GiB")
    assert event.text.splitlines()[0] == "Traceback (most recent call last):"
    assert event.text.splitlines()[-1].startswith("torch.OutOfMemoryError: CUDA out of memory.")


def test_child_failed_summaries():
    (sigkill,) = run_file("event-child-failed-sigkill.log")
    assert sigkill.summary == ("torchrun: rank 4 (local_rank 4) on node-1 killed by SIGKILL (pid 208585); "
                              "possible host OOM: check dmesg / the kernel's OOM killer")
    assert f(sigkill)["possible_host_oom"] is True
    assert sigkill.time == time.mktime((2026, 5, 21, 18, 37, 16, 0, 0, -1))
    python = run_file("event-child-failed-python.log")[1]
    assert "exited with code 1" in python.summary and "loss is nan" in python.summary
    assert "also failed: rank 3" in python.summary


def test_line_time_of_areal_banner_is_local_time_with_millis():
    (event,) = run_file("event-completion-areal.log")
    assert event.time == pytest.approx(time.mktime((2026, 5, 21, 19, 2, 40, 0, 0, -1)) + 0.871)
    assert event.arrival == 1002.0


# -- sizes -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("number, unit, expected", [
    ("512", "bytes", 512), ("0", "bytes", 0), ("1.50", "KiB", 1536), ("20.00", "MiB", 20 * MiB),
    ("13.91", "GiB", int(13.91 * GiB)), ("1.5", "KiB", 1536), ("2.00", "GB", 2 * GiB),
])
def test_size_to_bytes(number, unit, expected):
    assert oom.size_to_bytes(number, unit) == expected


@pytest.mark.parametrize("value, text", [
    (512, "512 bytes"), (1024, "1024 bytes"), (1536, "1.50 KiB"), (20 * MiB, "20.00 MiB"),
    (int(13.91 * GiB), "13.91 GiB"), (None, "?"),
])
def test_format_bytes_prints_like_pytorch(value, text):
    assert units.pytorch_bytes(value) == text


# -- CUDA OOM variants -------------------------------------------------------------------------------
CURRENT = ("CUDA out of memory. Tried to allocate 76.00 MiB. GPU 0 has a total capacity of 14.74 GiB of "
           "which 42.19 MiB is free. Process 21219 has 284.00 MiB memory in use. Process 21222 has 3.40 GiB "
           "memory in use. Of the allocated memory 10.59 GiB is allocated by PyTorch, and 42.18 MiB is "
           "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")


@pytest.mark.parametrize("line, expected", [
    ("torch.OutOfMemoryError: " + CURRENT,
     {"exception": "torch.OutOfMemoryError", "requested": m(76), "free": m(42.19),
      "process_usage": f"21219:{m(284)},21222:{g(3.40)}", "others_count": 2}),
    # PyTorch 2.1 misspelled "capacity"; torch.cuda.OutOfMemoryError was the class then.
    (("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 1 has a total "
     "capacty of 79.10 GiB of which 364.31 MiB is free. Of the allocated memory 72.12 GiB is allocated "
     "by PyTorch, and 3.78 GiB is reserved by PyTorch but unallocated."),
     {"exception": "torch.cuda.OutOfMemoryError", "gpu": 1, "capacity": g(79.10), "free": m(364.31)}),
    # set_per_process_memory_fraction adds "{X} allowed; "; 0 bytes free is printed as bytes.
    (("OutOfMemoryError: CUDA out of memory. Tried to allocate 512 bytes. GPU 2 has a total capacity of "
     "8.00 GiB of which 0 bytes is free. 4.00 GiB allowed; Of the allocated memory 3.99 GiB is allocated "
     "by PyTorch, and 1.5 KiB is reserved by PyTorch but unallocated."),
     {"requested": 512, "free": 0, "allowed": g(4.0), "reserved_unallocated": 1536, "gpu": 2}),
    (("RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 7.79 GiB total capacity; "
     "6.10 GiB already allocated; 4.12 MiB free; 2.00 GiB allowed; 6.20 GiB reserved in total by PyTorch)"),
     {"format": "old", "allowed": g(2.0), "reserved_total": g(6.20), "free": m(4.12)}),
    # Before reserved memory was named, the allocator said "cached".
    (("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.92 GiB total capacity; "
     "9.88 GiB already allocated; 9.50 MiB free; 4.41 GiB cached)"),
     {"format": "old", "reserved_total": g(4.41), "capacity": g(10.92)}),
])
def test_cuda_oom_variants(line, expected):
    (event,) = run([line])
    assert event.kind == "cuda-oom" and (event.line_no, event.end_line) == (1, 1)
    have = f(event)
    for key, value in expected.items():
        assert have[key] == value, key


def test_cuda_runtime_oom_with_its_multi_line_message():
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 9, in <module>',
        "    x = torch.empty(n, device='cuda')",
        "RuntimeError: CUDA error: out of memory",
        ("CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
        "below might be incorrect."),
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        "",
        "step:3 - loss:0.1",
    ]
    (event,) = run(lines)
    assert (event.kind, event.line_no, event.end_line) == ("cuda-oom", 1, 7)
    assert f(event)["format"] == "cuda-error" and f(event)["exception"] == "RuntimeError"


def test_a_line_that_only_mentions_oom_is_not_an_event():
    assert run(["hint: lower the batch size to avoid CUDA out of memory errors"]) == []
    assert run(["WARNING reserved memory is large"]) == []


@pytest.mark.parametrize("line, expected", [
    (("ValueError: Free memory on device (61.05/119.7 GiB) on startup is less than desired GPU memory "
     "utilization (0.52, 62.24 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
     "processes."),
     {"engine": "vllm", "device": None, "free": g(61.05), "total": g(119.7), "utilization": 0.52,
      "desired": g(62.24)}),
    (("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
     "mem_fraction_static=0.8"),
     {"engine": "sglang", "mem_fraction_static": 0.8}),
    (("(EngineCore_DP0 pid=3258054) ValueError: To serve at least one request with the models's max seq len "
     "(262144), (24.0 GiB KV cache is needed, which is larger than the available KV cache memory (9.05 GiB). "
     "Based on the available memory, the estimated maximum model length is 98816."),
     {"reason": "kv-cache-too-small", "needed": g(24.0), "available": g(9.05), "max_model_len": 262144}),
])
def test_engine_oom_single_lines(line, expected):
    (event,) = run([line])
    assert event.kind == "engine-oom"
    have = f(event)
    for key, value in expected.items():
        assert have[key] == value, key
    assert event.summary.startswith(("vLLM could not start", "SGLang could not start"))


# -- NCCL --------------------------------------------------------------------------------------------
TIMEOUT = ("[E603 17:48:01.005271823 ProcessGroupNCCL.cpp:632] [Rank 118] Watchdog caught collective "
           "operation timeout: WorkNCCL(SeqNum=2398459, OpType=ALLREDUCE, NumelIn=8652160, NumelOut=8652160, "
           "Timeout(ms)=1800000) ran for 1800068 milliseconds before timing out.")
STATUS = ("[E603 17:48:01.005402110 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank 118]  "
          "failure detected by watchdog at work sequence id: 2398459 PG status: last enqueued work: 2398578, "
          "last completed work: 2398458")


def test_watchdog_with_and_without_the_rank_prefix_gives_the_same_fields():
    stripped = run([TIMEOUT, STATUS])
    prefixed = run(["[rank118]:" + TIMEOUT, "[rank118]:" + STATUS])
    assert [e.fields for e in stripped] == [e.fields for e in prefixed]
    (event,) = stripped
    assert (event.line_no, event.end_line) == (1, 2)
    assert event.summary == ("NCCL watchdog timeout on rank 118: ALLREDUCE #2398459 ran 1800 s "
                             "(timeout 1800 s); last completed 2398458, last enqueued 2398578")


def test_watchdog_status_far_away_is_its_own_event():
    lines = [TIMEOUT] + ["step:1 - loss:0.5"] * (events.NCCL_WINDOW + 20) + [STATUS]
    got = run(lines)
    assert [(e.line_no, e.end_line) for e in got] == [(1, 1), (len(lines), len(lines))]
    assert f(got[0]).get("last_completed") is None and f(got[0])["timed_out"] is True
    assert f(got[1])["timed_out"] is None and f(got[1])["seq"] == 2398459


def test_watchdog_repeat_from_the_cpp_terminate_message_is_dropped():
    repeat = ("  what():  [PG ID 0 PG GUID 0(default_pg) Rank 118] Process group watchdog thread terminated "
              "with exception: " + TIMEOUT.split("] ", 1)[1])
    got = run([TIMEOUT, STATUS, "terminate called after throwing an instance of 'c10::DistBackendError'",
               repeat])
    assert len(got) == 1


def test_watchdog_timeout_raised_to_python_is_one_nccl_event_with_its_traceback():
    lines = ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>',
             "    dist.all_reduce(t)",
             ("RuntimeError: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
             "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.")]
    (event,) = run(lines)
    assert event.kind == "nccl-timeout" and (event.line_no, event.end_line) == (1, 4)
    assert f(event)["rank"] == 3 and f(event)["seq"] == 5 and f(event)["exc_type"] == "RuntimeError"


def test_parse_watchdog_reads_key_value_pairs_in_any_order():
    fields = dict(distfail.parse_watchdog(
        "[Rank 2] Watchdog caught collective operation timeout: WorkNCCL(OpType=BROADCAST, SeqNum=1, "
        "Timeout(ms)=600000, NumelIn=80, NumelOut=80) ran for 600027 milliseconds before timing out."))
    assert (fields["seq"], fields["op"], fields["numel_in"], fields["timeout_ms"]) == (1, "BROADCAST", 80, 600000)


# -- torchrun ----------------------------------------------------------------------------------------
def _child_lines(name):
    lines = (LOGS / name).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if "ChildFailedError:" in line)
    return lines[start:]


def test_child_failed_report_without_its_traceback_header():
    got = run(_child_lines("event-child-failed-sigkill.log"))
    (event,) = got
    assert event.kind == "child-failed" and event.line_no == 1 and "truncated" not in f(event)
    assert f(event)["signal"] == "SIGKILL" and f(event)["frames"] == 0


def test_child_failed_report_cut_in_the_middle():
    lines = _child_lines("event-child-failed-sigkill.log")
    cut = lines[: next(i for i, line in enumerate(lines) if "exitcode" in line) + 1]
    (event,) = run(cut)
    assert event.kind == "child-failed" and f(event)["truncated"] is True
    assert f(event)["exitcode"] == -9 and f(event)["signal"] == "SIGKILL" and f(event)["rank"] == 4
    assert event.summary.endswith("(cut off)")


@pytest.mark.parametrize("code, name", [(-9, "SIGKILL"), (-15, "SIGTERM"), (-6, "SIGABRT"), (-11, "SIGSEGV"),
                                        (1, None), (None, None), (-64, "signal 64")])
def test_signal_names_use_linux_numbers(code, name):
    assert distfail.signal_name(code) == name


# -- completion and failure --------------------------------------------------------------------------
def test_custom_completion_patterns_with_named_groups():
    reader = EventReader([r"ALL DONE after (?P<steps>\d+) steps", r"^=== finished ==="])
    got = run(["step:1 - loss:1", "ALL DONE after 120 steps", "=== finished ==="], reader)
    assert [(e.kind, e.line_no) for e in got] == [("completion", 2), ("completion", 3)]
    assert f(got[0]) == {"framework": "custom", "pattern": r"ALL DONE after (?P<steps>\d+) steps",
                         "steps": "120"}


def test_bad_completion_pattern_raises_naming_it():
    with pytest.raises(ValueError, match=r"'train\(ing done'"):
        EventReader(["fine", "train(ing done"])


@pytest.mark.parametrize("line", ["Training completed successfully", "Training completes soon",
                                  "print('Training completed')  # in a code listing"])
def test_lookalike_banners_are_not_completion(line):
    assert run([line]) == []


def test_banners_survive_ansi_tqdm_and_prefixes():
    lines = [("\x1b[32m(AReaL) 20260521-19:02:40.871 StatsLogger INFO:\x1b[0m Training completes! "
             "Total time elapsed 10.00."),
             "100%|#####| 5/5\r[titan] 2026-03-01 13:00:04,552 - root - INFO - Training completed\n",
             ("(TaskRunner pid=7) Training completed. Do not forget to share your model on "
             "huggingface.co/models =) [repeated 3x across cluster]")]
    assert [f(e)["framework"] for e in run(lines)] == ["areal", "torchtitan", "hf"]


# -- tracebacks: shapes, interleaving, cuts ----------------------------------------------------------
TB = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>', "    f()",
      '  File "a.py", line 5, in f', "    raise KeyError(1)", "KeyError: 1"]


def test_interleaved_writers_told_apart_by_the_source_argument():
    a = [(0, line) for line in TB]
    b = [(1, line.replace("KeyError", "TypeError")) for line in TB]
    mixed = [x for pair in zip(a, b, strict=True) for x in pair] + [(0, "step:1"), (1, "step:1")]
    reader, got = EventReader(), []
    for i, (src, line) in enumerate(mixed, 1):
        got += reader.feed(line, i, 0.0, source=src)
    got += reader.flush()
    assert sorted((e.line_no, e.end_line, f(e)["exc_type"], f(e)["log_rank"]) for e in got) == [
        (1, 11, "KeyError", 0), (2, 12, "TypeError", 1)]


def test_interleaved_with_an_unrelated_writer_without_prefix():
    lines = ["[rank0]:" + line for line in TB[:3]] + ["step:5 - loss:0.2"] + ["[rank0]:" + x for x in TB[3:]]
    got = run(lines)
    assert [(e.kind, e.line_no, e.end_line) for e in got] == [("traceback", 1, 7)]


def test_a_traceback_cut_by_an_unrelated_line_of_its_writer():
    got = run(TB[:3] + ["INFO 08-13 19:25:45 ppo_trainer.py:547] Global step 4: {}"])
    (event,) = got
    assert (event.line_no, event.end_line, f(event)["truncated"]) == (1, 3, True)
    assert event.summary == "traceback cut off after 1 frames at a.py:1 in <module>"


def test_a_new_traceback_closes_the_one_that_was_cut():
    got = run(TB[:3] + TB)
    assert [(e.line_no, e.end_line, "truncated" in f(e)) for e in got] == [(1, 3, True), (4, 9, False)]


def test_a_quiet_writer_is_closed_while_others_keep_writing():
    reader = EventReader()
    got = []
    for i, line in enumerate(TB, 1):
        got += reader.feed(line, i, 0.0, source=0)
    for i in range(events.QUIET_LINES + 40):
        got += reader.feed("step:1 - loss:0.1", 100 + i, 0.0, source=1)
    assert [(e.line_no, e.end_line) for e in got] == [(1, 6)]
    assert reader.flush() == []


def test_flush_twice_gives_nothing_new():
    reader = EventReader()
    for i, line in enumerate(TB, 1):
        reader.feed(line, i, 0.0)
    assert len(reader.flush()) == 1 and reader.flush() == []


def test_exception_line_heuristics():
    assert tb.exception_line("KeyboardInterrupt") == ("KeyboardInterrupt", "")
    assert tb.exception_line("ray.exceptions.RayTaskError(ValueError): ray::x") == (
        "ray.exceptions.RayTaskError(ValueError)", "ray::x")
    assert tb.exception_line("BrokenProcessPool: gone") == ("BrokenProcessPool", "gone")
    for line in ("INFO: started", "Loading: 50%", "step:5 - loss:1", "Stats (1/1):", "lowercase: x"):
        assert tb.exception_line(line) is None, line


def test_exception_group_members_are_read():
    lines = ["  + Exception Group Traceback (most recent call last):",
             '  |   File "a.py", line 3, in <module>', "  |     raise ExceptionGroup('eg', [ValueError(1)])",
             "  | ExceptionGroup: eg (1 sub-exception)", "  +-+---------------- 1 ----------------",
             "    | ValueError: 1", "    +------------------------------------", "next line"]
    (event,) = run(lines)
    assert (event.line_no, event.end_line) == (1, 7) and f(event)["exc_type"] == "ValueError"
    assert "truncated" not in f(event)


# -- bounds ------------------------------------------------------------------------------------------
def test_one_megabyte_garbage_line():
    junk = "x" * (1 << 20)
    # Only the first MAX_LINE chars of a line are looked at: the marker past them is not seen.
    assert run([junk, "\x00\xff" * 1000, junk + "Traceback (most recent call last)"]) == []
    got = run(TB[:3] + ["    " + junk] + TB[3:])
    (event,) = got
    assert len(event.text) < tb.MAX_STORED_LINE * 10 and (event.line_no, event.end_line) == (1, 7)


def test_memory_stays_bounded_for_an_endless_traceback():
    reader = EventReader()
    got = reader.feed(TB[0], 1, 0.0)
    peak = 0
    for i in range(2, 30002):
        got += reader.feed(f'  File "deep.py", line {i}, in f{"y" * 500}', i, 0.0)
        if i % 1000 == 0:
            peak = max(peak, reader.pending_chars)
    assert peak < 300_000
    got += reader.flush()
    (event,) = got  # closed as cut at MAX_BLOCK_LINES; the indented rest starts nothing
    assert len(event.text) <= tb.MAX_TEXT and f(event)["truncated"] is True
    assert "lines not kept" in event.text
    assert (event.line_no, event.end_line) == (1, tb.MAX_BLOCK_LINES)


def test_many_writers_do_not_grow_without_bound():
    reader = EventReader()
    for i in range(1000):
        reader.feed(TB[0], i, 0.0, source=i)
    assert len(reader._blocks) <= events.MAX_SOURCES
    assert reader.pending_chars < 10_000


FIXTURE_LINES = [line for p in sorted(LOGS.glob("event-*.log"))
                 for line in p.read_text(encoding="utf-8").splitlines()]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.text(max_size=300), st.sampled_from(FIXTURE_LINES),
                          st.sampled_from(["", "   ", "\r", "\x1b[31m", "[rank1]:", "(Actor pid=3) "])),
                max_size=120),
       st.sampled_from([None, 0, 1, ("x", 2)]))
def test_arbitrary_lines_never_crash_and_events_are_well_formed(lines, source):
    reader = EventReader([r"done\d"])
    got = []
    for i, line in enumerate(lines, 1):
        got += reader.feed(line, i, float(i), source)
        assert reader.pending_chars < 2_000_000
    got += reader.flush()
    for event in got:
        assert 1 <= event.line_no <= event.end_line <= max(len(lines), 1)
        assert len(event.text) <= tb.MAX_TEXT and len(event.summary) <= 300
        assert event.kind in ("traceback", "cuda-oom", "engine-oom", "ray-oom", "nccl-timeout",
                              "child-failed", "completion", "failure")
        for key, value in event.fields:
            assert isinstance(key, str) and (value is None or isinstance(value, (str, int, float)))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000))
def test_parsers_are_total(text):
    oom.parse_cuda_oom(text)
    oom.parse_engine_oom(text)
    distfail.parse_watchdog(text)
    distfail.parse_companion(text)
    report = distfail.ChildReport()
    for line in text.splitlines():
        report.feed(line)
    report.fields()


# -- purity ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("module", ["rltui.parsing.events", "rltui.parsing.oom", "rltui.parsing.distfail",
                                    "rltui.parsing.tracebacks"])
def test_event_parsers_are_pure(module):
    assert forbidden_loaded([module], ["textual", "rich", "pynvml", "psutil", "subprocess"],
                            cwd=str(Path(__file__).resolve().parents[2])) == []
