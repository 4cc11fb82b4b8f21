"""Model values to and from plain JSON data."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rltui import model
from rltui.serialize import (
    PAYLOAD_TYPES,
    from_data,
    reading_from_data,
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
    stdout_path="/data/run/rank3.out", stderr_path=None, partial=True, partial_reason="environ denied",
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
     "$.throttle_reasons"),
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
    with pytest.raises(ValueError, match=r"^\$\.procs\[0\]: "):
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
    r = reading_from_data({"source": "future-source", "timestamp": 1.0, "payload": {"lines": ["a"]}})
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
