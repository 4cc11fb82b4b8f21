"""Real error excerpts from public issue threads (fixtures/real/errors/, sources in SOURCES.md).

Each file is read the way rltui reads a log: every line cleaned by strip_noise, then fed to one
EventReader with the cleaner's (rank, actor) as the writer. expected.toml lists the events each
file must give.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rltui.parsing import distfail, elastic_error, oom
from rltui.parsing.events import EventReader
from rltui.parsing.noise import strip_noise
from tests.compat import tomllib

ERRORS = Path(__file__).resolve().parents[2] / "fixtures" / "real" / "errors"
EXPECTED = tomllib.loads((ERRORS / "expected.toml").read_text(encoding="utf-8"))


def read_log(path: Path) -> list:
    reader = EventReader()
    events = []
    # Split on "\n" only: a tqdm "\r" inside a line is part of what the reader must handle.
    for i, raw in enumerate(path.read_text(encoding="utf-8").split("\n")[:-1], 1):
        cleaned = strip_noise(raw)
        events += reader.feed(cleaned.text, i, 1000.0 + i, (cleaned.rank, cleaned.actor))
    events += reader.flush()
    return sorted(events, key=lambda e: e.line_no)


def read(name: str) -> list:
    path = ERRORS / name
    if EXPECTED[name]["reader"] == "elastic_error":
        event = elastic_error.error_file_event(path.read_text(encoding="utf-8"))
        return [event] if event else []
    return read_log(path)


def test_every_file_has_expectations_and_a_source():
    files = sorted(p.name for p in ERRORS.iterdir() if p.suffix in (".log", ".json"))
    assert files == sorted(EXPECTED), "expected.toml and the folder disagree"
    sources = (ERRORS / "SOURCES.md").read_text(encoding="utf-8")
    assert [f for f in files if f"`{f}`" not in sources] == []
    assert len(files) >= 40


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_error(name):
    want = EXPECTED[name]["events"]
    got = read(name)
    assert [(e.kind, e.line_no, e.end_line) for e in got] == \
        [(w["kind"], w["line_no"], w["end_line"]) for w in want]
    for event, row in zip(got, want):
        for key, value in row.items():
            if key in ("kind", "line_no", "end_line"):
                continue
            if key == "absent":
                assert {k: event.field(k) for k in value} == dict.fromkeys(value), name
                continue
            assert event.field(key) == value, (name, event.line_no, key)
        assert event.summary and len(event.summary) <= 300
        numbers = [v for k, v in event.fields if k in ("rank", "seq", "timeout_ms", "requested", "pid",
                                                       "exitcode", "gpu", "stuck_s") and v is not None]
        assert all(isinstance(v, int) and not isinstance(v, bool) for v in numbers)


def test_oom_kinds_feed_the_oom_triage():
    """Every OOM the corpus holds reaches the triage's kinds with its numbers as ints."""
    from rltui.diagnosis.oom.numbers import numbers_from_event

    seen = set()
    for name in EXPECTED:
        for event in read(name):
            if event.kind in ("cuda-oom", "engine-oom", "ray-oom"):
                numbers = numbers_from_event(event)
                seen.add(event.kind)
                assert numbers.kind == event.kind
                for value in (numbers.requested, numbers.capacity, numbers.free):
                    assert value is None or isinstance(value, int)
    assert seen == {"cuda-oom", "engine-oom", "ray-oom"}


# -- bad input stays a message ----------------------------------------------------------------------
BAD = [
    "",
    "\x00\x01\x02",
    "[Rank ] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=, OpType=, Timeout(ms)=x)",
    "Watchdog caught collective operation timeout: WorkNCCL(" + "(" * 5000,
    "[PG ID x PG GUID y Rank z]  failure detected by watchdog at work sequence id: ",
    "failed (exitcode: -) local_rank: (pid: ) of binary:",
    "failed (exitcode: -99999999999999999999) local_rank: 0 (pid: 1) of binary: x",
    "memory allocation failed with OOM on device x while trying to allocate y bytes (free: , total: )",
    "memory allocation failed with OOM on device 0 while trying to allocate 99999999999999999999999 bytes",
    "ray.exceptions.RayTaskError(OutOfMemoryError): ray::",
    "RuntimeError: Prefill out of memory. Try to lower your batch size.",
    "Try to allocate tokens.",
    "[PG 0 Rank 1] Heartbeat monitor timed out! workMetaList_.size()=",
    "ProcessGroupNCCL's watchdog got stuck for -5 seconds",
    "killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at ",
    "  what():  [PG 3 Rank 5] Process group watchdog thread terminated with exception: "
    "[Rank 5] Watchdog caught colle",
    "ctive",
    "(exitcode: 1",
]


def test_bad_lines_never_crash_and_events_stay_well_formed():
    reader = EventReader()
    events = []
    for i, line in enumerate(BAD * 3, 1):
        events += reader.feed(strip_noise(line).text, i, float(i), (None, None))
    events += reader.flush()
    for event in events:
        assert event.kind and event.line_no <= event.end_line and len(event.summary) <= 300


def test_parsers_return_none_for_text_that_is_not_theirs():
    for text in ("", "hello", "x" * 1000, "{}", "[1, 2]", '{"message": 3}', "{not json"):
        assert distfail.parse_heartbeat(text) is None
        assert distfail.parse_agent_failure(text) is None
        assert oom.parse_alloc_warning(text) is None
        assert oom.parse_ray_task_oom(text) is None
        assert elastic_error.parse_error_file(text) is None


def test_a_wrapped_message_that_never_completes_is_read_as_it_is():
    lines = ["[rank3]:[E0 1] [Rank 3] Watchdog caught collective operation timeout: ",
             "WorkNCCL(SeqNum=4, OpType=BROADCAST,", "NumelIn=112,", "NumelOut=112,", "Timeout(ms)=60",
             "more", "and more", "[rank3]:[E0 1] something else"]
    reader = EventReader()
    events = [e for i, t in enumerate(lines, 1) for e in reader.feed(strip_noise(t).text, i, 0.0)]
    events += reader.flush()
    (event,) = events
    assert event.kind == "nccl-timeout" and event.field("seq") == 4 and event.line_no == 1
    assert reader.pending_chars == 0


def test_agent_line_alone_after_quiet_lines_is_a_child_failed_event():
    lines = ["ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 2 "
             "(pid: 77) of binary: /usr/bin/python3"] + ["step 1 loss 0.5"] * 80
    reader = EventReader()
    events = [e for i, t in enumerate(lines, 1) for e in reader.feed(t, i, 0.0)] + reader.flush()
    (event,) = events
    assert event.kind == "child-failed" and event.field("local_rank") == 2
    assert event.field("possible_host_oom") is True and event.field("signal") == "SIGKILL"


def test_allocator_warning_repeats_are_one_event_per_gpu():
    line = ("[rank1]:[W812 16:00:28.643448608 CUDACachingAllocator.cpp:3933] memory allocation failed "
            "with OOM on device {} while trying to allocate 20971520 bytes "
            "(free: 15794176, total: 150111977472).")
    reader = EventReader()
    lines = [line.format(1)] * 1000 + [line.format(0)]
    events = [e for i, t in enumerate(lines, 1) for e in reader.feed(strip_noise(t).text, i, 0.0)]
    assert [(e.field("gpu"), e.line_no) for e in events] == [(1, 1), (1, 501), (0, 1001)]


# -- long lines stay fast -------------------------------------------------------------------------
LONG = [
    "x" * 1_000_000,
    "9" * 40_000,
    "Watchdog caught collective operation timeout: WorkNCCL(" + "SeqNum=1, " * 4000,
    "failed (exitcode: " + "9" * 40_000,
    "memory allocation failed with OOM on device " + "1" * 40_000,
    "ray.exceptions.RayTaskError(OutOfMemoryError): ray::" + "a" * 40_000,
    "RuntimeError: Prefill out of memory. " + "Try to allocate " * 3000,
    "[PG " * 10_000 + "Heartbeat monitor timed out!",
    "(either an error or timeout) detected" + " " * 40_000,
    "killed due to memory pressure (OOM)" + "9" * 40_000,
]


@pytest.mark.parametrize("line", LONG, ids=range(len(LONG)))
def test_long_lines_stay_fast(line):
    reader = EventReader()
    start = time.process_time()
    for i in range(3):
        reader.feed(line, i + 1, 0.0, (None, None))
    reader.flush()
    for parse in (distfail.parse_watchdog, distfail.parse_heartbeat, distfail.parse_agent_failure,
                  distfail.parse_companion, oom.parse_alloc_warning, oom.parse_ray_task_oom,
                  oom.parse_engine_oom, oom.parse_cuda_oom, elastic_error.parse_error_file):
        parse(line)
    assert time.process_time() - start < 1.0
