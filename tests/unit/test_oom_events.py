"""OOM events: Ray's OOM killer (ray-oom), torchrun's SIGKILL as a possible host OOM, and the OOM
fixtures of fixtures/logs/oom/ (README there says what each holds and where it comes from), plus
``numbers_from_event`` over every OOM kind.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rltui.diagnosis.oom.numbers import numbers_from_event, parse_usage
from rltui.model import LogEvent
from rltui.parsing import distfail, oom
from rltui.parsing.events import NCCL_WINDOW, EventReader
from rltui.parsing.noise import strip_noise
from tests.unit.event_fixtures import check_fixture_events

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "fixtures" / "logs"
OOM_LOGS = LOGS / "oom"
GiB, MiB = 2**30, 2**20


def g(x: float) -> int:
    return int(x * GiB)


def m(x: float) -> int:
    return int(x * MiB)


def run(lines, source=None, reader=None):
    """Raw lines straight into the reader (the test_events.py way)."""
    reader = reader or EventReader()
    out = []
    for i, line in enumerate(lines, 1):
        out += reader.feed(line, i, 1000.0 + i, source)
    out += reader.flush()
    return sorted(out, key=lambda e: e.line_no)


def run_cleaned(path: Path):
    """Lines through the noise cleaner first, as the log source feeds them."""
    reader = EventReader()
    out = []
    for i, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        c = strip_noise(raw)
        out += reader.feed(c.text, i, 1000.0 + i, (c.rank, c.actor))
    out += reader.flush()
    return sorted(out, key=lambda e: e.line_no)


def f(event):
    return dict(event.fields)


# -- the OOM fixtures, table-driven -----------------------------------------------------------------
# file -> [(kind, line_no, end_line, {field: exact value})]
FIXTURES = {
    "verl-generation-vllm.log": [
        ("cuda-oom", 4, 60, {"gpu": 0, "requested": g(9.27), "capacity": g(79.25), "free": g(6.12),
                             "this_process": g(73.11), "private_pools": g(2.18),
                             "exc_type": "torch.OutOfMemoryError"}),
    ],
    "verl-logprob-actor.log": [
        ("cuda-oom", 4, 71, {"requested": g(18.55), "reserved_unallocated": g(12.73),
                             "process_usage": f"42310:{g(67.24)}"}),
    ],
    "verl-logprob-ref.log": [("cuda-oom", 3, 33, {"gpu": 2, "requested": g(4.64)})],
    "verl-actor-backward.log": [
        ("cuda-oom", 3, 31, {"gpu": 3, "last_frame": "/usr/local/lib/python3.10/dist-packages/torch/"
                                                     "autograd/graph.py:823 in _engine_run_backward"}),
    ],
    "verl-critic-update.log": [("cuda-oom", 3, 57, {"gpu": 1, "capacity": g(39.38)})],
    "verl-weight-sync.log": [("cuda-oom", 3, 37, {"gpu": 4, "free": m(897.62)})],
    "verl-2828-entropy.log": [
        ("cuda-oom", 3, 27, {"requested": g(13.91), "capacity": g(79.11), "free": g(8.85),
                             "allocated": g(60.49), "reserved_unallocated": g(6.77),
                             "process_usage": f"23444:{g(70.25)}"}),
    ],
    "verl-oom-cut.log": [
        ("cuda-oom", 2, 32, {"format": "current", "gpu": 5, "requested": g(3.71), "capacity": g(79.10),
                             "free": None, "allocated": None, "reserved_unallocated": None}),
    ],
    "areal-compute-logp-ref.log": [("cuda-oom", 3, 32, {"gpu": 0, "log_rank": 0})],
    "areal-ppo-update.log": [("cuda-oom", 2, 69, {"gpu": 1, "log_rank": 1})],
    "areal-sglang-engine-start.log": [
        ("cuda-oom", 9, 42, {"requested": m(594.00), "free": m(421.06),
                             "process_usage": f"3187:{g(78.76)}"}),
    ],
    "openrlhf-make-experience.log": [
        ("cuda-oom", 5, 52, {"others_count": 2, "others_bytes": g(47.07) + g(27.13), "chained": None}),
    ],
    "ray-oom-killer.log": [
        ("ray-oom", 3, 5, {"form": "summary", "node_ip": "10.0.0.12", "workers_killed": 1,
                           "used": None, "total": None}),
        ("ray-oom", 6, 27, {"form": "exception", "node_ip": "10.0.0.12", "used": g(61.02),
                            "total": g(62.80), "usage_fraction": 0.971693, "threshold": 0.95,
                            "task_name": "WorkerDict.actor_rollout_generate_sequences",
                            "task_pid": 5391, "task_memory": g(38.42), "others_count": 5,
                            "worker_id": "5c9ac30f8a9eda340f651a204de5d94f1ff965c5d9f72175579bd8dd",
                            "exc_type": "ray.exceptions.OutOfMemoryError"}),
    ],
    "torchrun-sigkill.log": [
        ("child-failed", 9, 40, {"rank": 2, "exitcode": -9, "signal": "SIGKILL", "error": None,
                                 "possible_host_oom": True}),
    ],
}


def test_every_oom_fixture_is_in_the_table():
    assert {p.name for p in OOM_LOGS.glob("*.log")} == set(FIXTURES)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_oom_fixture_events(name):
    check_fixture_events(name, run_cleaned(OOM_LOGS / name), FIXTURES[name])


def test_ray_oom_summary_and_text():
    summary, killed = run_cleaned(OOM_LOGS / "ray-oom-killer.log")
    assert summary.summary == "Ray OOM killer on node 10.0.0.12: 1 worker killed due to host memory pressure"
    assert killed.summary == ("Ray OOM killer on node 10.0.0.12: host memory 61.02 GiB of 62.80 GiB "
                              "(0.97 > threshold 0.95); killed "
                              "WorkerDict.actor_rollout_generate_sequences (pid 5391, 38.42 GiB)")
    lines = killed.text.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert any(line.startswith("Memory on the node (IP: 10.0.0.12") for line in lines)
    assert lines[-1].startswith("Refer to the documentation")
    assert f(killed)["process_usage"].split(",")[0] == f"5391:{g(38.42)}"


def test_a_torch_oom_inside_ray_task_error_stays_cuda_oom():
    (event,) = run_cleaned(LOGS / "event-oom-ray.log")
    assert event.kind == "cuda-oom"


# -- Ray's OOM killer: the formats ------------------------------------------------------------------
OLD_DETAIL = ("Memory on the node (IP: 172.17.0.2, ID: 3a4b60759256926fd0e84a9ff596dab3d7be854134107ef21b0e0260) "
              "where the task was running was 32.91GB / 33.28GB (0.988698), which exceeds the memory "
              "usage threshold of 0.969955. Ray killed this worker (ID: 5c9ac30f8a9eda340f651a204de5d94f1ff"
              "965c5d9f72175579bd8dd) because it was the most recently scheduled task; to see more "
              "information about memory usage on this node, use `ray logs raylet.out -ip 172.17.0.2`.")
LEASE_DETAIL = ("Memory on the node (IP: 192.168.1.103, ID: db89649fe40016559d1dd3384d3877a5614d60b8ea8b48068c6"
                "36e98) where the lease (lease ID: 010000002e3a77fe4c5945aab2ea7157805027c656e12b9617fb36a5d6"
                "ebfc6b, name=1HsG1ZWorkerDict_0:0:WorkerDict.__init__, pid=3048142, memory used=49.21GB) "
                "was running was 59.84GB / 62.51GB (0.957347), which exceeds the memory usage threshold "
                "of 0.95. Ray killed this worker (ID: a4f59754f807e8590f26ce1ef9d39dbdd4220c57ddf2e6fe3c16df99)"
                " because it was the most recently scheduled task; to see more information about memory "
                "usage on this node, use `ray logs raylet.out -ip 192.168.1.103`. Top 10 memory users:")
NEW_RAYLET = ("Task _map_task failed due to oom. There are infinite oom retries remaining, so the task "
              "will be retried. Error: 1 worker(s) were killed due to the node running low on memory. "
              "Memory on the node (IP: 10.0.50.112, ID: 4cb25bc084aeb5a31ca5402ad589ae042a71165a8e2dd8418fe"
              "cee26) was 28.62GB / 30.00GB (0.954017), which exceeds the memory usage threshold of "
              "0.950000; Object store memory usage: [- objects spillable: 0]")


@pytest.mark.parametrize("text, expected", [
    (OLD_DETAIL, {"form": "detail", "node_ip": "172.17.0.2", "used": g(32.91), "total": g(33.28),
                  "usage_fraction": 0.988698, "threshold": 0.969955, "task_name": None,
                  "task_pid": None, "worker_id": "5c9ac30f8a9eda340f651a204de5d94f1ff965c5d9f72175579bd8dd"}),
    (LEASE_DETAIL, {"node_ip": "192.168.1.103", "task_name": "1HsG1ZWorkerDict_0:0:WorkerDict.__init__",
                    "task_pid": 3048142, "task_memory": g(49.21), "used": g(59.84), "total": g(62.51)}),
    (NEW_RAYLET, {"form": "raylet-task", "task_name": "_map_task", "workers_killed": 1,
                  "used": g(28.62), "total": g(30.00), "threshold": 0.95, "node_ip": "10.0.50.112"}),
    (("[2023-05-27 13:36:07,742 W 114781 114781] (gcs_server) gcs_worker_manager.cc:55: Reporting "
      "worker exit, worker id = 1c42, node id = ffff, address = , exit_type = NODE_OUT_OF_MEMORY, "
      "exit_detail = Task was killed due to the node running low on memory."),
     {"form": "detail", "used": None}),
    (("ray.exceptions.OutOfMemoryError: 1 worker(s) were killed due to the node running low on "
      "memory. Memory on the node (IP: 10.83.10.20) was 957.55GB / 1006.84GB (0.951040), which "
      "exceeds the memory usage threshold of 0.950000"), {"form": "exception", "node_ip": "10.83.10.20", "node_id": None,
                                     "used": g(957.55), "total": g(1006.84), "workers_killed": 1}),
])
def test_parse_ray_oom_formats(text, expected):
    fields = dict(oom.parse_ray_oom(text))
    for key, value in expected.items():
        assert fields[key] == value, key


@pytest.mark.parametrize("text", [
    "", "Memory usage is fine", "CUDA out of memory. Tried to allocate 2.00 GiB",
    "Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/",
])
def test_parse_ray_oom_is_none_for_other_text(text):
    assert oom.parse_ray_oom(text) is None


WARNING = [
    ("2026-05-21 18:41:07,101\tWARNING worker.py:1839 -- A worker died or was killed while executing "
     "a task by an unexpected system error. To troubleshoot the problem, check the logs for the dead "
     "worker. RayTask ID: 8ce7275b7a7953cc794f8c138a616d91cb907c1b01000000 Worker ID: 5c9ac30f8a9eda340f"
     "651a204de5d94f1ff965c5d9f72175579bd8dd Node ID: 3a4b60 Worker IP address: 172.17.0.2 Worker "
     "port: 10003 Worker PID: 69161 Worker exit type: SYSTEM_ERROR Worker exit detail: Task was "
     "killed due to the node running low on memory."),
    OLD_DETAIL,
    ("Consider provisioning more memory on this node or reducing task parallelism by requesting more "
     "CPUs per task. To adjust the eviction threshold, set the environment variable "
     "`RAY_memory_usage_threshold_fraction` when starting Ray."),
]


def test_the_driver_warning_and_its_detail_are_one_event():
    got = run([*WARNING, "", "next unrelated line"])
    (event,) = got
    assert (event.kind, event.line_no, event.end_line) == ("ray-oom", 1, 3)
    assert f(event)["form"] == "worker-died" and f(event)["used"] == g(32.91)
    assert event.time is not None  # the ISO stamp of the warning line


def test_two_kills_in_a_row_are_two_events():
    got = run([*WARNING, *WARNING])
    assert [(e.kind, e.line_no, e.end_line) for e in got] == [("ray-oom", 1, 3), ("ray-oom", 4, 6)]


def test_raylet_lines_after_the_cleaner_join_with_blank_raylet_lines():
    lines = [
        ("(raylet) [2026-05-21 18:41:07,512 E 2871 2871] (raylet) node_manager.cc:3041: 2 Workers "
         "(tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other "
         "reasons at node (ID: 9c3e, IP: 10.0.0.12) over the last time period."),
        "(raylet) ",
        "(raylet) Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/",
        "(TaskRunner pid=5120) Training Progress:   2%|",
    ]
    for feed in ("raw", "cleaned"):
        reader = EventReader()
        out = []
        for i, raw in enumerate(lines, 1):
            if feed == "raw":
                out += reader.feed(raw, i, 0.0)
            else:
                c = strip_noise(raw)
                out += reader.feed(c.text, i, 0.0, (c.rank, c.actor))
        out += reader.flush()
        (event,) = out
        assert (event.line_no, event.end_line) == (1, 3), feed
        assert f(event)["workers_killed"] == 2 and f(event)["node_ip"] == "10.0.0.12"
        assert event.summary == "Ray OOM killer on node 10.0.0.12: 2 workers killed due to host memory pressure"


def test_a_report_whose_writer_goes_quiet_is_closed_by_others():
    reader = EventReader()
    out = reader.feed(WARNING[0], 1, 0.0, source="driver")
    for i in range(2, NCCL_WINDOW + 40):
        out += reader.feed(f"other writer line {i}", i, 0.0, source="other")
    assert [e.kind for e in out] == ["ray-oom"]
    assert reader.flush() == []


def test_an_actor_died_error_carrying_the_oom_detail_is_ray_oom():
    lines = [
        "Traceback (most recent call last):",
        '  File "/workspace/verl/verl/trainer/ppo/ray_trainer.py", line 1160, in init_workers',
        "    self.actor_rollout_wg.init_model()",
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
        "\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict",
        "\tpid: 3048142",
        ("The actor is dead because its worker process has died. Worker exit type: NODE_OUT_OF_MEMORY "
         "Worker exit detail: Task was killed due to the node running low on memory."),
        LEASE_DETAIL,
        "PID\tMEM(GB)\tCOMMAND",
        "3048142\t49.21\tray::WorkerDict.actor_rollout_ref_init_model",
        "3047524\t0.86\tray::TaskRunner.run",
        "after",
    ]
    (event,) = run(lines)
    assert (event.kind, event.line_no, event.end_line) == ("ray-oom", 1, 11)
    fields = f(event)
    assert fields["exc_type"] == "ray.exceptions.ActorDiedError" and fields["form"] == "exception"
    assert fields["process_usage"] == f"3048142:{g(49.21)},3047524:{g(0.86)}"


def test_a_plain_traceback_is_not_taken_for_ray_oom():
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>',
             "ray.exceptions.RayTaskError: boom", "Memory usage is fine"]
    assert [e.kind for e in run(lines)] == ["traceback"]


def test_endless_ray_detail_lines_stay_bounded():
    reader = EventReader()
    reader.feed(WARNING[0], 1, 0.0)
    for i in range(2, 5000):
        reader.feed(OLD_DETAIL, i, 0.0)
    assert reader.pending_chars < 100_000
    (event,) = reader.flush()
    assert event.end_line == 4999 and len(event.text.splitlines()) <= 40


# -- torchrun: SIGKILL without a Python error -------------------------------------------------------
def _child(name: str) -> list[str]:
    """The ChildFailedError report of a fixture, from its exception line on."""
    lines = (LOGS / name).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if "ChildFailedError:" in line)
    return lines[start:]


def test_sigkill_without_error_is_a_possible_host_oom():
    (event,) = run(_child("event-child-failed-sigkill.log"))
    assert f(event)["possible_host_oom"] is True
    assert event.summary.endswith("possible host OOM: check dmesg / the kernel's OOM killer")
    assert distfail.HOST_OOM_HINT in event.summary


def test_a_python_error_is_not_a_host_oom():
    events = run_cleaned(LOGS / "event-child-failed-python.log")
    child = next(e for e in events if e.kind == "child-failed")
    assert f(child)["possible_host_oom"] is False and "host OOM" not in child.summary


def test_exit_code_137_from_a_shell_wrapper_counts_too():
    lines = [line.replace("-9 (pid: 208585)", "137 (pid: 208585)")
             .replace("Signal 9 (SIGKILL) received by PID 208585",
                      "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
             for line in _child("event-child-failed-sigkill.log")]
    (event,) = run(lines)
    assert f(event)["exitcode"] == 137 and f(event)["signal"] is None
    assert f(event)["possible_host_oom"] is True


def test_sigterm_is_not_a_host_oom():
    lines = [line.replace("-9 (pid", "-15 (pid").replace("Signal 9 (SIGKILL)", "Signal 15 (SIGTERM)")
             for line in _child("event-child-failed-sigkill.log")]
    (event,) = run(lines)
    assert f(event)["signal"] == "SIGTERM" and f(event)["possible_host_oom"] is False


# -- numbers_from_event -----------------------------------------------------------------------------
def _event(name, kind=None):
    events = run_cleaned(OOM_LOGS / name) if (OOM_LOGS / name).exists() else run_cleaned(LOGS / name)
    return [e for e in events if kind is None or e.kind == kind][-1]


def test_numbers_of_the_2828_oom():
    n = numbers_from_event(_event("verl-2828-entropy.log"))
    assert (n.kind, n.gpu, n.requested, n.capacity, n.free, n.allocated, n.reserved_unallocated) == (
        "cuda-oom", 0, g(13.91), g(79.11), g(8.85), g(60.49), g(6.77))
    assert n.others == ((23444, g(70.25)),) and n.this_process is None
    assert n.text.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 13.91 GiB.")
    assert dict(n.detail)["format"] == "current"


def test_numbers_of_this_process_and_two_others():
    gen = numbers_from_event(_event("verl-generation-vllm.log"))
    assert gen.this_process == g(73.11) and gen.others == ()
    two = numbers_from_event(_event("openrlhf-make-experience.log"))
    assert two.others == ((31655, g(47.07)), (31902, g(27.13)))


def test_numbers_of_the_old_format_derive_reserved_but_unallocated():
    n = numbers_from_event(_event("event-oom-old.log"))
    detail = dict(n.detail)
    assert n.reserved_unallocated == detail["reserved_total"] - n.allocated
    assert n.free is not None and n.capacity is not None


def test_numbers_of_a_cut_message_are_partial():
    n = numbers_from_event(_event("verl-oom-cut.log"))
    assert (n.gpu, n.requested, n.capacity) == (5, g(3.71), g(79.10))
    assert n.free is None and n.allocated is None and n.reserved_unallocated is None


def test_numbers_of_engine_errors():
    vllm = numbers_from_event(_event("event-vllm-free-memory.log", "engine-oom"))
    assert (vllm.kind, vllm.engine, vllm.gpu, vllm.free, vllm.capacity, vllm.requested) == (
        "engine-oom", "vllm", 0, g(12.18), g(23.56), g(21.67))
    assert dict(vllm.detail)["reason"] == "free-memory-at-start"
    assert vllm.text.startswith("ValueError: Free memory on device cuda:0")
    sglang = numbers_from_event(_event("event-sglang-start.log", "engine-oom"))
    assert sglang.engine == "sglang" and sglang.requested is None and sglang.gpu is None


def test_numbers_of_the_ray_oom_killer():
    n = numbers_from_event(_event("ray-oom-killer.log"))
    assert (n.kind, n.gpu, n.capacity, n.free, n.this_process) == (
        "ray-oom", None, g(62.80), g(62.80) - g(61.02), g(38.42))
    assert n.others[0] == (5391, g(38.42)) and len(n.others) == 5
    assert dict(n.detail)["threshold"] == 0.95 and dict(n.detail)["used"] == g(61.02)
    assert "running low on memory" in n.text and "Memory on the node" in n.text


def test_numbers_of_a_host_oom():
    n = numbers_from_event(_event("torchrun-sigkill.log"))
    assert n.kind == "host-oom" and n.requested is None and n.capacity is None
    detail = dict(n.detail)
    assert (detail["rank"], detail["pid"], detail["signal"]) == (2, 208583, "SIGKILL")
    assert "possible host OOM" in n.text


def test_numbers_of_anything_else_do_not_raise():
    event = LogEvent(kind="traceback", line_no=1, end_line=2, arrival=0.0, summary="KeyError: 'x'",
                     fields=(("exc_type", "KeyError"),))
    n = numbers_from_event(event)
    assert n.kind == "traceback" and n.requested is None and dict(n.detail)["exc_type"] == "KeyError"
    bare = numbers_from_event(LogEvent(kind="cuda-oom", line_no=1, end_line=1, arrival=0.0, summary=""))
    assert bare.kind == "cuda-oom" and bare.gpu is None and bare.others == ()


@pytest.mark.parametrize("value, expected", [
    ("1:2,3:4", ((1, 2), (3, 4))), ("", ()), (None, ()), ("x:1,2:y,5:6", ((5, 6),)), (12, ()),
])
def test_parse_usage(value, expected):
    assert parse_usage(value) == expected


# -- robustness -------------------------------------------------------------------------------------
RAY_LINES = WARNING + [LEASE_DETAIL, NEW_RAYLET, "PID\tMEM(GB)\tCOMMAND", "5391\t38.42\tray::X.y", "(raylet) "]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.text(max_size=200), st.sampled_from(RAY_LINES)), max_size=60),
       st.sampled_from([None, 0, ("x", None)]))
def test_ray_lines_in_any_order_never_crash(lines, source):
    reader = EventReader()
    got = []
    for i, line in enumerate(lines, 1):
        got += reader.feed(line, i, float(i), source)
    got += reader.flush()
    for event in got:
        assert 1 <= event.line_no <= event.end_line <= max(len(lines), 1)
        assert len(event.summary) <= 300
        numbers_from_event(event)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000))
def test_ray_parser_is_total(text):
    fields = oom.parse_ray_oom(text)
    if fields is not None:
        oom.ray_oom_summary(dict(fields))


# -- a gap found on the way (not in these modules) --------------------------------------------------
def test_torch_rank_prefix_with_a_space():
    lines = (OOM_LOGS / "areal-ppo-update.log").read_text(encoding="utf-8").splitlines()
    spaced = [line.replace("[rank1]:", "[rank1]: ", 1) for line in lines]
    reader = EventReader()
    out = []
    for i, raw in enumerate(spaced, 1):
        c = strip_noise(raw)
        out += reader.feed(c.text, i, 0.0, (c.rank, c.actor))
    out += reader.flush()
    assert [e.kind for e in out] == ["cuda-oom"]
