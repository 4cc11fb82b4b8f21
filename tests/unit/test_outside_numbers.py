"""Numbers from outside are bounded (docs/cli.md, docs/configuration.md, docs/logs.md): a
number past its bound is no value or a one-line error, never a crash of Python's int() digit
limit, an infinity, or a duration that never ends."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from rltui import config
from rltui.cli import common
from rltui.parsing import distfail, oom
from rltui.parsing.events import EventReader
from rltui.remote import hostlist
from rltui.sources import replay

BIG = "1" * 4301  # one past Python's default limit on int() digits


def test_a_rank_prefix_past_the_digit_limit_keeps_the_poll():
    reader = EventReader()
    events = []
    lines = [f"[rank{BIG}]: hello", "[rank0]:torch.OutOfMemoryError: CUDA out of memory. Tried to "
             "allocate 2.00 GiB"]
    for number, line in enumerate(lines, 1):
        events += reader.feed(line, number, 0.0)
    events += reader.flush()
    assert [e.kind for e in events] == ["cuda-oom"]  # the next line of the poll is still read


@pytest.mark.parametrize("text", [
    f"CUDA out of memory. Tried to allocate {BIG} GiB. GPU 0 has a total capacity of 1 GiB",
    f"CUDA out of memory. Tried to allocate 1 GiB. GPU {BIG} has a total capacity of 1 GiB",
    f"CUDA out of memory. Tried to allocate {'9' * 400}.5 GiB (GPU 0; 1 GiB total capacity",
])
def test_cuda_oom_numbers_are_bounded(text):
    fields = dict(oom.parse_cuda_oom(text))
    assert fields["requested"] is None or fields["requested"] < 1 << 80
    assert fields.get("gpu") in (None, 0)


def test_watchdog_and_agent_numbers_are_bounded():
    fields = dict(distfail.parse_watchdog(
        f"[Rank {BIG}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={BIG}, "
        "OpType=ALLREDUCE) ran for 5 milliseconds"))
    assert fields["rank"] is None and fields["seq"] is None and fields["ran_for_ms"] == 5
    assert distfail.parse_agent_failure(f"failed (exitcode: {BIG}) local_rank: 0 (pid: 1)") is None


def test_hostlist_numbers_are_bounded():
    with pytest.raises(hostlist.HostlistError, match="more than 18 digits"):
        hostlist.expand(f"n[{BIG}]")
    assert hostlist.compress([f"n{BIG}", "n1", "n2"]) == f"n1,n2,n{BIG}"


@pytest.mark.parametrize("text, problem", [
    (f"history: {BIG}\n", "expected a int"),
    ("pyspy:\n  max_concurrent: 9999999999999999999\n", "too large"),
    ("pyspy:\n  timeout: .nan\n", "finite"),
    ("a: " + "[" * 5000 + "\n", "nested too deeply"),
])
def test_config_numbers_and_depth(text, problem):
    with pytest.raises(config.ConfigError, match=problem):
        config.parse(text)


def test_a_config_file_over_the_size_cap(tmp_path: Path):
    path = tmp_path / "config.yaml"
    path.write_text("# comment\n" * (config.MAX_CONFIG_BYTES // 10 + 1))
    with pytest.raises(config.ConfigError, match="holds at most"):
        config.load(path)


def test_replay_time_stamps_must_be_times(tmp_path: Path):
    (tmp_path / replay.META_FILE).write_text(json.dumps(
        {"schema_version": replay.SCHEMA_VERSION, "sources": {"gpus": {"interval": 1e300},
                                                               "procs": {"interval": 2}}}))
    lines = [{"source": "gpus", "timestamp": t, "status": "ok"} for t in (1e300, -1, 1.7e9)]
    (tmp_path / replay.READINGS_FILE).write_text("\n".join(map(json.dumps, lines)) + "\n"
                                                 + '{"source": "gpus", "timestamp": NaN}\n')
    scenario = replay.load(tmp_path)
    assert [r.timestamp for r in scenario.readings] == [1.7e9]
    assert "skipped 3 bad line(s)" in scenario.warnings[0]
    assert scenario.intervals() == {"procs": 2.0}


@pytest.mark.parametrize("text", ["nan", "inf", "-1", "1e300", BIG, "99999-01-01"])
def test_now_must_be_a_time(text):
    with pytest.raises(common.UsageError, match="--now"):
        common.parse_now(text)


@pytest.mark.parametrize("values, flag", [
    ({"duration": float("nan")}, "--duration"), ({"duration": float("inf")}, "--duration"),
    ({"duration": 1e300}, "--duration"), ({"speed": float("nan")}, "--speed"),
    ({"heartbeat": float("nan")}, "--heartbeat"), ({"pid": [10**30]}, "--pid"),
    ({"pid": [0]}, "--pid"), ({"connect_timeout": 10**12}, "--connect-timeout"),
])
def test_command_line_numbers_are_bounded(values, flag):
    with pytest.raises(common.UsageError, match=flag):
        common.check_numbers(argparse.Namespace(**values))


def test_ordinary_command_line_numbers_pass():
    common.check_numbers(argparse.Namespace(duration=5.0, speed=2.0, heartbeat=1.0, pid=[1, 4242],
                                            connect_timeout=10))


def test_a_job_config_with_a_5000_digit_integer_is_a_problem_not_a_crash():
    from rltui.parsing import jobconfig
    values, problems = jobconfig.parse_yaml_config(f"trainer:\n  seed: {BIG}\n", "job.yaml")
    assert values == {} and "too long" in problems[0]
