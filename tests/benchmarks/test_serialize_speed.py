"""Cost of decoding node agents' readings (``rltui.serialize.reading_from_data``).

A view of many nodes decodes every reading every node agent sends: with 64 nodes x 8 ranks the
decoding, not ``json.loads``, was most of the reader threads' CPU. The readings here are the
recorded ones of a real demo run (gpus, procs, logs and stacks readings), parsed with
``json.loads`` once up front; what is timed is decoding all of them into model values.
``json_loads`` times parsing the same lines, the floor the decoding compares with.

To compare with another version of the module (e.g. the one before a change), point
``RLTUI_BENCH_SERIALIZE_BASELINE`` at a copy of it; ``decode_baseline`` then times that copy on
the same readings (and checks that it decodes them to equal values). Nothing asserts a timing.
Run:
``git show REV:rltui/serialize.py > old_serialize.py`` (REV: the version to compare with)
``RLTUI_BENCH_SERIALIZE_BASELINE=old_serialize.py python -m pytest
tests/benchmarks/test_serialize_speed.py --benchmark-only``
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from rltui.serialize import reading_from_data

SCENARIO = Path(__file__).parents[2] / "fixtures" / "scenarios" / "demo-cleanup-deadlock"
LINES = (SCENARIO / "readings.jsonl").read_text().splitlines()
DATA = [json.loads(line) for line in LINES]
BASELINE = os.environ.get("RLTUI_BENCH_SERIALIZE_BASELINE", "")


def _decode_all(decode, data):
    return [decode(d) for d in data]


def _parse_all(lines):
    return [json.loads(line) for line in lines]


def test_decode_readings(benchmark):
    benchmark.group = "serialize"
    readings = benchmark(_decode_all, reading_from_data, DATA)
    assert len(readings) == len(DATA)
    assert {r.source for r in readings} == {"gpus", "procs", "logs", "stacks"}
    assert all(r.payload is not None for r in readings)


def test_json_loads(benchmark):
    benchmark.group = "serialize"
    benchmark(_parse_all, LINES)


@pytest.mark.skipif(not BASELINE, reason="RLTUI_BENCH_SERIALIZE_BASELINE is not set")
def test_decode_baseline(benchmark):
    spec = importlib.util.spec_from_file_location("serialize_baseline", BASELINE)
    baseline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(baseline)
    benchmark.group = "serialize"
    readings = benchmark(_decode_all, baseline.reading_from_data, DATA)
    assert readings == _decode_all(reading_from_data, DATA)
