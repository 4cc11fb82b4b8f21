"""Cost of decoding readings: recordings (``rltui.serialize.reading_from_json``) and node agents'
lines (``rltui.agent.protocol.decode``).

A view of many nodes decodes every reading every node agent sends: with 64 nodes x 8 ranks the
decoding was most of the reader threads' CPU. The readings here are the recorded ones of a real
demo run (gpus, procs, logs and stacks readings, 110 lines). What is timed:

- ``decode_lines``: each line to a ``Reading``, in one pass from its bytes (msgspec), as replay
  reads a recording;
- ``decode_data``: the same from data already parsed (``reading_from_data``);
- ``agent_lines``: the same readings as an agent's lines, through ``protocol.decode``;
- ``json_loads``: parsing the lines alone with ``json.loads``, the floor of any decoder that
  parses first;
- ``encode``: the readings back to JSON data (``reading_to_data``, what ``rltui record`` and
  every agent write).

The numbers before msgspec come from the module as it was: point
``RLTUI_BENCH_SERIALIZE_BASELINE`` at a copy of that version of ``rltui/serialize.py`` and the
same run also times ``baseline_lines`` (``json.loads`` then its ``reading_from_data``, what
replay did) ``baseline_data`` (its decoding alone) and ``baseline_encode``, checking that it decodes every reading
to values equal to this version's, and encodes them to the same JSON. Nothing asserts a timing. Run:
``git show efba18f:rltui/serialize.py > old_serialize.py``
``RLTUI_BENCH_SERIALIZE_BASELINE=old_serialize.py python -m pytest
tests/benchmarks/test_serialize_speed.py --benchmark-only``
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from rltui.agent import protocol
from rltui.serialize import reading_from_data, reading_from_json, reading_to_data, to_data

SCENARIO = Path(__file__).parents[2] / "fixtures" / "scenarios" / "demo-cleanup-deadlock"
LINES = [line for line in (SCENARIO / "readings.jsonl").read_bytes().splitlines() if line]
DATA = [json.loads(line) for line in LINES]
AGENT_LINES = [protocol.encode(protocol.ReadingMessage("node01", 1.0, reading_from_data(d)))
               for d in DATA]
BASELINE = os.environ.get("RLTUI_BENCH_SERIALIZE_BASELINE", "")


def _decode_all(decode, items):
    return [decode(item) for item in items]


def _loads_then(decode, lines):
    return [decode(json.loads(line)) for line in lines]


def _check(readings):
    assert len(readings) == len(DATA)
    assert {r.source for r in readings} == {"gpus", "procs", "logs", "stacks"}
    assert all(r.payload is not None for r in readings)


def test_decode_lines(benchmark):
    benchmark.group = "serialize"
    readings = benchmark(_decode_all, reading_from_json, LINES)
    _check(readings)
    assert readings == _decode_all(reading_from_data, DATA)


def test_decode_data(benchmark):
    benchmark.group = "serialize"
    _check(benchmark(_decode_all, reading_from_data, DATA))


def test_agent_lines(benchmark):
    benchmark.group = "serialize"
    messages = benchmark(_decode_all, protocol.decode, AGENT_LINES)
    _check([m.reading for m in messages])


def test_json_loads(benchmark):
    benchmark.group = "serialize"
    benchmark(_decode_all, json.loads, LINES)


def test_encode(benchmark):
    benchmark.group = "serialize"
    readings = _decode_all(reading_from_data, DATA)
    data = benchmark(_decode_all, reading_to_data, readings)
    assert json.dumps(data) == json.dumps(_decode_all(to_data, readings))


@pytest.fixture(scope="module")
def baseline():
    if not BASELINE:
        pytest.skip("RLTUI_BENCH_SERIALIZE_BASELINE is not set")
    spec = importlib.util.spec_from_file_location("serialize_baseline", BASELINE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_baseline_lines(benchmark, baseline):
    benchmark.group = "serialize"
    readings = benchmark(_loads_then, baseline.reading_from_data, LINES)
    assert readings == _decode_all(reading_from_json, LINES)


def test_baseline_data(benchmark, baseline):
    benchmark.group = "serialize"
    readings = benchmark(_decode_all, baseline.reading_from_data, DATA)
    assert readings == _decode_all(reading_from_data, DATA)


def test_baseline_encode(benchmark, baseline):
    benchmark.group = "serialize"
    readings = _decode_all(reading_from_data, DATA)
    data = benchmark(_decode_all, baseline.reading_to_data, readings)
    assert json.dumps(data) == json.dumps(_decode_all(reading_to_data, readings))
