"""Every parser of outside text is total and fast on any input (docs/reliability.md).

Totality: a parser returns a value, or raises the one error it documents (DumpParseError,
HostlistError, ConfigError, ScenarioError), for any text: never IndexError, RecursionError,
OverflowError or the ValueError of Python's limit on integer digits. Speed: each input costs
a bounded amount of this process's CPU time (time.process_time, not the wall clock: other work
shares the machine), with a margin of many times what a linear parser needs.

The inputs are a real line of each kind with one of its tokens replaced by a long run (a
collapsed RL sample, a hex dump, a 5000-digit number) or random text. Hypothesis runs a bounded
number of examples here; RLTUI_FUZZ_LONG=1 raises it and adds 1 MB and 10 MB lines, for a
benchmark run.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rltui import config
from rltui.parsing import distfail, elastic_error, jobconfig, noise, oom, pyspy, stacktext, steps
from rltui.parsing.events import EventReader
from rltui.remote import hostlist
from rltui.sources import replay

LONG = os.environ.get("RLTUI_FUZZ_LONG") == "1"
EXAMPLES = 2000 if LONG else 60
# Seconds of CPU per input: a linear parser needs milliseconds for the largest input here; the
# quadratic regexes this guards against took seconds (a 16 KB digit run: 2.2 s).
CPU_BOUND = 2.0

# Real lines of each kind the parsers read.
LINES = [
    "[rank0]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 79.10 GiB of which 1.50 GiB is free. Process 1234 has 77.60 GiB memory in "
    "use. 3.00 GiB allowed; Of the allocated memory 70.00 GiB is allocated by PyTorch, and 5.00 GiB "
    "is reserved by PyTorch but unallocated.",
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.92 GiB total "
    "capacity; 9.88 GiB already allocated; 5.06 MiB free; 10.00 GiB reserved in total by PyTorch)",
    "memory allocation failed with OOM on device 1 while trying to allocate 20971520 bytes "
    "(free: 15794176, total: 150111977472).",
    "(raylet) Memory on the node (IP: 10.0.0.7, ID: abc123) where the task (task ID: ff, name=Rollout"
    ".gen, pid=4242, memory used=12.5GB) was running was 120.1GB / 125.0GB (0.96), which exceeds the "
    "memory usage threshold of 0.95. Ray killed this worker (ID: deadbeef) 3 Workers (tasks / "
    "actors) killed due to memory pressure (OOM)",
    "[rank3]:[E ProcessGroupNCCL.cpp:563] [Rank 3] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=4821, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000)"
    " ran for 600123 milliseconds before timing out.",
    "[PG ID 0 PG GUID 0(default_pg) Rank 2] Exception (either an error or timeout) detected by "
    "watchdog at work: 4821, last enqueued NCCL work: 4821, last completed NCCL work: 4820.",
    "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 3 "
    "(pid: 81234) of binary: /usr/bin/python",
    "Traceback (most recent call last):",
    '  File "/opt/verl/trainer/main_ppo.py", line 312, in fit',
    "ValueError: bad shape (3, 4)",
    "step:12 - actor/pg_loss:0.0123 - critic/score/mean:0.55 - timing_s/step:41.2",
    "[titan] 2026-03-01 12:00:00,000 - root - INFO - step:  5  loss:  7.1234  memory: 30.99GiB",
    "{'loss': 0.5, 'grad_norm': 1.2, 'learning_rate': 1e-05, 'epoch': 0.01}",
    " iteration       10/    1000 | consumed samples: 640 | lm loss: 7.200E+00 |",
    "Thread 4242 (active): \"MainThread\"",
    "    all_reduce (torch/distributed/distributed_c10d.py:2050)",
    "Process 4242: python -m verl.trainer.main_ppo",
    'File "/opt/verl/workers/fsdp_workers.py", line 88 in generate_sequences',
    "(WorkerDict pid=2314, ip=10.0.0.7) [repeated 7x across cluster]",
    "2026-03-01T12:00:00.123456Z [rank12345]: hello",
    "[rank3]:Traceback (most recent call last):",
    "(TaskRunner pid=1234, ip=10.0.0.7) [default0]:[rank0]: torch.OutOfMemoryError: CUDA out of "
    "memory. Tried to allocate 2.00 GiB",
    "Try to allocate 8192 tokens. Available full tokens: 8070656 available_size()=1, num_reqs=2",
    "ValueError: To serve at least one request with the model's max seq len (32768), (16.00 GiB KV "
    "cache is needed, which is larger than the available KV cache memory (4.85 GiB). Based on the "
    "available memory, the estimated maximum model length is 9936.",
]
_TOKEN = re.compile(r"\d+|[A-Za-z_]+|\s+|[^\w\s]")
RUNS = ["a", "1", " ", "_", "x.", "1.", "-", "[", "(", "=", ":", "a=1,", "\t", "\\", '"', "{"]


@st.composite
def outside_lines(draw) -> str:
    """A real line with one token replaced by a long run, or random text."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.text(max_size=400))
    line = draw(st.sampled_from(LINES))
    tokens = list(_TOKEN.finditer(line))
    token = tokens[draw(st.integers(0, len(tokens) - 1))]
    # the token's own kind of character (a size's digits become 5000 digits) or another run
    run = token.group()[0] if draw(st.booleans()) else draw(st.sampled_from(RUNS))
    n = draw(st.sampled_from([100, 5000, 20000] + ([200_000] if LONG else [])))
    return line[:token.start()] + run * (n // len(run)) + line[token.end():]


def _events(text: str):
    reader = EventReader(completion_patterns=[r"done (?P<n>\d+)/(?P<m>\d+)"])
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        out += reader.feed(line, number, 0.0)
    return out + reader.flush()


def _steps(text: str):
    custom = steps.compile_custom("mine", r"(?P<step>\d+)/(?P<total>\d+) loss=(?P<l>[-0-9.e]+)",
                                  {"l": "loss"})
    reader = steps.StepReader("auto", custom=[custom])
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        out += reader.feed(noise.strip_noise(line).text, number, 0.0)
    return out + reader.flush() + steps.scan_steps(text, "auto", 1, 0.0)


def _hostlist(text: str):
    try:
        names = hostlist.expand(text[:2000], limit=10_000)
    except hostlist.HostlistError:
        names = []
    hostlist.compress(names + text.split())
    return hostlist.parse_hostfile(text)


PARSERS = {
    "py-spy text and JSON": pyspy.parse_any,
    "faulthandler and other stack text": stacktext.read,
    "step lines": _steps,
    "events": _events,
    "CUDA OOM": oom.parse_cuda_oom,
    "allocator warning": oom.parse_alloc_warning,
    "Ray OOM": oom.parse_ray_oom,
    "engine OOM": oom.parse_engine_oom,
    "NCCL watchdog": distfail.parse_watchdog,
    "elastic agent": distfail.parse_agent_failure,
    "torchrun error file": elastic_error.parse_error_file,
    "job config YAML": lambda t: jobconfig.parse_yaml_config(t, "fuzz.yaml"),
    "job config overrides": lambda t: jobconfig.parse_overrides(t.split(" ")),
    "rltui config": config.parse,
    "hostlists": _hostlist,
}
# The errors each parser documents; anything else is a crash.
ALLOWED = (pyspy.DumpParseError, hostlist.HostlistError, config.ConfigError)


def _run_bounded(name: str, text: str) -> float:
    start = time.process_time()
    try:
        PARSERS[name](text)
    except ALLOWED:
        pass
    return time.process_time() - start


@pytest.mark.parametrize("name", list(PARSERS))
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=outside_lines())
def test_every_parser_is_total_and_bounded(name, text):
    spent = _run_bounded(name, text)
    assert spent < CPU_BOUND, f"{name}: {spent:.2f} s of CPU on a {len(text)}-char input"


@pytest.mark.parametrize("line", LINES, ids=lambda line: line[:30])
def test_every_number_of_every_line_may_have_5000_digits(line):
    """Each number of each real line in turn as 5000 digits (past Python's 4300-digit limit
    for int()), through every parser but the YAML ones (the fuzz above covers those): a value,
    never a crash, and still linear (each number's search tries at most a few digits)."""
    for m in re.finditer(r"\d+", line):
        text = line[:m.start()] + "7" * 5000 + line[m.end():]
        for name in PARSERS:
            if "YAML" not in name and name != "rltui config":
                assert _run_bounded(name, text) < CPU_BOUND, (name, line[:40])


HUGE = [1 << 20] + ([10 << 20] if LONG else [])


@pytest.mark.parametrize("size", HUGE)
@pytest.mark.parametrize("run", ["a", "1", " ", "x."])
@pytest.mark.parametrize("name", list(PARSERS))
def test_a_huge_line_costs_little(name, run, size):
    text = "step:1 - " + run * (size // len(run))
    # 1 MB in well under CPU_BOUND for each (most parsers cut a line long before this);
    # 10 MB (the long mode) in ten times that.
    assert _run_bounded(name, text) < CPU_BOUND * size / (1 << 20)


# -- nesting ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("opener", ["[", "{\"a\": ", "a: [", "- "])
def test_deep_nesting_is_an_error_not_a_recursion_error(opener):
    text = opener * 50_000
    with pytest.raises(config.ConfigError, match="nested too deeply|not valid YAML"):
        config.parse(text)
    values, problems = jobconfig.parse_yaml_config(text, "deep.yaml")  # its own error channel
    assert values == {} or problems


def test_a_scenario_nested_too_deeply_is_a_message(tmp_path: Path):
    (tmp_path / "meta.json").write_text("[" * 100_000)
    (tmp_path / replay.META_FILE).write_text("[" * 100_000)
    with pytest.raises(replay.ScenarioError, match="nested too deeply"):
        replay.load(tmp_path)
    (tmp_path / replay.META_FILE).write_text(json.dumps({"schema_version": replay.SCHEMA_VERSION}))
    good = {"source": "gpus", "timestamp": 1.0e9, "status": "ok"}
    (tmp_path / replay.READINGS_FILE).write_text("[" * 100_000 + "\n" + json.dumps(good) + "\n")
    scenario = replay.load(tmp_path)
    assert len(scenario.readings) == 1
    assert "nested too deeply" in scenario.warnings[0]


@settings(max_examples=EXAMPLES, deadline=None)
@given(lines=st.lists(st.one_of(st.text(max_size=200), st.sampled_from(
    ['{"source": "gpus", "timestamp": 1e300}', '{"source": "gpus", "timestamp": NaN}',
     '{"source": "gpus", "timestamp": 1700000000.5, "status": "ok"}', "[" * 5000,
     '{"source": "gpus", "timestamp": ' + "9" * 5000 + "}"])), max_size=8))
def test_scenario_folders_are_total(tmp_path_factory, lines):
    folder = tmp_path_factory.mktemp("scenario")
    (folder / replay.META_FILE).write_text(json.dumps({"schema_version": replay.SCHEMA_VERSION}))
    (folder / replay.READINGS_FILE).write_text("\n".join(lines) + "\n")
    try:
        scenario = replay.load(folder)
    except replay.ScenarioError:
        return
    for reading in scenario.readings:
        assert 0 <= reading.timestamp <= replay.MAX_TIME
