"""Model values to and from plain JSON data."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rltui import model, serialize
from rltui.serialize import (
    PAYLOAD_TYPES,
    from_data,
    reading_from_data,
    reading_from_json,
    reading_to_data,
    register_payload,
    to_data,
)


def _json_round_trip(cls, value):
    text = json.dumps(to_data(value))
    return from_data(cls, json.loads(text))


GPU_PROC = model.GpuProcess(pid=4242, used_memory=3 * 2**30, local=False)
GPU = model.GpuSample(
    index=3, name="NVIDIA H100 80GB HBM3", uuid="GPU-1234", util=97.0, mem_util=40.5,
    mem_used=70 * 2**30, mem_total=80 * 2**30, power_w=612.5, power_limit_w=700.0,
    temperature_c=71.0, sm_clock_mhz=1980, throttle_reasons=("sw_power_cap", "hw_slowdown"),
    ecc_errors=0, processes=(GPU_PROC, model.GpuProcess(pid=7)), simulated=True, error="",
)
GPU_BARE = model.GpuSample(index=0, name="x", uuid="u")
PROC = model.ProcInfo(
    pid=100, ppid=1, name="python", cmdline=("python", "train.py", "--lr", "1e-6"), rank=3,
    local_rank=3, world_size=8, local_world_size=8, role="trainer", cpu_percent=99.5,
    rss=12 * 2**30, state="sleeping", num_threads=64, create_time=1000.25, gpu_index=3,
    gpu_from="nvml", debug_env=(("NCCL_DEBUG", "INFO"), ("NCCL_TIMEOUT", "300")),
    stdout_path="/data/run/rank3.out", stderr_path=None, partial=True,
    partial_reason="environ denied",
)
DEPARTED = model.DepartedRank(pid=103, rank=3, last_seen=1001.0, gone_since=1002.5, reason="zombie")
SOURCE = model.SourceState(name="gpus", status=model.DENIED, last_reading=5.0, last_ok=None,
                           message="m", remedy="r")
SNAP = model.NodeSnapshot(
    timestamp=1010.0, host="node-1", job="--match train", gpus=(GPU, GPU_BARE),
    gpu_simulated=True, foreign_gpu_pids=(9, 10), procs=(PROC, model.ProcInfo(pid=5)),
    departed=(DEPARTED,), sources=(SOURCE,),
)
SYMPTOM = model.Symptom(id="rank-exited", severity="critical", title="t", ranks=(1, 2),
                        evidence=("e1", "e2"), next_steps=("n",), since=1002.5)
DIAGNOSIS = model.Diagnosis(timestamp=1010.0, verdict="critical", symptoms=(SYMPTOM,),
                            notes=("a note",))

EVERY_VALUE = [
    (model.GpuProcess, GPU_PROC),
    (model.GpuSample, GPU),
    (model.GpuSample, GPU_BARE),
    (model.GpuPoll, model.GpuPoll(gpus=(GPU, GPU_BARE), driver_version="550.54",
                                  simulated=False, foreign_pids=(1, 2))),
    (model.ProcInfo, PROC),
    (model.ProcInfo, model.ProcInfo(pid=1)),
    (model.ProcPoll, model.ProcPoll(procs=(PROC,), how="env RANK/LOCAL_RANK", denied=2)),
    (model.DepartedRank, DEPARTED),
    (model.SourceState, SOURCE),
    (model.NodeSnapshot, SNAP),
    (model.Symptom, SYMPTOM),
    (model.Symptom, model.Symptom(id="x", severity="info", title="")),
    (model.Diagnosis, DIAGNOSIS),
    (model.Reading, model.Reading(source="gpus", timestamp=1.5, status=model.ERROR,
                                  message="NVML: driver not loaded", remedy="load it")),
]


@pytest.mark.parametrize(("cls", "value"), EVERY_VALUE,
                         ids=[f"{c.__name__}-{i}" for i, (c, _) in enumerate(EVERY_VALUE)])
def test_every_model_type_round_trips_through_json(cls, value):
    back = _json_round_trip(cls, value)
    assert back == value
    assert type(back) is cls


def test_tuples_come_back_as_tuples_not_lists():
    back = _json_round_trip(model.ProcInfo, PROC)
    assert isinstance(back.cmdline, tuple)
    assert isinstance(back.debug_env, tuple)
    assert all(isinstance(pair, tuple) for pair in back.debug_env)


def test_to_data_makes_plain_json_types():
    data = to_data(SNAP)
    assert isinstance(data, dict)
    assert data["gpus"][0]["throttle_reasons"] == ["sw_power_cap", "hw_slowdown"]
    assert data["procs"][0]["debug_env"] == [["NCCL_DEBUG", "INFO"], ["NCCL_TIMEOUT", "300"]]
    assert json.loads(json.dumps(data)) == data


def test_to_data_sorts_sets_and_stringifies_dict_keys():
    assert to_data({1: {3, 1, 2}}) == {"1": [1, 2, 3]}


# -- hypothesis ------------------------------------------------------------------------------

_floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
_opt_float = st.none() | _floats
_opt_int = st.none() | st.integers(min_value=0, max_value=2**53)
_text = st.text(max_size=20)

gpu_processes = st.builds(model.GpuProcess, pid=st.integers(0, 2**31), used_memory=_opt_int,
                          local=st.booleans())
gpu_samples = st.builds(
    model.GpuSample,
    index=st.integers(0, 64), name=_text, uuid=_text, util=_opt_float, mem_util=_opt_float,
    mem_used=_opt_int, mem_total=_opt_int, power_w=_opt_float, power_limit_w=_opt_float,
    temperature_c=_opt_float, sm_clock_mhz=_opt_int,
    throttle_reasons=st.none() | st.tuples() | st.lists(_text, max_size=3).map(tuple),
    ecc_errors=_opt_int, processes=st.lists(gpu_processes, max_size=3).map(tuple),
    simulated=st.booleans(), error=_text,
)
proc_infos = st.builds(
    model.ProcInfo,
    pid=st.integers(1, 2**22), ppid=_opt_int, name=_text,
    cmdline=st.lists(_text, max_size=4).map(tuple), rank=_opt_int, local_rank=_opt_int,
    world_size=_opt_int, local_world_size=_opt_int, role=_text, cpu_percent=_opt_float,
    rss=_opt_int, state=st.sampled_from(["running", "sleeping", "zombie", "disk-sleep", ""]),
    num_threads=_opt_int, create_time=_opt_float, gpu_index=_opt_int,
    gpu_from=st.sampled_from(["", "nvml", "env"]),
    debug_env=st.lists(st.tuples(_text, _text), max_size=3).map(tuple),
    stdout_path=st.none() | _text, stderr_path=st.none() | _text, partial=st.booleans(),
    partial_reason=_text,
)


@settings(max_examples=50, deadline=None, database=None)
@given(gpu_samples)
def test_gpu_sample_round_trip_property(sample):
    assert _json_round_trip(model.GpuSample, sample) == sample


@settings(max_examples=50, deadline=None, database=None)
@given(proc_infos)
def test_proc_info_round_trip_property(info):
    assert _json_round_trip(model.ProcInfo, info) == info


@settings(max_examples=20, deadline=None, database=None)
@given(st.lists(gpu_samples, max_size=4), st.lists(proc_infos, max_size=4), _floats)
def test_readings_round_trip_property(gpus, procs, ts):
    for reading in (
        model.Reading("gpus", ts, model.OK, model.GpuPoll(gpus=tuple(gpus))),
        model.Reading("procs", ts, model.OK, model.ProcPoll(procs=tuple(procs), how="h")),
    ):
        data = json.loads(json.dumps(reading_to_data(reading)))
        assert reading_from_data(data) == reading


# -- tolerance and strictness ----------------------------------------------------------------

def test_unknown_keys_are_ignored_at_every_level():
    data = to_data(model.GpuPoll(gpus=(GPU,)))
    data["from_the_future"] = 1
    data["gpus"][0]["nvlink"] = {"x": [1, 2]}
    data["gpus"][0]["processes"][0]["cgroup"] = "/a"
    assert from_data(model.GpuPoll, data) == model.GpuPoll(gpus=(GPU,))


def test_missing_keys_take_the_defaults():
    assert from_data(model.ProcInfo, {"pid": 5}) == model.ProcInfo(pid=5)
    assert from_data(model.GpuSample, {"index": 1, "name": "n", "uuid": "u"}) == \
        model.GpuSample(index=1, name="n", uuid="u")


def test_integers_are_accepted_for_floats():
    back = from_data(model.GpuSample, {"index": 0, "name": "n", "uuid": "u", "util": 50})
    assert back.util == 50.0 and isinstance(back.util, float)


@pytest.mark.parametrize(("cls", "data", "path"), [
    (model.GpuSample, {"index": "0", "name": "n", "uuid": "u"}, "$.index"),
    (model.GpuSample, {"index": True, "name": "n", "uuid": "u"}, "$.index"),
    (model.GpuSample, {"index": 0, "name": 5, "uuid": "u"}, "$.name"),
    (model.GpuSample, {"index": 0, "name": "n", "uuid": "u", "util": "97%"}, "$.util"),
    (model.GpuSample, {"index": 0, "name": "n", "uuid": "u", "util": False}, "$.util"),
    (model.GpuSample, {"index": 0, "name": "n", "uuid": "u", "processes": {}}, "$.processes"),
    (model.GpuSample, {"index": 0, "name": "n", "uuid": "u", "processes": [{"pid": "1"}]},
     "$.processes[0].pid"),
    (model.GpuSample, {"index": 0, "name": "n", "uuid": "u", "simulated": 1}, "$.simulated"),
    (model.GpuSample, {"index": 0, "name": "n", "uuid": "u", "throttle_reasons": [1]},
     "$.throttle_reasons[0]"),
    (model.GpuPoll, {"gpus": [{"index": 0, "name": "n", "uuid": "u"}, {"index": 1.5}]},
     "$.gpus[1].index"),
    (model.GpuPoll, {"gpus": "all"}, "$.gpus"),
    (model.GpuPoll, [], "$"),
    (model.ProcInfo, {"pid": 1, "debug_env": [["A", "B", "C"]]}, "$.debug_env[0]"),
    (model.ProcInfo, {"pid": 1, "debug_env": [["A", 2]]}, "$.debug_env[0][1]"),
    (model.ProcInfo, {"pid": 1, "cmdline": "python train.py"}, "$.cmdline"),
    (model.ProcPoll, {"procs": [{"pid": None}]}, "$.procs[0].pid"),
])
def test_wrong_types_are_rejected_with_the_path(cls, data, path):
    with pytest.raises(ValueError) as err:
        from_data(cls, data)
    assert f"{path}:" in str(err.value)


def test_missing_required_field_is_a_value_error_not_a_type_error():
    with pytest.raises(ValueError, match=r"^\$\.procs\[0\]\.pid: missing$"):
        from_data(model.ProcPoll, {"procs": [{"name": "python"}]})


# -- readings --------------------------------------------------------------------------------

def _reading_data(**over):
    data = {"source": "gpus", "timestamp": 12.5, "status": "ok",
            "payload": to_data(model.GpuPoll(gpus=(GPU,), driver_version="550")),
            "message": "", "remedy": ""}
    data.update(over)
    return data


def test_reading_from_data_builds_a_gpu_poll_payload():
    r = reading_from_data(_reading_data())
    assert isinstance(r.payload, model.GpuPoll)
    assert r.payload.gpus == (GPU,)
    assert r.payload.driver_version == "550"
    assert r.timestamp == 12.5 and r.status == model.OK


def test_reading_from_data_builds_a_proc_poll_payload():
    poll = model.ProcPoll(procs=(PROC,), how="--pid 100", denied=1)
    r = reading_from_data(_reading_data(source="procs", payload=to_data(poll)))
    assert r.payload == poll


def test_failed_reading_keeps_a_null_payload():
    r = reading_from_data(_reading_data(status="unavailable", payload=None,
                                        message="no driver", remedy="install it"))
    assert r == model.Reading("gpus", 12.5, model.UNAVAILABLE, None, "no driver", "install it")


def test_reading_defaults_for_missing_status_message_remedy():
    r = reading_from_data({"source": "gpus", "timestamp": 1})
    assert r == model.Reading("gpus", 1.0, model.OK)


def test_unknown_source_keeps_the_raw_payload():
    r = reading_from_data({"source": "future-source", "timestamp": 1.0,
                           "payload": {"lines": ["a"]}})
    assert r.payload == {"lines": ["a"]}


def test_registered_payload_type_is_decoded(monkeypatch):
    monkeypatch.delitem(PAYLOAD_TYPES, "gpus2", raising=False)
    monkeypatch.setitem(PAYLOAD_TYPES, "gpus2", None)  # the registry is restored afterwards
    assert reading_from_data({"source": "gpus2", "timestamp": 1.0, "payload": {}}).payload == {}
    register_payload("gpus2", model.GpuPoll)
    r = reading_from_data({"source": "gpus2", "timestamp": 1.0, "payload": {"driver_version": "1"}})
    assert r.payload == model.GpuPoll(driver_version="1")


@pytest.mark.parametrize(("data", "fragment"), [
    ([], "line 7: a reading must be an object"),
    ({"timestamp": 1.0}, "line 7.source"),
    ({"source": 3, "timestamp": 1.0}, "line 7.source"),
    ({"source": "gpus"}, "line 7.timestamp"),
    ({"source": "gpus", "timestamp": "now"}, "line 7.timestamp"),
    ({"source": "gpus", "timestamp": 1.0, "status": 0}, "line 7.status"),
    ({"source": "gpus", "timestamp": 1.0, "payload": {"gpus": [{"index": "x"}]}},
     "line 7.payload.gpus[0].index"),
    ({"source": "procs", "timestamp": 1.0, "payload": {"procs": [{"pid": 1, "rank": "0"}]}},
     "line 7.payload.procs[0].rank"),
])
def test_bad_readings_are_rejected_with_the_path(data, fragment):
    with pytest.raises(ValueError) as err:
        reading_from_data(data, "line 7")
    assert fragment in str(err.value)


# -- recorded readings, and the two ways in ---------------------------------------------------
# A reading comes in as a line of JSON (recordings, node agents: ``reading_from_json``, parsed and
# decoded in one pass by msgspec) or as data already parsed (``reading_from_data``). The tests
# hold the two to the same results on recorded readings and on every way of spoiling them one
# value at a time, and ``reading_to_data`` (msgspec) to the bytes ``to_data`` writes.

SCENARIOS = sorted(Path(__file__).parents[2].glob("fixtures/scenarios/*/readings.jsonl"))


def _recorded(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _model_values(value):
    """Every model value (a msgspec Struct) inside ``value``, nested ones included."""
    if isinstance(value, msgspec.Struct):
        yield value
        for name in value.__struct_fields__:
            yield from _model_values(getattr(value, name))
    elif isinstance(value, tuple):
        for item in value:
            yield from _model_values(item)


def test_the_recorded_scenarios_are_found():
    assert len(SCENARIOS) >= 5


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.parent.name)
def test_every_model_type_in_recorded_readings_round_trips(path):
    types_seen = set()
    for data in _recorded(path):
        reading = reading_from_data(data)
        assert reading_from_data(json.loads(json.dumps(reading_to_data(reading)))) == reading
        for value in _model_values(reading.payload):
            cls = type(value)
            types_seen.add(cls)
            back = from_data(cls, json.loads(json.dumps(to_data(value))))
            assert back == value
            assert type(back) is cls
    assert {model.GpuPoll, model.GpuSample, model.GpuProcess, model.ProcPoll, model.ProcInfo,
            model.LogPoll, model.LogUpdate} <= types_seen


def test_recorded_readings_cover_the_nested_types():
    types_seen = {type(v) for path in SCENARIOS for data in _recorded(path)
                  for v in _model_values(reading_from_data(data).payload)}
    assert {model.LogLine, model.StepRecord, model.LogEvent, model.StackPoll,
            model.ProcessDump, model.ThreadStack, model.Frame} <= types_seen


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.parent.name)
def test_recorded_lines_decode_in_one_pass_as_from_parsed_data(path):
    readings = serialize._readings()
    for line in path.read_bytes().splitlines():
        if line.strip():
            # straight from the bytes, no fallback: the one-pass decoder takes real readings
            one_pass = serialize._reading(readings.decoder.decode(line), readings.source_of)
            assert one_pass == reading_from_json(line) == reading_from_data(json.loads(line))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.parent.name)
def test_reading_to_data_writes_the_bytes_to_data_writes(path):
    """Recordings and the agent's lines stay byte for byte what they were."""
    for data in _recorded(path):
        reading = reading_from_data(data)
        assert json.dumps(reading_to_data(reading)) == json.dumps(to_data(reading))


def test_reading_to_data_of_what_msgspec_would_write_otherwise_is_to_data():
    odd = model.Reading("future", 1.0, model.OK, {"tags": {"b", "a", "c"}, "n": float("nan")})
    assert json.dumps(reading_to_data(odd)) == json.dumps(to_data(odd))
    assert reading_to_data(odd)["payload"]["tags"] == ["a", "b", "c"]


def test_model_fields_hold_nothing_msgspec_writes_otherwise_than_to_data():
    """``reading_to_data`` writes model payloads with msgspec: no field may hold a set (sorted by
    ``to_data``), a dict (keys made strings) or values of any type."""
    checked = 0
    for cls in serialize.MODEL_TYPES:
        for name, hint in typing.get_type_hints(cls, vars(model)).items():
            if (cls, name) == (model.Reading, "payload"):
                continue
            text = str(hint)
            assert not any(word in text for word in ("set", "dict", "Any")), (cls, name, text)
            checked += 1
    assert checked > 100


def test_not_finite_numbers_python_writes_decode():
    """Python's json writes NaN and Infinity (a loss of nan in a step line is news); msgspec does
    not parse them, and the line is decoded the longer way."""
    reading = model.Reading("logs", 2.0, model.OK, model.LogPoll(files=(model.LogUpdate(
        "/l", model.OK, steps=(model.StepRecord(1, 1, 2.0, metrics=(("loss", float("inf")),
                                                                   ("reward", -1.5))),)),)))
    line = json.dumps(reading_to_data(reading))
    assert "Infinity" in line
    assert reading_from_json(line) == reading
    assert reading_from_json(line.encode()) == reading


def test_a_lone_surrogate_in_a_name_decodes():
    reading = model.Reading("procs", 1.0, model.OK, model.ProcPoll(procs=(model.ProcInfo(
        1, cmdline=("python", "/data/bad-\udcff.py")),)))
    assert reading_from_json(json.dumps(reading_to_data(reading))) == reading


def test_reading_from_json_says_what_is_not_json():
    with pytest.raises(ValueError):
        reading_from_json(b'{"source": "gpus", "timest')
    with pytest.raises(RecursionError):
        reading_from_json(b"[" * 100_000)


def test_an_unknown_source_decodes_from_a_line_too():
    r = reading_from_json(b'{"source": "future", "timestamp": 3, "payload": {"x": [1]}}')
    assert r == model.Reading("future", 3.0, model.OK, {"x": [1]})


def test_a_newly_registered_payload_type_is_decoded_from_lines(monkeypatch):
    monkeypatch.setitem(PAYLOAD_TYPES, "gpus2", model.GpuPoll)
    r = reading_from_json(b'{"source": "gpus2", "timestamp": 1, "payload": {"simulated": true}}')
    assert r.payload == model.GpuPoll(simulated=True)
    monkeypatch.delitem(PAYLOAD_TYPES, "gpus2")
    assert reading_from_json(b'{"source": "gpus2", "timestamp": 1, "payload": {}}').payload == {}


_DELETE = object()
_SPOILERS = [None, True, False, 0, 7, -1.5, 2.0, 2**70, "", "x", [], ["x"], [1, 2], [None],
             [["a", "b"]], {}, {"pid": 1}, _DELETE]


def _paths(data, path=()):
    yield path
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _paths(value, (*path, i))


def _replaced(data, path, new):
    """``data`` with the value at ``path`` replaced by ``new`` (or deleted), copying only the
    containers on the way."""
    if not path:
        return new
    out = dict(data) if isinstance(data, dict) else list(data)
    if len(path) == 1 and new is _DELETE:
        del out[path[0]]
    else:
        out[path[0]] = _replaced(data[path[0]], path[1:], new)
    return out


def _outcome(decode, *args):
    try:
        return "ok", decode(*args)
    except Exception as exc:  # noqa: BLE001 - the error is the outcome compared
        return type(exc).__name__, str(exc)


def test_spoiled_readings_decode_or_fail_alike_from_lines_and_data():
    """Every value (and key) of one recorded reading per source, replaced by values of every
    JSON type in turn: from a line and from parsed data, the same reading or the same error,
    and every error a ValueError that says where, from the reading's own path."""
    recorded = _recorded(SCENARIOS[0].parent.parent / "demo-cleanup-deadlock" / "readings.jsonl")
    one_per_source = {d["source"]: d for d in recorded}
    assert set(one_per_source) == {"gpus", "procs", "logs", "stacks"}
    outcomes = set()
    for data in one_per_source.values():
        for path in list(_paths(data)):
            for new in _SPOILERS if path else [[], "x", None]:
                if new is _DELETE and (not path or isinstance(path[-1], int)):
                    continue
                spoiled = _replaced(data, path, new)
                outcome = _outcome(reading_from_data, spoiled, "line 3")
                assert outcome == _outcome(reading_from_json, json.dumps(spoiled), "line 3"), path
                if outcome[0] != "ok":
                    assert outcome[1].startswith("line 3"), (path, outcome)
                outcomes.add(outcome[0])
    assert outcomes == {"ok", "ValueError"}


@pytest.mark.parametrize(("data", "message"), [
    ({"source": "procs", "timestamp": 1.0,
      "payload": {"procs": [{"pid": 1}, {"pid": 2}, {"pid": 3}, {"pid": 4, "rank": "3"}]}},
     "$.payload.procs[3].rank: expected int | null, got str"),
    ({"source": "procs", "timestamp": 1.0, "payload": {"procs": [{"pid": None}]}},
     "$.payload.procs[0].pid: expected int, got null"),
    ({"source": "procs", "timestamp": 1.0, "payload": {"procs": [{"pid": 1, "rank": True}]}},
     "$.payload.procs[0].rank: expected int | null, got bool"),
    ({"source": "gpus", "timestamp": 1.0,
      "payload": {"gpus": [{"index": True, "name": "n", "uuid": "u"}]}},
     "$.payload.gpus[0].index: expected int, got bool"),
    ({"source": "gpus", "timestamp": 1.0,
      "payload": {"gpus": [{"index": 0, "name": "n", "uuid": "u", "util": True}]}},
     "$.payload.gpus[0].util: expected float | null, got bool"),
    ({"source": "gpus", "timestamp": True}, "$.timestamp: expected float, got bool"),
    ({"source": "gpus", "timestamp": 1, "payload": {"gpus": [
        {"index": 0, "name": "n", "uuid": "u",
         "processes": [{"pid": 1}, {"pid": 2, "local": 1}]}]}},
     "$.payload.gpus[0].processes[1].local: expected bool, got int"),
    ({"source": "stacks", "timestamp": 1.0, "payload": {"dumps": [{"pid": 1, "threads": [
        {"thread_id": 1, "frames": [{"name": "a", "filename": "f"},
                                    {"name": "b", "filename": "f", "line": "7"}]}]}]}},
     "$.payload.dumps[0].threads[0].frames[1].line: expected int, got str"),
    ({"source": "logs", "timestamp": 1.0, "payload": {"files": [{"path": "p", "status": "ok",
        "events": [{"kind": "k", "line_no": 1, "end_line": 1, "arrival": 1.0, "summary": "s",
                    "fields": [["a", 1], ["b", [2]]]}]}]}},
     "$.payload.files[0].events[0].fields[1][1]: expected int | float | str | null, "
     "got array"),
    ({"source": "logs", "timestamp": 1.0, "payload": {"files": [{"path": "p", "status": "ok",
        "steps": [{"step": 1, "line_no": 1, "arrival": 1.0, "metrics": [["loss", None]]}]}]}},
     "$.payload.files[0].steps[0].metrics[0][1]: expected float, got null"),
    ({"source": "procs", "timestamp": 1.0,
      "payload": {"procs": [{"pid": 1, "debug_env": [["A", "B"], ["C"]]}]}},
     "$.payload.procs[0].debug_env[1]: expected array of length 2, got 1"),
    ({"source": "gpus", "timestamp": 1.0, "payload": {"gpus": [
        {"index": 0, "name": "n", "uuid": "u", "throttle_reasons": ["a", None]}]}},
     "$.payload.gpus[0].throttle_reasons[1]: expected str, got null"),
    ({"source": "gpus", "timestamp": 1.0, "payload": {"gpus": [{"index": 0, "name": "n"}]}},
     "$.payload.gpus[0].uuid: missing"),
    ({"timestamp": 1.0}, "$.source: missing"),
    ({"source": "gpus", "timestamp": 1.0, "payload": []},
     "$.payload: expected object | null, got array"),
])
def test_error_messages_name_the_field_and_where(data, message):
    for decode in (reading_from_data, lambda d: reading_from_json(json.dumps(d))):
        with pytest.raises(ValueError) as err:
            decode(data)
        assert str(err.value) == message


def test_error_text_keeps_a_message_it_does_not_know():
    import msgspec
    assert serialize.error_text(msgspec.ValidationError("Number out of range - at `$.a[0]`"),
                                "line 2") == "line 2.a[0]: number out of range"
    assert serialize.error_text(msgspec.ValidationError("Something new"), "x") == \
        "x: something new"


# A registered payload type need not be the model's: defaults, default factories, keyword-only
# fields and nested optional dataclasses decode as they do for the model's.

@dataclasses.dataclass(frozen=True)
class _Part:
    n: int


@dataclasses.dataclass(frozen=True)
class _Payload:
    a: int
    items: list[int] = dataclasses.field(default_factory=list)
    pair: tuple[str, float] = ("x", 1.0)
    anything: str | int | float | None = None
    part: _Part | None = None
    table: dict[str, float] = dataclasses.field(default_factory=dict)
    later: tuple[int, ...] | None = dataclasses.field(default=None, kw_only=True)


def test_a_registered_dataclass_payload_decodes(monkeypatch):
    monkeypatch.setitem(PAYLOAD_TYPES, "odd", _Payload)
    data = {"source": "odd", "timestamp": 1, "payload": {
        "a": 1, "items": [1, 2], "pair": ["y", 2], "anything": 2.5, "part": {"n": 3},
        "table": {"k": 1}, "later": [4]}}
    want = _Payload(1, [1, 2], ("y", 2.0), 2.5, _Part(3), {"k": 1.0}, later=(4,))
    assert reading_from_data(data).payload == want
    assert reading_from_json(json.dumps(data)).payload == want
    assert reading_from_data({"source": "odd", "timestamp": 1, "payload": {"a": 1}}).payload \
        == _Payload(1)
    with pytest.raises(ValueError, match=r"^\$\.payload\.items\[1\]: expected int, got str$"):
        reading_from_data({"source": "odd", "timestamp": 1, "payload": {"a": 1,
                                                                       "items": [1, "x"]}})


def test_a_lone_surrogate_in_a_reading_names_the_reading():
    import json as _json
    data = _json.loads(r'{"source": "gpus", "timestamp": "\udcff"}')
    with pytest.raises(ValueError, match=r"^line 3: a string that is not valid Unicode"):
        serialize.reading_from_data(data, "line 3")
